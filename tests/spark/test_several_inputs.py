"""A pipeline of several inputs run by Spark: impressions (JSON lines) and clicks (CSV) meet by
campaign in the same hourly windows, at one watermark, the minimum of the inputs' (each its own
delay) with idleness; late elements and rejected records name their input; a run killed mid-batch
and run again equals an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.spark.support import put, wait_while_running

pytestmark = pytest.mark.spark

CONF = """\
name = "ctr"
lake = "{lake}"
keys = ["campaign"]
window = "FixedWindows(1h)"
idle_timeout = "1s"
state_buckets = 4
dedup = {{ clicks = "click_id" }}

[inputs.impressions]
path = "{root}/impressions"
max_files_per_trigger = 1
schema = {{ campaign = "string", ts = "timestamp" }}
event_time = "ts"

[inputs.clicks]
format = "csv"
path = "{root}/clicks"
max_files_per_trigger = 1
schema = {{ campaign = "string", click_ts = "timestamp", cost = "double", click_id = "string" }}
event_time = "click_ts"
[inputs.clicks.watermark]
delay = "10m"

[aggregates]
impressions = "count() filter (input = 'impressions')"
clicks = "count() filter (input = 'clicks')"
cost = "sum(cost)"
"""

HOUR = 3600


def at(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_704_067_200 + seconds))


def impressions(hours: range) -> list[str]:
    """Three impressions per campaign and hour, at minutes 5, 25 and 45."""
    return [
        json.dumps({"campaign": c, "ts": at(h * HOUR + m * 60)})
        for h in hours
        for c in "ab"
        for m in (5, 25, 45)
    ]


def clicks(hours: range) -> list[str]:
    """Two clicks per campaign and hour, at minutes 6 and 46, each costing (hour + 1) / 2."""
    return [
        f"{c},{at(h * HOUR + m * 60 + 30)},{(h + 1) / 2},{c}-{h}-{m}"
        for h in hours
        for c in "ab"
        for m in (6, 46)
    ]


def land(root: Path, name: str, lines: list[str], order: int) -> None:
    path = put(root, name, lines)
    os.utime(path, (1_700_000_000 + order, 1_700_000_000 + order))  # Spark reads by mtime


def setup(root: Path) -> Path:
    (root / "impressions").mkdir(parents=True)
    (root / "clicks").mkdir(parents=True)
    conf = root / "ctr.toml"
    conf.write_text(CONF.format(lake=root / "lake", root=root))
    return conf


def iso_ms(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000))


def watermark_after(result) -> str:
    return iso_ms(max(b.stats.watermark_after_ms for b in result.batches if b.stats))


def test_two_inputs_meet_by_key_at_the_minimum_watermark_with_idleness(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.api import materialize, verify
    from jobs.config.load import load_pipeline
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.status import lake_status
    from sinks.lake import read_runs

    conf = setup(tmp_path)
    pipeline = load_pipeline(conf)
    imp, clk = tmp_path / "impressions", tmp_path / "clicks"

    # Run 1: both inputs up to hour 1. Impressions say 01:45, clicks 01:46:30 less 10 minutes:
    # the pipeline's watermark is the minimum, 01:36:30; the hour-0 windows close.
    land(imp, "imp-0.jsonl", impressions(range(2)), 0)
    land(clk, "clk-0.csv", clicks(range(2)), 0)
    first = run(pipeline, spark=spark, progress=None)
    assert watermark_after(first) == "2024-01-01T01:36:30"
    assert (first.total("rows"), first.batches[0].control_rows) == (20, 0)  # every input's
    (recorded,) = read_runs(view_spec(pipeline))  # the run history has the inputs' watermark
    assert iso_ms(recorded.watermark_after_us // 1000) == "2024-01-01T01:36:30"
    assert recorded.records_by_input == {"impressions": 12, "clicks": 8}

    # Run 2, seconds later: only clicks, up to hour 3, with a click of hour 0 (behind the
    # watermark: late), a click whose time does not parse (rejected) and a click of hour 1
    # again (its id was counted: a duplicate, rejected). Impressions have been silent for more
    # than idle_timeout: they no longer hold the watermark back at 01:45, which goes to the
    # clicks' 03:36:30 (hours 1 and 2 close).
    time.sleep(2)
    late_click, bad_click = f"a,{at(30 * 60)},9.0,late", "b,not-a-time,1.0,bad"
    again = clicks(range(1, 2))[0]
    land(clk, "clk-1.csv", [*clicks(range(2, 4)), late_click, bad_click, again], 1)
    second = run(pipeline, spark=spark, progress=None)
    assert watermark_after(second) == "2024-01-01T03:36:30"

    # Run 3: impressions come back with hours 2 (behind the watermark now: late, each named
    # as an impression) and 3; then the drain closes hour 3.
    bad_impression = json.dumps({"campaign": "a", "ts": "yesterday"})  # the decoder rejects it
    land(imp, "imp-1.jsonl", [*impressions(range(2, 4)), bad_impression], 1)
    # status, before that run: the pipeline's watermark and each input's, its idleness and
    # its backlog
    status = lake_status(pipeline)
    assert (status.watermark, status.watermark_from) == ("2024-01-01T03:36:30.000Z", "input clocks")
    shown = {i.name: i for i in status.inputs}
    assert shown["impressions"].watermark == "2024-01-01T01:45:00.000Z"
    assert shown["impressions"].idle and shown["impressions"].backlog.files == 1
    assert shown["clicks"].watermark == "2024-01-01T03:36:30.000Z"
    assert shown["clicks"].backlog.files == 0 and status.backlog.files == 1
    run(pipeline, spark=spark, progress=None)
    run(pipeline, spark=spark, progress=None, drain=True)

    materialize(pipeline)
    view = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    got = {
        (r["campaign"], r["window_start"].hour): (r["impressions"], r["clicks"], r["cost"])
        for r in view
    }
    # independently: per campaign and hour, the impressions and clicks not late
    want = {(c, h): (0 if h == 2 else 3, 2, (h + 1) / 2 * 2) for c in "ab" for h in range(4)}
    assert got == want

    late = DeltaTable(pipeline.table_path("late")).to_pyarrow_table().to_pylist()
    named = sorted(json.loads(r["value_json"])["input"] for r in late)
    assert named == ["clicks"] + ["impressions"] * 6
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    reasons = {r["raw"]: r["reason"] for r in rejected}
    assert sorted(reasons) == sorted([bad_click, again, bad_impression])
    assert reasons[bad_click].startswith("input clicks: ")
    assert reasons[bad_impression] == "input impressions: unparseable event time (ts)"
    assert reasons[again] == "DUPLICATE (key and click_id already counted)"
    # verify: the view against the batch over both inputs' records (CSV clicks, their copy and
    # their late click; the late impressions), the late elements out of their own input's
    report = verify(pipeline)
    assert report.ok, str(report)
    assert "view = batch over the inputs' records" in str(report)


def run_cli(conf: Path, kill_at: str | None = None) -> subprocess.CompletedProcess:
    kill = ["--kill-at", kill_at] if kill_at else []
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "run", str(conf), "--no-materialize", *kill],
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )


def landed(root: Path) -> Path:
    """Two files per input, read one file of each input a batch (two batches)."""
    conf = setup(root)
    land(root / "impressions", "imp-0.jsonl", impressions(range(2)), 0)
    land(root / "clicks", "clk-0.csv", clicks(range(2)), 0)
    land(root / "impressions", "imp-1.jsonl", impressions(range(2, 3)), 1)
    late, bad = f"b,{at(60)},5.0,late", "b,x,1,bad"
    land(root / "clicks", "clk-1.csv", [*clicks(range(2, 3)), late, bad, clicks(range(1, 2))[0]], 1)
    return conf


def pane_rows(pipeline) -> dict[str, list[tuple]]:
    from deltalake import DeltaTable

    out = {}
    for table, columns in (
        ("panes", ("campaign", "window_start_us", "timing", "impressions", "clicks", "cost")),
        ("late", ("campaign", "timestamp_us", "value_json")),
        ("rejected", ("raw", "reason")),
    ):
        rows = DeltaTable(pipeline.table_path(table)).to_pyarrow_table().to_pylist()
        out[table] = sorted(tuple(r[c] for c in columns) for r in rows)
    return out


def test_two_inputs_killed_mid_batch_equal_an_uninterrupted_run(spark, tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    base = load_pipeline(landed(tmp_path / "base"))
    run(base, spark=spark, progress=None, drain=True)
    want = pane_rows(base)
    assert len(want["late"]) == 1 and len(want["rejected"]) == 2 and len(want["panes"]) == 6

    conf = landed(tmp_path / "killed")
    # killed in batch 1: with its state, files and the inputs' clocks written and nothing
    # committed; then with every table committed but not Spark's checkpoint
    for kill_at in ("before_commit:1", "after_commit:1"):
        proc = run_cli(conf, kill_at)
        assert proc.returncode == -signal.SIGKILL, (kill_at, proc.stderr[-3000:])
    proc = run_cli(conf)
    assert proc.returncode == 0, proc.stderr[-3000:]
    killed = load_pipeline(conf)
    run(killed, spark=spark, progress=None, drain=True)
    assert pane_rows(killed) == want


def expected_view(pipeline, value: str) -> dict:
    from deltalake import DeltaTable

    from jobs.api import materialize

    materialize(pipeline)
    rows = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    return {(r["campaign"], r["window_start"].hour): (r[value], r["clicks"]) for r in rows}


def clicks_conf(root: Path) -> dict:
    (root / "clicks").mkdir(parents=True, exist_ok=True)
    land(root / "clicks", "clk-0.csv", clicks(range(3)), 0)
    return {
        "format": "csv",
        "path": str(root / "clicks"),
        "schema": {
            "campaign": "string",
            "click_ts": "timestamp",
            "cost": "double",
            "click_id": "string",
        },
        "event_time": "click_ts",
    }


def counted(root: Path, name: str, impressions_input: dict, clicks_input: dict):
    """A pipeline counting impressions and clicks per campaign and hour over the two inputs."""
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": name,
            "lake": str(root / "lake"),
            "keys": ["campaign"],
            "window": "FixedWindows(1h)",
            "state_buckets": 4,
            "inputs": {"impressions": impressions_input, "clicks": clicks_input},
            "aggregates": {
                "impressions": "count() filter (input = 'impressions')",
                "clicks": "count() filter (input = 'clicks')",
            },
        }
    )


def test_a_delta_table_meets_landing_files(spark, tmp_path):
    """Impressions in a Delta table (read by version) and clicks in CSV files, one query."""
    from datetime import datetime

    import pyarrow as pa
    from deltalake import write_deltalake

    from jobs.api import verify
    from jobs.driver.runs import run

    rows = [json.loads(line) for line in impressions(range(3))]
    write_deltalake(
        str(tmp_path / "table"),
        pa.table(
            {
                "campaign": [r["campaign"] for r in rows],
                "ts": pa.array(
                    [datetime.fromisoformat(r["ts"].replace("Z", "+00:00")) for r in rows],
                    pa.timestamp("us", "UTC"),
                ),
            }
        ),
    )
    impressions_table = {"format": "delta", "path": str(tmp_path / "table"), "event_time": "ts"}
    pipeline = counted(tmp_path, "ctr_delta", impressions_table, clicks_conf(tmp_path))
    run(pipeline, spark=spark, progress=None, drain=True)
    assert expected_view(pipeline, "impressions") == {
        (c, h): (3, 2) for c in "ab" for h in range(3)
    }
    report = verify(pipeline)  # the batch over the table's rows and the clicks' files
    assert report.ok, str(report)


def test_a_pane_log_meets_landing_files(spark, tmp_path):
    """Views counted per 10 minutes by an upstream pipeline, read as its pane log, meet clicks
    in CSV files: the hour's views are the sum of its 10-minute counts."""
    from jobs.api import materialize, verify
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.runs import run

    land(tmp_path / "impressions", "imp-0.jsonl", impressions(range(3)), 0)
    upstream = pipeline_from_dict(
        {
            "name": "views",
            "lake": str(tmp_path / "up"),
            "keys": ["campaign"],
            "event_time": "ts",
            "window": "FixedWindows(10m)",
            "source": {
                "path": str(tmp_path / "impressions"),
                "schema": {"campaign": "string", "ts": "timestamp"},
            },
            "aggregates": {"views": "count()"},
            "state_buckets": 4,
        }
    )
    run(upstream, spark=spark, progress=None, drain=True)
    pipeline = pipeline_from_dict(
        {
            "name": "ctr_chain",
            "lake": str(tmp_path / "lake"),
            "keys": ["campaign"],
            "window": "FixedWindows(1h)",
            "state_buckets": 4,
            "inputs": {
                "views": {"format": "pane_log", "path": str(tmp_path / "up"), "pipeline": "views"},
                "clicks": clicks_conf(tmp_path),
            },
            "aggregates": {
                "views": "sum(views)",
                "clicks": "count() filter (input = 'clicks')",
            },
        }
    )
    run(pipeline, spark=spark, progress=None, drain=True)
    assert expected_view(pipeline, "views") == {(c, h): (3, 2) for c in "ab" for h in range(3)}
    materialize(upstream)  # (the batch reads the upstream's current view)
    report = verify(pipeline)  # the batch over the upstream's final windows and the clicks
    assert report.ok, str(report)
    assert "views: the final windows of views" in str(report)


def test_streaming_dataframes_from_code_meet_by_key(spark, tmp_path):
    """api.define(sources={name: streaming DataFrame}): each input's own DataFrame, read in one
    query, tagged as its input; a run given one DataFrame for all is refused."""
    from jobs import api
    from jobs.config import PipelineConfigError

    land(tmp_path / "impressions", "imp-0.jsonl", impressions(range(2)), 0)
    land(tmp_path / "clicks", "clk-0.jsonl", [json.dumps(c) for c in click_dicts(range(2))], 0)
    shown = spark.readStream.schema("campaign string, ts timestamp").json(
        str(tmp_path / "impressions")
    )
    clicked = spark.readStream.schema("campaign string, click_ts timestamp, cost double").json(
        str(tmp_path / "clicks")
    )
    ctr = api.define(
        "ctr_frames",
        lake=str(tmp_path / "lake"),
        keys="campaign",
        window="FixedWindows(1h)",
        sources={"impressions": shown, "clicks": clicked},
        event_time={"impressions": "ts", "clicks": "click_ts"},
        aggregates={
            "impressions": "count() filter (input = 'impressions')",
            "clicks": "count() filter (input = 'clicks')",
        },
        state_buckets=4,
    )
    with pytest.raises(PipelineConfigError, match=r"^events: pipeline ctr_frames reads several"):
        api.run(ctr, shown, progress=None)
    api.run(ctr, drain=True, progress=None)
    assert expected_view(ctr, "impressions") == {(c, h): (3, 2) for c in "ab" for h in range(2)}
    # verify: each DataFrame input's events given by name, as batch DataFrames
    events = {
        "impressions": spark.read.schema("campaign string, ts timestamp").json(
            str(tmp_path / "impressions")
        ),
        "clicks": spark.read.schema("campaign string, click_ts timestamp, cost double").json(
            str(tmp_path / "clicks")
        ),
    }
    report = api.verify(ctr, events)
    assert report.ok, str(report)
    assert "view = batch over the inputs' records" in str(report)
    unchecked = api.verify(ctr)  # without them: the refold only, saying why
    assert (
        unchecked.ok
        and "raw events not checked: give verify the events of DataFrame input impressions"
        in " ".join(unchecked.notes)
    )


def click_dicts(hours: range) -> list[dict]:
    """:func:`clicks` as JSON objects."""
    out = []
    for line in clicks(hours):
        campaign, ts, cost, _ = line.split(",")
        out.append({"campaign": campaign, "click_ts": ts, "cost": float(cost)})
    return out


def test_an_input_whose_writers_note_its_watermark_holds_the_pipeline_at_their_marks(
    spark, tmp_path
):
    """Clicks with ``watermark.policy = "writer_noted"``: their watermark is what their writer
    notes (here past their last click), not their elements' event times; the pipeline's is the
    minimum of that and the impressions'. Each input keeps its writers' state; the control row
    of a mark names its input."""
    from deltalake import DeltaTable

    from jobs.api import materialize, verify
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run
    from jobs.driver.watermark_marks import LandingWriter
    from jobs.inspection.status import lake_status

    conf = setup(tmp_path)
    text = conf.read_text().replace('idle_timeout = "1s"', 'idle_timeout = "1h"')
    noted = 'policy = "writer_noted"\nidle_timeout = "1h"'
    text = text.replace('delay = "10m"', noted)  # clicks as JSON lines: both inputs decoded
    conf.write_text(text.replace('format = "csv"', 'format = "jsonl"'))
    pipeline = load_pipeline(conf)
    land(tmp_path / "impressions", "imp-0.jsonl", impressions(range(4)), 0)  # up to 03:45
    writer = LandingWriter(tmp_path / "clicks", "gateway")
    writer.land("clk-0.jsonl", [json.dumps(c) for c in click_dicts(range(2))])  # to 01:46:30
    writer.note((1_704_067_200 + 2 * HOUR) * 1_000_000)  # clicks complete up to 02:00

    def closed() -> set[tuple[str, int]]:
        panes = DeltaTable(pipeline.table_path("panes")).to_pyarrow_table().to_pylist()
        return {(p["campaign"], p["window_start_us"] // 1_000_000 // HOUR % 24) for p in panes}

    first = run(pipeline, spark=spark, progress=None)
    # the clicks' 02:00, not their elements' 01:46:30 nor the impressions' 03:45
    assert watermark_after(first) == "2024-01-01T02:00:00"
    assert closed() == {(c, h) for c in "ab" for h in (0, 1)}
    shown = {i.name: i.watermark for i in lake_status(pipeline).inputs}
    assert shown == {
        "impressions": "2024-01-01T03:45:00.000Z",
        "clicks": "2024-01-01T02:00:00.000Z",
    }
    assert (pipeline.run_files.read_if_any("_writers_watermark.clicks.json") or "").startswith("{")

    writer.note((1_704_067_200 + 5 * HOUR) * 1_000_000)  # nothing more until 05:00
    second = run(pipeline, spark=spark, progress=None)
    assert watermark_after(second) == "2024-01-01T03:45:00"  # now the impressions hold it
    assert closed() == {(c, h) for c in "ab" for h in (0, 1, 2)}
    run(pipeline, spark=spark, progress=None, drain=True)
    materialize(pipeline)
    report = verify(pipeline)
    assert report.ok, str(report)


def test_two_delta_tables_meet_and_each_is_held_to_the_table_it_has_read(spark, tmp_path):
    """Impressions and clicks each in a Delta table (two inputs read by version): appended to
    between two runs, they meet by key; each table input's offsets name it, so that recreating
    the clicks' table is refused naming that table, whatever the impressions' does."""
    import shutil
    from datetime import datetime

    import pyarrow as pa
    from deltalake import write_deltalake

    from jobs.api import verify
    from jobs.driver.runs import run
    from sinks.lake.errors import UpstreamChanged

    def utc(texts: list[str]) -> pa.Array:
        stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in texts]
        return pa.array(stamps, pa.timestamp("us", "UTC"))

    def append(hours: range) -> None:
        shown = [json.loads(line) for line in impressions(hours)]
        write_deltalake(
            str(tmp_path / "imp"),
            pa.table(
                {"campaign": [r["campaign"] for r in shown], "ts": utc([r["ts"] for r in shown])}
            ),
            mode="append",
        )
        clicked = click_dicts(hours)
        table = {
            "campaign": [c["campaign"] for c in clicked],
            "click_ts": utc([c["click_ts"] for c in clicked]),
            "cost": [c["cost"] for c in clicked],
        }
        write_deltalake(str(tmp_path / "clk"), pa.table(table), mode="append")

    append(range(2))
    pipeline = counted(
        tmp_path,
        "ctr_tables",
        {"format": "delta", "path": str(tmp_path / "imp"), "event_time": "ts"},
        {"format": "delta", "path": str(tmp_path / "clk"), "event_time": "click_ts"},
    )
    run(pipeline, spark=spark, progress=None)
    append(range(2, 4))
    run(pipeline, spark=spark, progress=None, drain=True)
    assert expected_view(pipeline, "impressions") == {
        (c, h): (3, 2) for c in "ab" for h in range(4)
    }
    report = verify(pipeline)  # the batch over both tables' rows
    assert report.ok, str(report)

    # the clicks' table replaced by a new table at the same path; the impressions' appended to
    append(range(4, 5))
    write_deltalake(
        str(tmp_path / "clk2"),
        pa.table({"campaign": ["a"], "click_ts": utc([at(0)]), "cost": [1.0]}),
    )
    shutil.rmtree(tmp_path / "clk")
    shutil.move(str(tmp_path / "clk2"), str(tmp_path / "clk"))
    with pytest.raises(UpstreamChanged, match=f"^input clicks: the source table {tmp_path}/clk "):
        run(pipeline, spark=spark, progress=None)


def test_a_follow_run_of_two_inputs_closes_windows_as_both_move(spark, tmp_path):
    """``--follow`` over two inputs: files landing in either while the query runs are read by
    the next trigger, and a window closes only once both inputs' watermarks have passed it."""
    import threading

    from deltalake import DeltaTable

    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    conf = setup(tmp_path)
    conf.write_text(conf.read_text().replace('idle_timeout = "1s"', 'idle_timeout = "1h"'))
    pipeline = load_pipeline(conf)
    imp, clk = tmp_path / "impressions", tmp_path / "clicks"
    land(imp, "imp-0.jsonl", impressions(range(3)), 0)  # impressions up to 02:45
    land(clk, "clk-0.csv", clicks(range(1)), 0)  # clicks up to 00:46:30: nothing closes
    results: list = []
    follow = threading.Thread(
        target=lambda: results.append(
            run(pipeline, spark=spark, follow=True, interval="1 second", progress=None)
        )
    )
    follow.start()
    panes = pipeline.table_path("panes")

    def closed() -> set[int]:
        rows = DeltaTable(panes).to_pyarrow_table().to_pylist()
        return {r["window_start_us"] // 1_000_000 // HOUR % 24 for r in rows}

    def wait_for(condition) -> bool:
        return wait_while_running(follow, condition)

    try:
        assert wait_for(lambda: DeltaTable(panes).transaction_version(pipeline.name) is not None)
        assert closed() == set()  # the clicks hold the watermark before 00:36:30
        land(clk, "clk-1.csv", clicks(range(1, 3)), 1)  # clicks up to 02:46:30
        # the minimum is now the impressions' 02:45 (clicks' less 10 minutes: 02:36:30)
        assert wait_for(lambda: closed() == {0, 1})
    finally:
        for query in spark.streams.active:  # what Ctrl-C does to a --follow run
            query.stop()
        follow.join(timeout=120)
    assert not follow.is_alive() and results
