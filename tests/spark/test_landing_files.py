"""Every landing file is taken, whatever its modification time, or reported if it cannot be.

Spark's file source skips files older than ``maxFileAge`` (7 days by default) counted from the
newest file it has seen, and skips a file that vanished after its listing with only a log
warning. Neither may lose data: old and future-dated files reach the view, and a vanished file
is a ``rejected`` row naming it and a warning line of the run.
"""

from __future__ import annotations

import io
import json
import os
import time

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark

DAY = 86_400


def make_pipeline(tmp_path, fmt: str = "jsonl", **over):
    from jobs.config.load import pipeline_from_dict

    conf = {
        "name": "backfill",
        "lake": str(tmp_path / "lake"),
        "keys": ["device_id"],
        "event_time": "ts",
        "window": "FixedWindows(1h)",
        "source": {
            "format": fmt,
            "path": str(tmp_path / "landing"),
            "schema": {"device_id": "string", "ts": "timestamp", "seconds": "double"},
        },
        "aggregates": {"plays": "count()", "watched": "sum(seconds)"},
        "state_buckets": 4,
    }
    conf.update(over)
    return pipeline_from_dict(conf)


def land(tmp_path, fmt: str, name: str, device: str, at_s: float, mtime: float | None = None):
    """Land one file holding one view of ``device``; ``mtime``: its modification time."""
    rec = {"device_id": device, "ts": iso(at_s), "seconds": 2.0}
    if fmt == "jsonl":
        path = put(tmp_path / "landing", f"{name}.jsonl", [json.dumps(rec)])
    else:
        import datetime as dt

        import pyarrow as pa
        import pyarrow.parquet as pq

        rec["ts"] = dt.datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
        tmp = tmp_path / "landing" / f".{name}.parquet"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist([rec]), tmp)
        path = tmp.with_name(f"{name}.parquet")
        os.replace(tmp, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def view_and_verify(pipeline) -> dict:
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.sink_spec import view_spec
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification.view_check import verify

    materialize(pipeline)
    report = verify(view_spec(pipeline), elements=load_source_elements(pipeline))
    assert report.ok, str(report)
    rows = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    return {r["device_id"]: r["plays"] for r in rows}


# one listing for every format: Parquet in the slow run only (./dev test --run-slow)
@pytest.mark.parametrize("fmt", ["jsonl", pytest.param("parquet", marks=pytest.mark.slow)])
def test_files_of_any_modification_time_reach_the_view(spark, tmp_path, fmt):
    from deltalake import DeltaTable

    from jobs.driver.runs import run

    pipeline = make_pipeline(tmp_path, fmt)
    now = time.time()
    land(tmp_path, fmt, "first", "a", 10)
    run(pipeline, spark=spark, progress=None)
    # backfills landed after newer files: 8 days old (cp -p, rsync -a), 1960, and one dated
    # 200 years ahead, which must not hide the files that land after it either
    land(tmp_path, fmt, "week-old", "b", 20, mtime=now - 8 * DAY)
    land(tmp_path, fmt, "from-1960", "c", 30, mtime=-10 * 365 * DAY)
    land(tmp_path, fmt, "future", "d", 40, mtime=now + 200 * 365 * DAY)
    run(pipeline, spark=spark, progress=None)
    land(tmp_path, fmt, "after-future", "e", 50)
    land(tmp_path, fmt, "late-backfill", "f", 60, mtime=now - 30 * DAY)
    run(pipeline, spark=spark, drain=True, progress=None)

    assert view_and_verify(pipeline) == {k: 1 for k in "abcdef"}
    assert DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().num_rows == 0


def test_a_file_that_vanishes_before_it_is_read_is_reported(spark, tmp_path, monkeypatch):
    from deltalake import DeltaTable

    import jobs.driver.runs
    from jobs.driver.batch_sink import VANISHED, BatchSink

    pipeline = make_pipeline(
        tmp_path,
        source={
            "path": str(tmp_path / "landing"),
            "max_files_per_trigger": 1,
            "schema": {"device_id": "string", "ts": "timestamp", "seconds": "double"},
        },
    )
    now = time.time()
    paths = [
        land(tmp_path, "jsonl", f"f{i} {d}", d, 10 * i, mtime=now - 100 + i)
        for i, d in enumerate("abc")
    ]

    class DeletingSink(BatchSink):
        """Deletes the second file after the first batch: listed by the run, never read."""

        def __call__(self, df, batch_id: int) -> None:
            super().__call__(df, batch_id)
            if batch_id == 0:
                paths[1].unlink()

    monkeypatch.setattr(jobs.driver.runs, "BatchSink", DeletingSink)
    out = io.StringIO()
    result = jobs.driver.runs.run(pipeline, spark=spark, drain=True, progress=out)

    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    assert [(r["raw"], r["reason"]) for r in rejected] == [(None, VANISHED)]
    assert rejected[0]["source_file"].endswith("/f1%20b.jsonl")
    assert rejected[0]["processing_time_us"] is not None
    assert result.total("rejected") == 1
    assert "WARNING batch 1: input file" in out.getvalue()
    assert "f1%20b.jsonl vanished before it was read" in out.getvalue()
    assert view_and_verify(pipeline) == {"a": 1, "c": 1}


def test_an_unreadable_file_stops_the_run_until_it_is_repaired_or_moved_away(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.config.sink_spec import view_spec
    from jobs.driver.batch_sink import VANISHED
    from jobs.driver.runs import run
    from sinks.lake.run_history import read_runs

    pipeline = make_pipeline(tmp_path, "parquet")
    land(tmp_path, "parquet", "good", "a", 10)
    bad = tmp_path / "landing" / "bad.parquet"
    bad.write_bytes(b"not a parquet file" * 8)
    with pytest.raises(RuntimeError) as failed:
        run(pipeline, spark=spark, progress=None)
    message = str(failed.value)
    assert "bad.parquet could not be read (" in message and "is not a Parquet file" in message
    assert "nothing of its batch was committed" in message
    assert DeltaTable(pipeline.table_path("panes")).version() == 0  # created, nothing appended

    bad.rename(tmp_path / "bad.parquet")  # moved away: the batch replays without it
    run(pipeline, spark=spark, drain=True, progress=None)
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    assert [(r["source_file"].rsplit("/", 1)[1], r["reason"]) for r in rejected] == [
        ("bad.parquet", VANISHED)
    ]
    assert view_and_verify(pipeline) == {"a": 1}
    # the run history: the failed run with its error on one line, then the drain
    failed_run, drained = read_runs(view_spec(pipeline))
    assert failed_run.outcome == "failed" and "bad.parquet could not be read" in failed_run.error
    assert "\n" not in failed_run.error and failed_run.panes == 0
    assert (drained.outcome, drained.mode, drained.rejected) == ("succeeded", "drain", 1)


def test_a_landing_path_like_a_pattern_and_its_subfolders_are_read_as_named(spark, tmp_path):
    """``land[1] #%20`` is not a glob matching the sibling ``land1 #%20``; files in subfolders
    (a writer's folder, date folders) are input; hidden names at any depth are not. The view
    and ``panestore verify`` agree."""
    from deltalake import DeltaTable

    from jobs.cli.commands import main

    landing, sibling = tmp_path / "land[1] #%20", tmp_path / "land1 #%20"
    files = {
        landing: {
            "top.jsonl": "a",
            "gw-1/views-0007.jsonl": "b",
            "2024/06/01/v.jsonl": "c",
            "gw-1/v[2]*.jsonl": "d",
            "_watermarks/gw-1/000000000000.json": "hidden",
            "gw-1/.views-0008.jsonl.tmp": "hidden",
            "2024/_tmp/v.jsonl": "hidden",
        },
        sibling: {"top.jsonl": "sibling"},
    }
    for root, named in files.items():
        for i, (name, device) in enumerate(named.items()):
            rec = {"device_id": device, "ts": iso(10 * i), "seconds": 2.0}
            put((root / name).parent, (root / name).name, [json.dumps(rec)])
    conf = tmp_path / "globs.toml"
    conf.write_text(
        f"name = 'globs'\nlake = '{tmp_path / 'lake'}'\nkeys = ['device_id']\nevent_time = 'ts'\n"
        "window = 'FixedWindows(1h)'\n[aggregates]\nplays = 'count()'\n[source]\n"
        f"path = '{landing}'\n"
        "schema = { device_id = 'string', ts = 'timestamp', seconds = 'double' }\n"
    )
    assert main(["run", str(conf), "--drain"]) == 0
    assert main(["verify", str(conf)]) == 0
    view = DeltaTable(str(tmp_path / "lake" / "current")).to_pyarrow_table().to_pylist()
    assert {r["device_id"]: r["plays"] for r in view} == {"a": 1, "b": 1, "c": 1, "d": 1}


def test_data_appended_to_a_file_after_it_was_read_is_reported_once(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.driver.runs import run
    from jobs.sources.files.changes import CHANGED

    pipeline = make_pipeline(tmp_path)
    path = land(tmp_path, "jsonl", "growing", "a", 10)
    run(pipeline, spark=spark, progress=None)
    # a writer appends to the file the run read (its modification time moves)
    with open(path, "a") as f:
        f.write(json.dumps({"device_id": "b", "ts": iso(20), "seconds": 2.0}) + "\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    out = io.StringIO()
    second = run(pipeline, spark=spark, progress=out)
    third = run(pipeline, spark=spark, progress=None)  # reported once, not on every run

    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    assert [(r["raw"], r["reason"]) for r in rejected] == [(None, CHANGED)]
    assert rejected[0]["source_file"].endswith("/growing.jsonl")
    assert (second.total("rejected"), third.total("rejected")) == (1, 0)
    assert "input file file://" in out.getvalue()
    assert "growing.jsonl changed after it was read (modified " in out.getvalue()
