"""Control rows: how a run moves the watermark.

A run moves Spark's watermark past what the data says with *control rows*: ``{"kind", "ts"}`` JSON
files under ``<checkpoint>/_control``, a second streaming source of the job (:mod:`jobs.driver.plan`
unions them with the records and drops them after the watermark has seen them).

* the drain sentinel, at the last millisecond Spark timestamps can hold: the watermark moves to
  the end of time and every window closes (:func:`write_drain_sentinel`);
* a tick, at 1970: it moves nothing, but makes Spark run a batch (:func:`write_tick`): a run
  that must record something in a batch (changed landing files).

A control file is named ``<kind>-<n>.json``, ``n`` one more than the highest number there, so a
name is never used twice (Spark's file source takes a path once). After a run whose batches all
committed, :func:`clean_control` deletes the control files a batch took, but the newest: under
``watermark.policy = "writer_noted"`` a run writes one, and the folder Spark lists every batch
would otherwise grow by one file a run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from typing import TYPE_CHECKING

from jobs.checkpoint.files import CheckpointFiles
from jobs.checkpoint.logs import COMMITS, OFFSETS, SOURCES, local_path, log_files
from jobs.config.pipeline import Pipeline
from jobs.reading.files.paths import spark_path
from jobs.sources.files.landing import FILE_SOURCE_OPTIONS
from sinks.lake import MAX_TIMESTAMP_MS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

SENTINEL_MS = MAX_TIMESTAMP_MS
"""The drain sentinel's event time: the last millisecond Spark timestamps can hold."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


TS_FIELD = r'"ts"\s*:\s*"([^"]*)"'
"""Where a control row's line holds its event time (the ``ts`` field of its JSON object)."""
INPUT_FIELD = r'"input"\s*:\s*"([^"]*)"'
"""Where a control row of one input of several holds the input's name (a writers' watermark:
:mod:`jobs.driver.writers_watermark`); a row for the whole pipeline has none."""


def control_stream(spark: SparkSession, pipeline: Pipeline) -> DataFrame:
    """Control rows (``{"kind", "ts"}`` JSON files under ``<checkpoint>/_control``) as their
    event time ``ts`` and the ``input`` they are of (empty: the pipeline's). A line there that
    is not a control row (no readable ``ts``) moves nothing and is ignored.

    Read as text, the ``ts`` field taken with a regular expression: a file source of Spark's
    JSON format costs each run's query ~0.7 s more to build, plan and compile in a fresh JVM
    than one of its text format, whose classes the landing's own text source (JSON lines)
    loads anyway (``docs/decisions.md``, "Control rows read as text")."""
    from pyspark.sql import functions as F

    _control_folder(pipeline)
    lines = spark.readStream.options(**FILE_SOURCE_OPTIONS).text(spark_path(pipeline.control_path))
    ts = F.regexp_extract(F.col("value"), TS_FIELD, 1).try_cast("timestamp")
    of = F.regexp_extract(F.col("value"), INPUT_FIELD, 1)
    return lines.select(ts.alias("ts"), of.alias("input")).where("ts IS NOT NULL")


def _control_folder(pipeline: Pipeline) -> CheckpointFiles:
    """``<checkpoint>/_control``, there for Spark to list: a local folder is made; in a bucket,
    where a folder is a prefix with objects under it, a hidden file (Spark's file source skips
    names starting with ``.``) keeps it."""
    ctl = pipeline.run_files.sub(CONTROL)
    if ctl.local:
        os.makedirs(ctl.root, exist_ok=True)
    elif not ctl.is_dir():
        ctl.create(KEEP, "")
    return ctl


def write_control(pipeline: Pipeline, kind: str, ts_ms: int, of_input: str | None = None) -> str:
    """Drop a control row (``kind``, event time ``ts_ms``; ``of_input``: of that input of
    several, not the pipeline's) into ``<checkpoint>/_control``, whole or not at all, under a
    new name; its location."""
    ctl = _control_folder(pipeline)
    ts = _EPOCH + dt.timedelta(milliseconds=ts_ms)  # exact: no float seconds
    row = {"kind": kind, "ts": ts.isoformat(timespec="milliseconds")}
    if of_input is not None:
        row["input"] = of_input
    body = json.dumps(row) + "\n"
    n = 1 + max((n for _, n in _numbered(ctl)), default=-1)
    while not ctl.create(f"{kind}-{n}.json", body):  # a name is never used twice
        n += 1
    return ctl.uri(f"{kind}-{n}.json")


def write_drain_sentinel(pipeline: Pipeline) -> str:
    """The control row that moves the watermark to the end of time (a drain)."""
    return write_control(pipeline, "drain", SENTINEL_MS)


def write_tick(pipeline: Pipeline) -> str:
    """A control row that only makes Spark run a batch: its event time (1970) moves nothing; the
    batch runs at the watermark Spark computed after the previous one, firing due timers."""
    return write_control(pipeline, "tick", 0)


_NAME = re.compile(r"^[A-Za-z_]+-(\d+)\.json$")
CONTROL, KEEP = "_control", ".keep"


def _numbered(ctl: CheckpointFiles) -> list[tuple[str, int]]:
    """The control files of ``ctl`` (names) and their numbers, oldest first."""
    found = [(n, _NAME.match(n)) for n in ctl.names()]
    return sorted(((n, int(m.group(1))) for n, m in found if m), key=lambda f: f[1])


def clean_control(pipeline: Pipeline) -> int:
    """Delete the control files a batch of the checkpoint took, but the newest (which keeps the
    next name new); how many went. Only after a run whose batches all committed (under its
    lock): a batch replayed after a kill finds every file it took (else it would report it as
    vanished). Costs a listing of ``_control`` and, when it holds more than one file, a read of
    the control source's log (Spark's own, the job's last file source: its newest compacted
    file and the few after it)."""
    ctl = pipeline.run_files.sub(CONTROL)
    files = _numbered(ctl)[:-1]
    ckpt = pipeline.run_files.sub("_checkpoint")
    if not files or _newest(ckpt.sub(OFFSETS)) != _newest(ckpt.sub(COMMITS)):
        return 0  # (a batch planned and not committed: its replay reads what it took)
    sources = ckpt.sub(SOURCES)
    logs = [n for n in sources.names() if n.isdigit()]
    if not logs:
        return 0
    taken = set()
    for path in log_files(sources.sub(max(logs, key=int))):  # the control source's
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            if line.strip():
                taken.add(_same(json.loads(line)["path"]))
    gone = 0
    for name, _ in files:
        if _same(ctl.uri(name)) in taken:
            ctl.remove(name)
            gone += 1
    return gone


def _same(location: str) -> str:
    """A control file's location as compared with Spark's log: a local file's real path, any
    other URI as it is."""
    local = local_path(location)
    return os.path.realpath(local) if local is not None else location


def _newest(log: CheckpointFiles) -> int | None:
    """The newest batch id of a checkpoint log folder (offsets, commits), None if empty."""
    return max((int(n) for n in log.names() if n.isdigit()), default=None)
