"""Two pipelines in a chain: sessions per device feed hourly totals per country through the
sessions' pane log (a Python streaming source over Delta versions, no delta-spark)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.spark

HOUR = 3600


def upstream(tmp_path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "sessions",
            "lake": str(tmp_path / "up"),
            "keys": ["device_id", "country"],
            "event_time": "ts",
            "window": "Sessions(30m)",
            "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
            "accumulation_mode": "accumulating_and_retracting",
            "allowed_lateness": "2h",
            "source": {
                "path": str(tmp_path / "landing"),
                "max_files_per_trigger": 1,
                "schema": {
                    "device_id": "string",
                    "country": "string",
                    "ts": "timestamp",
                    "seconds": "double",
                },
            },
            "watermark": {"delay": "5m"},
            "aggregates": {"plays": "count()", "watched": "sum(seconds)"},
            "state_buckets": 4,
        }
    )


def downstream(tmp_path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "hourly",
            "lake": str(tmp_path / "down"),
            "keys": ["country"],
            "window": "FixedWindows(1h)",
            "trigger": "AfterWatermark(late=AfterCount(1))",
            "accumulation_mode": "accumulating_and_retracting",
            "allowed_lateness": "4h",
            "source": {"format": "pane_log", "path": str(tmp_path / "up"), "pipeline": "sessions"},
            "aggregates": {"sessions": "count()", "plays": "sum(plays)", "watched": "sum(watched)"},
            "state_buckets": 4,
        }
    )


def land(tmp_path, name, views):
    folder = tmp_path / "landing"
    folder.mkdir(exist_ok=True)
    lines = [
        json.dumps({"device_id": d, "country": c, "ts": f"2024-06-01T{t}:00Z", "seconds": s})
        for d, c, t, s in views
    ]
    (folder / name).write_text("\n".join(lines) + "\n")


def test_hourly_totals_over_retracting_sessions_equal_the_batch_over_the_final_sessions(
    spark, tmp_path
):
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification.view_check import verify

    up = upstream(tmp_path)
    first = [
        ("d1", "fr", "08:00", 3.0),
        ("d1", "fr", "08:50", 4.0),
        ("d2", "de", "08:10", 1.0),
        ("d3", "fr", "09:40", 2.0),
    ]
    land(tmp_path, "r0.jsonl", first)
    # d1's view at 08:25 bridges its sessions [08:00, 08:30) and [08:50, 09:20): the upstream
    # withdraws both and emits [08:00, 09:20), whose output timestamp lies in the next hour.
    land(tmp_path, "r1.jsonl", [("d1", "fr", "08:25", 5.0), ("d3", "fr", "10:30", 1.0)])
    run(up, spark=spark, progress=None, drain=True)  # one file per batch
    materialize(up)
    up_panes = DeltaTable(up.table_path("panes")).to_pyarrow_table().to_pylist()
    assert sum(p["is_retraction"] for p in up_panes) >= 2
    down = downstream(tmp_path)  # its upstream's pane log exists now
    assert down.weighted
    run(down, spark=spark, progress=None, drain=True)
    materialize(down)

    for stage in (up, down):
        report = verify(view_spec(stage), elements=load_source_elements(stage))
        assert report.ok, str(report)
    view = {
        (r["country"], r["window_start"].hour): (r["sessions"], r["plays"], r["watched"])
        for r in DeltaTable(str(down.lake_path / "current")).to_pyarrow_table().to_pylist()
    }
    assert view == {("de", 8): (1, 1, 1.0), ("fr", 9): (1, 3, 12.0), ("fr", 10): (2, 2, 3.0)}
    assert DeltaTable(down.table_path("late")).to_pyarrow_table().num_rows == 0


DOWNSTREAM_TOML = """
name = "hourly"
lake = "{lake}"
keys = ["country"]
window = "FixedWindows(1h)"
trigger = "AfterWatermark(late=AfterCount(1))"
accumulation_mode = "accumulating_and_retracting"
allowed_lateness = "4h"
state_buckets = 4
[source]
format = "pane_log"
path = "{upstream}"
pipeline = "sessions"
[aggregates]
sessions = "count()"
plays = "sum(plays)"
watched = "sum(watched)"
"""


def test_a_downstream_refuses_a_rebuilt_upstream_until_rebuilt_itself(spark, tmp_path, capsys):
    import shutil
    import subprocess
    import sys

    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.checkpoint.logs import recorded_offsets
    from jobs.cli.commands import main
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    up = upstream(tmp_path)
    first = [
        ("d1", "fr", "08:00", 3.0),
        ("d1", "fr", "08:50", 4.0),
        ("d2", "de", "08:10", 1.0),
        ("d3", "fr", "09:40", 2.0),
    ]
    land(tmp_path, "r0.jsonl", first)
    run(up, spark=spark, progress=None)
    conf = tmp_path / "hourly.toml"
    conf.write_text(DOWNSTREAM_TOML.format(lake=tmp_path / "down", upstream=tmp_path / "up"))
    down = load_pipeline(conf)
    run(down, spark=spark, progress=None)  # reads the upstream's first pane log
    materialize(down)
    assert max(r.offset.version for r in recorded_offsets(down.checkpoint_path)) > 0

    # The upstream rebuilt the documented way: its lake moved aside, run again (a new pane log
    # whose versions start at 0 again), with a file more.
    land(tmp_path, "r1.jsonl", [("d1", "fr", "08:25", 5.0), ("d3", "fr", "10:30", 1.0)])
    shutil.move(str(tmp_path / "up"), str(tmp_path / "up.old"))
    run(up, spark=spark, progress=None, drain=True)
    materialize(up)
    down = load_pipeline(conf)
    before = DeltaTable(down.table_path("panes")).version()

    proc = subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "run", str(conf)],
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("panestore: ")]
    assert "the upstream 'sessions' was rebuilt" in line
    assert "Traceback" not in proc.stderr
    rebuild = f"Rebuild hourly too: move its lake aside (mv {down.lake_path} {down.lake_path}.old)"
    assert rebuild in line
    assert DeltaTable(down.table_path("panes")).version() == before  # nothing read or written

    capsys.readouterr()
    assert main(["verify", str(conf)]) == 1  # not compared with the new upstream's view as if
    assert "the upstream 'sessions' was rebuilt" in capsys.readouterr().out  # it were its own

    shutil.move(str(down.lake_path), f"{down.lake_path}.old")  # as the message says
    run(down, spark=spark, progress=None, drain=True)
    materialize(down)
    assert main(["verify", str(conf)]) == 0, capsys.readouterr().out
    view = {
        (r["country"], r["window_start"].hour): (r["sessions"], r["plays"], r["watched"])
        for r in DeltaTable(str(down.lake_path / "current")).to_pyarrow_table().to_pylist()
    }
    assert view == {("de", 8): (1, 1, 1.0), ("fr", 9): (1, 3, 12.0), ("fr", 10): (2, 2, 3.0)}


def test_a_downstream_run_is_one_query_and_its_drain_closes_every_window_at_once(spark, tmp_path):
    """A pane-log source has no ``availableNow`` (a Python data source): a scheduled downstream
    run (Spark's availableNow wrapper) takes every version in one query, each batch firing what its
    data made due, and a drain closes every window before the run returns."""
    from deltalake import DeltaTable

    from jobs.driver.runs import run

    up = upstream(tmp_path)
    views = [
        ("d1", "fr", "08:00", 3.0),
        ("d2", "de", "08:10", 1.0),
        ("d1", "fr", "09:50", 2.0),
        ("d1", "fr", "09:55", 2.0),
    ]
    land(tmp_path, "r0.jsonl", views)
    # not drained: the 08:xx sessions close (watermark 09:50); [09:50, 10:25) fires early only
    run(up, spark=spark, progress=None)
    down = downstream(tmp_path)

    def panes() -> list[dict]:
        return DeltaTable(down.table_path("panes")).to_pyarrow_table().to_pylist()

    plain = run(down, spark=spark, progress=None)
    assert plain.queries == 1  # no second query ticking to fire
    # the 08:00 hour closed downstream when the upstream's watermark passed it: in this run
    assert {(p["country"], p["timing"]) for p in panes()} == {("fr", "ON_TIME"), ("de", "ON_TIME")}

    drained = run(down, spark=spark, progress=None, drain=True)
    assert drained.queries == 2  # the data (none) and the drain
    closing = [p for p in panes() if p["batch_id"] in drained.committed()]
    # the 10:00 hour held the upstream's early pane: the drain run itself closes it
    assert [(p["country"], p["window_start"].hour, p["timing"], p["is_last"]) for p in closing] == [
        ("fr", 10, "ON_TIME", True)
    ]


def test_a_downstream_killed_mid_batch_replays_it_and_reads_on(spark, tmp_path):
    """A downstream run SIGKILLed after planning its batch (offsets written) and before its
    commit; the upstream commits more; the next scheduled run replays the planned batch with the
    same version range, then reads the newer versions in the same run: the view equals the
    batch answer over the upstream's final windows."""
    import subprocess
    import sys

    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.load import load_pipeline
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification.view_check import verify

    up = upstream(tmp_path)
    land(tmp_path, "r0.jsonl", [("d1", "fr", "08:00", 3.0), ("d2", "de", "08:10", 1.0)])
    run(up, spark=spark, progress=None)
    conf = tmp_path / "hourly.toml"
    conf.write_text(DOWNSTREAM_TOML.format(lake=tmp_path / "down", upstream=tmp_path / "up"))
    killed = subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "run", str(conf), "--no-materialize",
         "--kill-at", "before_commit:0"],
        capture_output=True, text=True, timeout=600, start_new_session=True,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-3000:]
    down = load_pipeline(conf)
    assert (down.lake_path / "_checkpoint" / "offsets" / "0").exists()
    assert DeltaTable(down.table_path("panes")).transaction_version("hourly") is None

    land(tmp_path, "r1.jsonl", [("d1", "fr", "08:25", 5.0), ("d3", "fr", "10:30", 1.0)])
    run(up, spark=spark, progress=None, drain=True)
    materialize(up)
    upstream_rows = DeltaTable(up.table_path("panes")).to_pyarrow_table().num_rows

    rerun = run(down, spark=spark, progress=None)
    assert rerun.batches[0].batch_id == 0  # the planned batch, replayed first
    assert rerun.total("rows") == upstream_rows  # and every newer version in the same run
    materialize(down)
    report = verify(view_spec(down), elements=load_source_elements(down))
    assert report.ok, str(report)
