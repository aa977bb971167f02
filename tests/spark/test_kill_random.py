"""SIGKILL at random moments: ``panestore run`` and ``panestore materialize`` killed wherever
they are, then rerun, leave the tables an uninterrupted run leaves.

The moments are drawn from a seeded generator (the same fractions on every machine) over each
command's whole life, JVM start and planning included, as long as one uninterrupted command
takes on this machine; the fixed points of ``test_kill_safety`` pin the
commit protocol, these look for what fixed points miss. Slow (minutes): ``./dev test --run-slow``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.spark.support import norm_pane
from tests.spark.test_kill_safety import land, tables

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def killed_at(args: list[str], after_s: float, timeout_s: float = 300) -> int:
    """Run ``panestore ARGS`` in its own process group, SIGKILL the group ``after_s`` seconds
    in (unless it ended first); its exit status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli.commands", *args],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return proc.wait(timeout=after_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout_s)
        return -signal.SIGKILL


def lifetime(args: list[str]) -> float:
    """How long ``panestore ARGS`` takes from its start to its end here (seconds)."""
    start = time.monotonic()
    assert killed_at(args, 600) == 0
    return time.monotonic() - start


def until_done(args: list[str], moments: list[float]) -> int:
    """Kill ``panestore ARGS`` at each moment in turn, then run it to its end: the kills."""
    kills = sum(killed_at(args, at) == -signal.SIGKILL for at in moments)
    assert killed_at(args, 600) == 0
    return kills


def test_runs_killed_at_random_moments_equal_an_uninterrupted_run(spark, tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    base = load_pipeline(land(tmp_path / "base"))
    run(base, spark=spark, progress=None)
    want = tables(base)

    life = lifetime(["run", str(land(tmp_path / "timed")), "--no-materialize"])
    conf = land(tmp_path / "killed")
    rng = random.Random(13)
    moments = [rng.uniform(0.05, 0.95) * life for _ in range(4)]
    kills = until_done(["run", str(conf), "--no-materialize"], moments)
    assert kills >= 2  # most moments fall inside a run
    got = tables(load_pipeline(conf))
    panes = got["panes"]
    assert len({p["pane_id"] for p in panes}) == len(panes), "duplicate panes"
    # Every batch replays with its offsets: the same panes, but for the batch times
    cols = set(want["panes"][0]) - {"processing_time_us", "processing_time"}
    assert sorted(norm_pane(r, cols) for r in panes) == sorted(
        norm_pane(r, cols) for r in want["panes"]
    )
    for t, key in (("late", "timestamp_us"), ("rejected", "raw")):
        assert sorted(r[key] for r in got[t]) == sorted(r[key] for r in want[t]), t


def _view(pipeline) -> list:
    from deltalake import DeltaTable

    rows = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    return sorted(sorted((k, repr(v)) for k, v in r.items()) for r in rows)


def test_materialize_killed_at_random_moments_equals_an_uninterrupted_one(spark, tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    confs = [land(tmp_path / name) for name in ("base", "killed")]
    pipelines = [load_pipeline(c) for c in confs]
    for p in pipelines:
        run(p, spark=spark, progress=None)
    started = time.monotonic()
    assert killed_at(["materialize", str(confs[0])], 600) == 0  # uninterrupted, and its time
    whole = time.monotonic() - started
    rng = random.Random(7)
    kills = until_done(["materialize", str(confs[1])], [rng.uniform(0.3, whole) for _ in range(6)])
    assert kills >= 3
    assert _view(pipelines[1]) == _view(pipelines[0])
