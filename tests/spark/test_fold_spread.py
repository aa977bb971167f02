"""The fold's pieces over Spark's executors (jobs/driver/fold_spread.py) on a real multi-process
cluster (``local-cluster[2,1,1024]``, in a subprocess: one SparkContext per process): in every
accumulation mode, sessions and retractions included, from nothing and then incrementally, and
finishing a fold in pieces that an in-process fold left stopped, the view equals the in-process
fold of the same pane log, and its change feed replays to it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

CLUSTER = "local-cluster[2,1,1024]"
CASES = [
    ("ACCUMULATING", "sessions"),
    ("DISCARDING", "fixed"),
    ("DISCARDING", "sessions"),
    ("ACCUMULATING_AND_RETRACTING", "fixed"),
]


class Stop(Exception):
    pass


def case_lakes(base: Path, mode_name: str, windows: str):
    """A random run's pane log, half of it folded in one piece into ``current`` and in pieces
    (stopped after its first piece) into ``current_spread``; the run and both specs."""
    from panes import AccumulationMode, FixedWindows, Sessions
    from sinks.fold.materializer import Materializer
    from tests.sinks.lakes import S, chunked, random_run, write_batches

    mode = AccumulationMode[mode_name]
    window_fn = Sessions(10 * S) if windows == "sessions" else FixedWindows(10 * S)
    run = random_run(7, str(base), mode=mode, window_fn=window_fn, multi=True)
    batches = chunked(run, random.Random(7))
    half = max(1, len(batches) // 2)
    write_batches(run, batches[:half])
    whole = run.spec
    spread = dataclasses.replace(
        whole, tables={"current": str(base / "current_spread")}, fold_memory=1
    )

    def stop_after_first(point: str) -> None:
        if point == "after_piece":
            raise Stop

    Materializer(whole).run()
    with contextlib.suppress(Stop):
        Materializer(spread, hook=stop_after_first).run()
    return run, batches, half, whole, spread


def main(base: str) -> None:
    """In the subprocess: each case's lakes, folded over the cluster; prints one JSON line a
    case."""
    from jobs.driver.fold_spread import SparkSpread
    from jobs.startup.session import get_session
    from sinks.fold.change_feed import read_changes
    from sinks.fold.materializer import Materializer
    from tests.sinks.lakes import replay_changes, view_rows, write_batches

    spark = get_session("panestore-fold-spread", master=CLUSTER)
    for mode, windows in CASES:
        run, batches, half, whole, spread = case_lakes(
            Path(base) / f"{mode}-{windows}", mode, windows
        )
        finished = Materializer(spread, spread=SparkSpread(spark)).run()  # the stopped fold
        write_batches(run, batches[half:], start=half)
        Materializer(whole).run()
        more = Materializer(spread, spread=SparkSpread(spark)).run()
        replayed = replay_changes(spread, read_changes(spread, 0).table.to_pylist())
        print(
            json.dumps(
                {
                    "case": f"{mode}-{windows}",
                    "lines": [finished.line(), more.line()],
                    "resumed": [finished.first_piece, finished.pieces, finished.spread],
                    "more": [more.pieces, more.spread],
                    "equal": view_rows(spread) == view_rows(whole),
                    "replayed": replayed == view_rows(spread),
                    "windows": len(view_rows(whole)),
                }
            ),
            flush=True,
        )


def test_the_executor_fold_equals_the_in_process_fold(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tests.spark.test_fold_spread", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [f["case"] for f in found] == [f"{m}-{w}" for m, w in CASES]
    for f in found:
        first, pieces, spread = f["resumed"]
        assert first == 1 and pieces > 2 and spread, f  # it finished a stopped fold over Spark
        assert "over Spark's executors" in f["lines"][0], f
        assert f["more"][0] > 1 and f["more"][1], f
        assert f["equal"] and f["replayed"] and f["windows"] > 3, f


if __name__ == "__main__":
    main(sys.argv[1])
