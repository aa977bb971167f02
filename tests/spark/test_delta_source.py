"""A Delta table as a pipeline's source, written by another process (delta-rs) between and during
runs: every case ends with the view equal to the batch answer over the table's rows, or with a
clear stop naming the version."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from tests.spark.delta_writer import rows

pytestmark = pytest.mark.spark

CONF = """\
name = "spend"
lake = "{lake}"
keys = ["user"]
event_time = "ts"
window = "FixedWindows(2m)"
trigger = "AfterWatermark(early=AfterCount(1), late=AfterCount(1))"
accumulation_mode = "accumulating_and_retracting"
allowed_lateness = "5m"
state_buckets = 4

[source]
format = "delta"
path = "{table}"
{extra}

[watermark]
delay = "1m"

[aggregates]
total = "sum(amount)"
n = "count()"
"""


def write(table, *args):
    """The writer process: ``tests.spark.delta_writer TABLE ARGS``."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.spark.delta_writer", str(table), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def configure(tmp_path, name="spend", extra=""):
    conf = tmp_path / f"{name}.toml"
    conf.write_text(
        CONF.format(lake=tmp_path / f"lake-{name}", table=tmp_path / "bronze", extra=extra)
    )
    return conf


def load(conf):
    from jobs.config import load_pipeline

    return load_pipeline(conf)


def run_and_check(spark, pipeline, **kw):
    """A scheduled run, the fold, and the view checked against the batch over the table."""
    from jobs import api

    result = api.run(pipeline, spark=spark, progress=None, **kw)
    report = api.verify(pipeline)
    assert report.ok, str(report)
    return result


def test_runs_over_a_table_another_process_appends_optimizes_and_vacuums(spark, tmp_path):
    from sinks.lake.errors import SourceTableError

    table = tmp_path / "bronze"
    write(table, "append", 0, 400, 2)  # versions 0, 1
    pipeline = load(configure(tmp_path))
    assert [c for c, _ in pipeline.source.schema] == ["id", "user", "ts", "amount"]
    first = run_and_check(spark, pipeline)
    assert first.total("rows") == 400 and first.total("rejected") == 400 // 53

    # appended while a --follow run runs: each commit taken as it comes
    writer = threading.Thread(target=write, args=(table, "append", 400, 300, 3, 1.5))
    writer.start()
    from jobs import api

    api.run(pipeline, spark=spark, follow=True, interval="1s", stop_after_batches=2, progress=None)
    writer.join()
    later = run_and_check(spark, pipeline)  # what the follow run had not taken yet
    assert later.total("rows") < 300

    write(table, "optimize")  # a commit that changes no data: nothing read
    compacted = run_and_check(spark, pipeline)
    assert compacted.total("rows") == 0

    # rows appended, compacted and vacuumed before the pipeline read them: stop, naming it
    write(table, "append", 700, 50)
    version = __import__("deltalake").DeltaTable(str(table)).version()
    write(table, "optimize")
    write(table, "vacuum")
    with pytest.raises(SourceTableError, match=f"version {version}") as e:
        api.run(pipeline, spark=spark, progress=None)
    assert "vacuum" in str(e.value)


def test_a_delete_stops_the_run_unless_change_commits_are_skipped(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs import api
    from sinks.lake.errors import SourceTableError

    table = tmp_path / "bronze"
    write(table, "append", 0, 200)
    pipeline = load(configure(tmp_path))
    run_and_check(spark, pipeline)
    write(table, "delete", "amount > 8")
    deleted_at = DeltaTable(str(table)).version()
    write(table, "append", 200, 100)
    with pytest.raises(SourceTableError, match=f"version {deleted_at}") as e:
        api.run(pipeline, spark=spark, progress=None)
    assert "skip_change_commits" in str(e.value)
    # the command says it in one line: not after ~240 lines of Spark's log of the failed query
    # (a Java and a Python trace)
    conf = configure(tmp_path)
    command = [sys.executable, "-m", "jobs.cli.commands", "run", str(conf), "--no-materialize"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    said = proc.stderr.splitlines()
    description = pipeline.describe().splitlines()
    assert said[: len(description)] == description, proc.stderr[-3000:]
    assert len(said) == len(description) + 1, proc.stderr[-3000:]
    assert said[-1].startswith(f"panestore: version {deleted_at} (DELETE) of the Delta table")

    skipping = load(configure(tmp_path, extra="skip_change_commits = true"))
    result = run_and_check(spark, skipping)  # the batch reads the same commits the stream did
    assert result.total("rows") == 100


def test_a_run_killed_mid_batch_takes_the_replayed_batch_and_the_newer_rows(spark, tmp_path):
    """A scheduled run over a Python data source: the next run replays the batch the kill left
    uncommitted, then reads what was appended since, in the same run."""
    table = tmp_path / "bronze"
    write(table, "append", 0, 300)
    conf = configure(tmp_path)
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.cli.commands",
            "run",
            str(conf),
            "--no-materialize",
            "--kill-at",
            "before_commit:0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    write(table, "append", 300, 120)
    pipeline = load(conf)
    result = run_and_check(spark, pipeline)
    by_batch = {b.batch_id: b.rows for b in result.batches}
    assert by_batch[0] == 300 and by_batch[1] == 120, by_batch
    # in one query: Spark's fallback for a source without availableNow (one batch) would have
    # stopped after the replay, leaving the newer rows to a second query
    assert result.queries == 1


def test_a_pipeline_in_code_and_in_toml_write_the_same_tables(spark, tmp_path):
    from deltalake import DeltaTable, write_deltalake

    from jobs import api
    from panes import AfterCount, AfterWatermark, FixedWindows, combiners

    table = tmp_path / "bronze"
    write_deltalake(table, rows(0, 500))
    in_toml = load(configure(tmp_path, "spend"))
    in_code = api.define(
        "spend",
        source=api.delta_source(table),
        lake=str(tmp_path / "lake-code"),
        keys=["user"],
        event_time="ts",
        window=FixedWindows(120_000_000),
        trigger=AfterWatermark(early=AfterCount(1), late=AfterCount(1)),
        accumulation_mode="accumulating_and_retracting",
        allowed_lateness="5m",
        watermark=api.Watermark(delay=60_000_000),
        aggregates={"total": combiners.sum("amount"), "n": "count()"},
        state_buckets=4,
    )
    for p in (in_toml, in_code):
        api.run(p, spark=spark, drain=True, progress=None)

    def content(p, name):
        t = DeltaTable(p.table_path(name)).to_pyarrow_table()
        when = ("processing_time_us", "processing_time")  # when each run happened
        drop = [c for c in when if c in t.column_names]
        return sorted(map(str, t.drop_columns(drop).to_pylist()))

    for name in ("panes", "late", "rejected", "current"):
        assert content(in_code, name) == content(in_toml, name), name
    assert len(content(in_code, "panes")) > 0
