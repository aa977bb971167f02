"""Two inputs against one input of the same events, in one warm Spark session.

    .venv/bin/python -m benchmarks.warm_session [--repeat R] [--keep DIR]

`benchmarks/spark_job.py --workload two-inputs` measures each run in a fresh process, as a
scheduler sees it: the JVM, its code generation and the Python workers start cold every time.
This benchmark runs the same two pipelines (`ctr_settings` of that benchmark: two JSON-lines
inputs, and one input holding the same 1,100,000 events with a `kind` column) alternately in one
session, each on a fresh lake, so what remains is what a run costs once everything is warm (a
`--follow` run, or a notebook's `api.run` calls). Printed per run: its time and Spark's
executor time by stage; then the medians of the runs after the first of each side (the first
pays the cold start) and their ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.spark_job import WORKLOADS, ctr_settings, prepare_landing

SIDES = {"two inputs": "ctr", "one input": "ctr-one"}


def stage_times(spark) -> dict[int, tuple[int, float]]:
    """Every stage of the session so far: id -> (tasks, executor run time in s)."""
    sc = spark.sparkContext
    gateway = sc._gateway
    store = sc._jsc.sc().statusStore()
    stages = store.stageList(None, False, False, gateway.new_array(gateway.jvm.double, 0), None)
    out = {}
    it = stages.iterator()
    while it.hasNext():
        s = it.next()
        out[s.stageId()] = (s.numTasks(), s.executorRunTime() / 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=4, help="runs of each side (the first is cold)")
    ap.add_argument("--keep", help="work directory to use and keep (landing files are reused)")
    args = ap.parse_args()

    from jobs.config.load import pipeline_from_dict
    from jobs.driver.runs import run
    from jobs.startup.session import get_session

    wl = WORKLOADS["two-inputs"]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="panestore-warm-"))
    landing = prepare_landing(work, wl, "jsonl")
    spark = get_session("panestore-warm-bench", shuffle_partitions=2)
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for i in range(args.repeat):
        order = list(SIDES) if i % 2 == 0 else list(reversed(SIDES))
        for side in order:
            aggregates = SIDES[side]
            lake = work / "warm-lake"
            shutil.rmtree(lake, ignore_errors=True)
            source = landing / "one" if aggregates == "ctr-one" else landing
            # every file in one micro-batch on both sides
            settings = ctr_settings(source, str(lake), 1_000, aggregates=aggregates)
            before = stage_times(spark)
            started = time.perf_counter()
            result = run(pipeline_from_dict(settings), spark=spark, progress=None)
            took = time.perf_counter() - started
            times[side].append(took)
            stages = {k: v for k, v in stage_times(spark).items() if k not in before}
            shown = ", ".join(f"{n} tasks {s:.2f}s" for _, (n, s) in sorted(stages.items()))
            print(
                f"run {i + 1} {side}: {took:.2f}s, {result.total('panes'):,} panes; "
                f"executor time by stage: {shown}",
                flush=True,
            )
    warm = {side: statistics.median(t[1:]) for side, t in times.items() if len(t) > 1}
    if len(warm) == len(SIDES):
        for side, t in warm.items():
            print(f"warm median {side}: {t:.2f}s (first, cold: {times[side][0]:.2f}s)")
        ratio = warm["two inputs"] / warm["one input"]
        print(f"ratio two inputs / one input, warm: {ratio:.2f}x")
    spark.stop()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
