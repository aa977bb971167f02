"""A downstream refuses an upstream pane log that is not the table it has read (rebuilt, gone),
whatever its checkpoint holds: committed batches, a planned batch, offsets without table ids."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from jobs.checkpoint.logs import recorded_offsets
from jobs.checkpoint.offsets import head_at
from jobs.config.load import load_pipeline
from jobs.reading.pane_log.reader import PaneLogStreamReader, VersionRange
from jobs.sources.pane_log.identity import check_upstream
from sinks.lake.errors import UpstreamChanged
from tests.jobs.test_pane_log_config import configs


def make_table(path: Path, versions: int) -> str:
    """A Delta table of ``versions`` commits at ``path`` (what the id check reads of a pane
    log: its id, versions and commit times); returns its table id."""
    from deltalake import write_deltalake

    for i in range(versions):
        write_deltalake(str(path), pa.table({"x": [i]}), mode="append")
    return str(head_at(str(path)).table)


def write_offset(
    checkpoint: Path,
    batch_id: int,
    offset: dict,
    *,
    committed: bool,
    written_s: float | None = None,
) -> None:
    """A batch's offset file as Spark writes it (the pane-log source, then the control
    stream's file source); ``committed``: its commit file too; ``written_s``: its mtime."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    path = checkpoint / "offsets" / str(batch_id)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000, "conf": {}}
    path.write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(offset)}\n" + '{"logOffset":0}')
    if written_s is not None:
        os.utime(path, (written_s, written_s))
    if committed:
        (checkpoint / "commits").mkdir(exist_ok=True)
        (checkpoint / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


@pytest.fixture
def chain(tmp_path):
    """(downstream pipeline, its upstream's pane-log path) over a configuration path."""
    down = load_pipeline(configs(tmp_path))
    return down, Path(down.source.upstream.pane_log)


def rebuild(pane_log: Path, versions: int) -> str:
    """The documented upstream rebuild: its lake moved aside, run again (a new table)."""
    shutil.move(str(pane_log.parent), str(pane_log.parent) + ".old")
    return make_table(pane_log, versions)


def test_a_rebuilt_upstream_is_refused_saying_how_to_rebuild_the_downstream(chain):
    down, pane_log = chain
    ckpt = Path(down.checkpoint_path)
    assert check_upstream(down) is None  # no pane log yet, nothing read: any table will do
    old = make_table(pane_log, 3)
    assert check_upstream(down) == old  # nothing read yet: the table there is the start
    write_offset(ckpt, 0, {"version": 1, "table": old}, committed=True)
    # planned, not committed (the run was killed): the replay reads versions 1..2 of `old`
    write_offset(ckpt, 1, {"version": 2, "table": old}, committed=False)
    assert [(r.batch_id, r.offset.version, r.offset.table) for r in recorded_offsets(ckpt)] == [
        (0, 1, old),
        (1, 2, old),
    ]
    assert check_upstream(down) == old

    new = rebuild(pane_log, 5)  # more versions than were read: reading on would skip 0..2
    with pytest.raises(UpstreamChanged) as e:
        check_upstream(down)
    message = str(e.value)
    assert "\n" not in message
    assert f"table {new} now, not table {old} that hourly has read up to version 2" in message
    assert f"Rebuild hourly too: move its lake aside (mv {down.lake_path} " in message

    shutil.rmtree(pane_log.parent)  # moved aside, not run again yet
    with pytest.raises(UpstreamChanged, match=f"no pane log at {pane_log} now, but hourly"):
        check_upstream(down)


def test_offsets_without_table_ids_are_adopted_only_if_the_table_can_have_been_read(chain):
    down, pane_log = chain
    ckpt = Path(down.checkpoint_path)
    table = make_table(pane_log, 3)
    # written by an older panestore after the upstream committed the versions it names
    write_offset(ckpt, 0, {"version": -1}, committed=True)
    write_offset(ckpt, 1, {"version": 1}, committed=True)
    write_offset(ckpt, 2, {"version": 2}, committed=False)
    assert check_upstream(down) == table

    for batch in (0, 1, 2):  # the same offsets, written a day before the table's commits
        os.utime(ckpt / "offsets" / str(batch), (0, time.time() - 86_400))
    with pytest.raises(
        UpstreamChanged,
        match=r"version 1 of the upstream's pane log .* was "
        r"committed after batch 1 read it: the upstream was rebuilt",
    ):
        check_upstream(down)

    rebuild(pane_log, 2)  # shorter than what was read
    with pytest.raises(
        UpstreamChanged,
        match=r"up to version 2, and the upstream's pane log .* "
        r"ends at version 1: the upstream was rebuilt",
    ):
        check_upstream(down)

    # an older panestore's reader over a rebuilt (then missing) upstream went back to -1
    write_offset(ckpt, 3, {"version": -1}, committed=True)
    make_table(pane_log, 2)  # version 2 exists again
    with pytest.raises(UpstreamChanged, match="went back from version 2 to -1 at batch 3"):
        check_upstream(down)


def reader(pane_log: Path, table: str | None) -> PaneLogStreamReader:
    options = {"path": str(pane_log), "pipeline": "sessions", "table": table or ""}
    return PaneLogStreamReader(options, [("country", "string")])


def test_the_reader_refuses_another_table_when_it_lists_plans_or_reads(chain):
    _, pane_log = chain
    old = make_table(pane_log, 2)
    assert reader(pane_log, None).latestOffset() == {"version": 1, "table": old}
    first = reader(pane_log, old)
    assert first.latestOffset() == {"version": 1, "table": old}
    # offsets of an older panestore (no table) and the first offset: no table to compare
    (part,) = first.partitions({"version": -1}, {"version": 1, "table": old})
    assert (part.after, part.upto, part.table) == (-1, 1, old)
    assert first.partitions({"version": 0}, {"version": 1, "table": old})[0].table == old

    new = rebuild(pane_log, 4)
    with pytest.raises(UpstreamChanged, match=f"is table {new} now, not table {old}"):
        first.latestOffset()  # the upstream was rebuilt while the downstream runs
    with pytest.raises(UpstreamChanged, match=f"is table {new} now, not table {old}"):
        first.partitions({"version": 1, "table": old}, {"version": 3, "table": new})
    with pytest.raises(UpstreamChanged, match=f"not table {old} whose versions 1..1"):
        list(first.read(VersionRange(0, 1, old)))  # planned on the old table, read on the new
    shutil.rmtree(pane_log.parent)
    with pytest.raises(UpstreamChanged, match=f"is gone, not table {old}"):
        first.latestOffset()


def test_panestore_run_refuses_a_rebuilt_upstream_before_spark_starts(chain, tmp_path, capsys):
    from jobs.cli.commands import main

    down, pane_log = chain
    old = make_table(pane_log, 2)
    write_offset(Path(down.checkpoint_path), 0, {"version": 1, "table": old}, committed=True)
    rebuild(pane_log, 3)
    # (Spark would take seconds to start: it is not); -v: stderr as it is
    assert main(["run", str(tmp_path / "down.toml"), "-v"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("panestore: the upstream 'sessions' was rebuilt: its pane log")
    assert f"Rebuild hourly too: move its lake aside (mv {down.lake_path} " in line


def test_a_follow_run_whose_upstream_is_rebuilt_under_it_stops_with_the_sources_line():
    """The source's refusal reaches the driver inside Spark's error (a Python trace)."""
    from jobs.driver.runs import RunResult, _await_query

    trace = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed when Python streaming data source perform "
        "latestOffset: Traceback (most recent call last):\n  File ...\n"
        "sinks.lake.errors.UpstreamChanged: the upstream pane log at /u/panes is table B now, not "
        "table A that this pipeline has read: the upstream was rebuilt. Rebuild this pipeline "
        "too\n\tat org.apache.spark..."
    )
    query = SimpleNamespace(isActive=False, recentProgress=[], exception=lambda: trace)
    sink = SimpleNamespace(stats={})

    with pytest.raises(UpstreamChanged) as e:
        _await_query(query, sink, RunResult(), print, None)
    assert str(e.value) == (
        "the upstream pane log at /u/panes is table B now, not table A that this pipeline has "
        "read: the upstream was rebuilt. Rebuild this pipeline too"
    )
