"""Kill safety: SIGKILL the job at several points, rerun, and get the uninterrupted pane log.

Each killed run is a separate ``panestore run`` process (its own process group: driver, JVM and
Python workers die together, as in a container kill). ``--kill-at point:batch`` makes the sink
kill the job at a named point of a given batch (see ``jobs.driver.batch_sink.kill``):

* ``before_commit``: mid-batch, both steps ran and wrote their state, nothing committed;
* ``between_tables``: the pane log committed, the late and rejected tables not;
* ``after_commit``: every Delta commit done, the run's note and Spark's checkpoint commit not;
* ``after_report``: the run's note counts the batch, Spark's checkpoint commit not written.

Through the kills the run history counts each batch once: summed over the ``runs`` table, the
records are the input's and the panes, late and rejected figures the rows of those tables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.spark.support import iso, norm_pane, parse_view, put, replay

pytestmark = pytest.mark.spark

CONF = """\
name = "kills"
lake = "{lake}"
keys = ["device_id"]
event_time = "ts"
window = "Sessions(1m)"
trigger = "AfterWatermark(early=AfterCount(2), late=AfterCount(1))"
accumulation_mode = "accumulating_and_retracting"
allowed_lateness = "30s"
state_buckets = 4

[source]
path = "{landing}"
max_files_per_trigger = 1
schema = {{ device_id = "string", ts = "timestamp", seconds = "double" }}

[watermark]
delay = "10s"

[aggregates]
plays = "count()"
watched = "sum(seconds)"
"""


def view(device, s, seconds=1.0):
    return json.dumps({"device_id": device, "ts": iso(s), "seconds": seconds})


FILES = [
    [view("a", 1), view("a", 20, 2.0), view("b", 3, 5.0), "garbage"],
    [view("a", 50), view("b", 100), view("c", 5)],
    [view("a", 200), view("a", 30, 7.0), view("b", 130), '{"ts": "' + iso(9) + '"}'],
    [view("b", 400), view("a", 35, 3.0), view("c", 300, 2.0)],
]
# (point:batch) per killed run. Batches 0-3 read one file each, and each fires its own watermark
# advance. Killed: the last batch mid-way, its state and files written and nothing committed
# (3), then after its Delta commits but before the run's note and Spark's commit (3 again: the
# replay writes into no table, and counts the batch from them), then after the note but before
# Spark's commit (3 again: the last run replays it and counts it in no figure). With --run-slow
# also: mid-batch (1; tests/spark/test_bucket_lake.py kills there too, on a lake in a bucket) and
# between the pane-log and the late/rejected commits (2; tests/spark/test_cluster.py kills there
# too).
KILLS = ["before_commit:3", "after_commit:3", "after_report:3"]
SLOW_KILLS = ["before_commit:1", "between_tables:2"]
KILL_ORDER = ("before_commit", "between_tables", "after_commit", "after_report")


def land(root):
    for i, lines in enumerate(FILES):
        path = put(root / "landing", f"views-{i}.jsonl", lines)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # Spark reads in mtime order
    conf = root / "kills.toml"
    conf.write_text(CONF.format(lake=root / "lake", landing=root / "landing"))
    return conf


def run_cli(conf, kill_at=None, timeout=240):
    kill = ["--kill-at", kill_at] if kill_at else []
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "run", str(conf), "--no-materialize", *kill],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def tables(pipeline):
    from deltalake import DeltaTable

    return {
        t: DeltaTable(pipeline.table_path(t)).to_pyarrow_table().to_pylist()
        for t in ("panes", "late", "rejected")
    }


def test_killed_runs_equal_an_uninterrupted_run(spark, tmp_path, request, capsys):
    from jobs.cli.commands import main
    from jobs.config.load import load_pipeline
    from jobs.config.sink_spec import view_spec
    from jobs.driver.plan import layout
    from jobs.driver.runs import run
    from sinks.lake.pane_log import pane_record
    from sinks.lake.run_history import read_runs

    # the uninterrupted run (in process)
    base = load_pipeline(land(tmp_path / "base"))
    run(base, spark=spark, progress=None)
    want = tables(base)

    conf = land(tmp_path / "killed")
    pipeline = load_pipeline(conf)
    slow = request.config.getoption("--run-slow")
    kills = sorted(KILLS + SLOW_KILLS * slow, key=lambda k: (k[-1], KILL_ORDER.index(k[:-2])))
    for kill_at in kills:
        proc = run_cli(conf, kill_at)
        assert proc.returncode == -signal.SIGKILL, (kill_at, proc.returncode, proc.stderr[-3000:])
    # the last run was killed: status says so (exit 1) before any run records it
    assert main(["status", str(conf)]) == 1
    assert "killed (started" in capsys.readouterr().out
    proc = run_cli(conf)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = tables(pipeline)

    # the run history: a row per run, killed ones included, each batch counted in one row
    runs = read_runs(view_spec(pipeline))
    assert [r.outcome for r in runs] == ["killed"] * len(kills) + ["succeeded"]
    assert runs[0].last_batch_id == int(kills[0][-1]) - 1  # the batches it reported
    assert runs[-1].replayed == 1  # after_report:3: its tables hold the batch, skipped
    assert (runs[-1].panes, runs[-1].records) == (0, 0)  # ... and the killed run's row counts it
    (whole,) = read_runs(view_spec(base))
    assert sum(r.records for r in runs) == whole.records == sum(len(f) for f in FILES)
    for t, figure in (("panes", "panes"), ("late", "late"), ("rejected", "rejected")):
        counted = sum(getattr(r, figure) for r in runs)
        assert counted == getattr(whole, figure) == len(got[t]), t
    timings = [p["timing"] for p in got["panes"]]
    assert [sum(r.early for r in runs), sum(r.on_time for r in runs)] == [
        timings.count("EARLY"),
        timings.count("ON_TIME"),
    ]
    assert sum(r.late_panes for r in runs) == timings.count("LATE")

    panes = got["panes"]
    assert len({p["pane_id"] for p in panes}) == len(panes), "duplicate panes"
    # Exactly the panes of the batches Spark recorded (same offsets, watermarks, batch times).
    expected = [
        dict(pane_record(p, layout(pipeline)), batch_id=b)
        for b, ps, _ in replay(pipeline, parse_view)
        for p in ps
    ]
    cols = set(expected[0])
    assert sorted(norm_pane(r, cols) for r in panes) == sorted(norm_pane(r, cols) for r in expected)
    # ... and the same panes as the uninterrupted run (batch times differ between the two).
    same = cols - {"processing_time_us"}
    assert sorted(norm_pane(r, same) for r in panes) == sorted(
        norm_pane(r, same) for r in want["panes"]
    )
    for t, key in (("late", "timestamp_us"), ("rejected", "raw")):
        assert sorted(r[key] for r in got[t]) == sorted(r[key] for r in want[t]), t
    assert len(got["rejected"]) == 2 and len(got["late"]) == 1
