"""Control rows: how a run moves the watermark.

A run moves Spark's watermark past what the data says with *control rows*: ``{"kind", "ts"}`` JSON
files under ``<checkpoint>/_control``, a second streaming source of the job (:mod:`jobs.driver.plan`
unions them with the records and drops them after the watermark has seen them).

* the drain sentinel, at the last millisecond Spark timestamps can hold: the watermark moves to
  the end of time and every window closes (:func:`write_drain_sentinel`);
* a tick, at 1970: it moves nothing, but makes Spark run a batch (:func:`write_tick`): a run
  that must record something in a batch (changed landing files).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.config.pipeline import Pipeline
from jobs.sources.files.landing import FILE_SOURCE_OPTIONS
from jobs.sources.files.paths import spark_path
from sinks.lake_format import MAX_TIMESTAMP_MS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

SENTINEL_MS = MAX_TIMESTAMP_MS
"""The drain sentinel's event time: the last millisecond Spark timestamps can hold."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


TS_FIELD = r'"ts"\s*:\s*"([^"]*)"'
"""Where a control row's line holds its event time (the ``ts`` field of its JSON object)."""


def control_stream(spark: SparkSession, pipeline: Pipeline) -> DataFrame:
    """Control rows (``{"kind", "ts"}`` JSON files under ``<checkpoint>/_control``) as their
    event time ``ts``. A line there that is not a control row (no readable ``ts``) moves nothing
    and is ignored.

    Read as text, the ``ts`` field taken with a regular expression: a file source of Spark's
    JSON format costs each run's query ~0.7 s more to build, plan and compile in a fresh JVM
    than one of its text format, whose classes the landing's own text source (JSON lines)
    loads anyway (``docs/decisions.md``, "Control rows read as text")."""
    from pyspark.sql import functions as F

    Path(pipeline.control_path).mkdir(parents=True, exist_ok=True)
    lines = spark.readStream.options(**FILE_SOURCE_OPTIONS).text(spark_path(pipeline.control_path))
    ts = F.regexp_extract(F.col("value"), TS_FIELD, 1).try_cast("timestamp")
    return lines.select(ts.alias("ts")).where("ts IS NOT NULL")


def write_control(pipeline: Pipeline, kind: str, ts_ms: int) -> Path:
    """Drop a control row (``kind``, event time ``ts_ms``) into ``<checkpoint>/_control``,
    atomically."""
    ctl = Path(pipeline.control_path)
    ctl.mkdir(parents=True, exist_ok=True)
    ts = _EPOCH + dt.timedelta(milliseconds=ts_ms)  # exact: no float seconds
    body = json.dumps({"kind": kind, "ts": ts.isoformat(timespec="milliseconds")}) + "\n"
    n = len(list(ctl.glob("*.json")))
    tmp, final = ctl / f".{kind}-{n}.json.tmp", ctl / f"{kind}-{n}.json"
    tmp.write_text(body)
    os.replace(tmp, final)
    return final


def write_drain_sentinel(pipeline: Pipeline) -> Path:
    """The control row that moves the watermark to the end of time (a drain)."""
    return write_control(pipeline, "drain", SENTINEL_MS)


def write_tick(pipeline: Pipeline) -> Path:
    """A control row that only makes Spark run a batch: its event time (1970) moves nothing; the
    batch runs at the watermark Spark computed after the previous one, firing due timers."""
    return write_control(pipeline, "tick", 0)
