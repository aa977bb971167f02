"""Operator benchmark: one key bucket's batches through the stateful operator, without Spark,
combiner lifting against the per-element path.

    .venv/bin/python benchmarks/operator.py [--events N] [--keys K] [--repeat R]

The operator (:class:`jobs.executor.operator.OperatorStep`) runs as in a Spark task, one shard
over successive steps with its state in a temporary directory (``tests/operator_fakes.py``): per
batch, the bucket's input rows (one Arrow blob) and the timers the batch's watermark reached. The
benchmark's pipeline (1-minute fixed windows, ``AfterWatermark(early=AfterCount(100),
late=AfterCount(1))``, accumulating sum of a long) on two batch sequences of ``--events``
events over ``--keys`` keys of one bucket:

* ``on time``: ten batches, each event ~1% out of order, the watermark 5 minutes behind;
* ``late``: the same events, the watermark already an hour past them (every element reaches
  the late table, each with its own row).

Printed: the median time of ``--repeat`` runs per path and the ratio (per-element / lifted:
above 1.0, lifting is faster). One process, one core; figures, not a test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

from benchmarks.spark_job import panestore_pipeline
from jobs.driver.plan import operator_config
from jobs.executor.operator_input import blob_of
from tests.operator_fakes import T0_MS, ShardRun, clocks

MINUTE_MS = 60_000


def batches(events: int, keys: int, late: bool) -> list[tuple[bytes, int]]:
    """(the batch's blob, its watermark ms) for ten batches over one hour of event time."""
    rng = random.Random(7)
    schema = pa.schema([("key", pa.string()), ("ts_us", pa.int64()), ("value", pa.int64())])
    out = []
    per_batch = events // 10
    for b in range(10):
        start = T0_MS + b * 6 * MINUTE_MS
        ts = [start + rng.randrange(6 * MINUTE_MS) for _ in range(per_batch)]
        rows = pa.table(
            {
                "key": [f"key-{rng.randrange(keys):05d}" for _ in range(per_batch)],
                "ts_us": [t * 1000 for t in ts],
                "value": [rng.randrange(1000) for _ in range(per_batch)],
            },
            schema=schema,
        )
        watermark = start + 66 * MINUTE_MS if late else start - 5 * MINUTE_MS
        out.append((blob_of(rows), watermark))
    return out


def run(lift: bool, plan: list[tuple[bytes, int]]) -> float:
    # the pipeline of benchmarks/spark_job.py (its landing and lake are not used here)
    pipeline = panestore_pipeline(Path("/nonexistent"), "/nonexistent", "jsonl", 100)
    shard = ShardRun(replace(operator_config(pipeline), lift_combiners=lift))
    start = time.perf_counter()
    for blob, watermark in plan:
        shard.step(blob, clocks(watermark), bucket=0)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for late in (False, True):
        plan = batches(args.events, args.keys, late)
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeat):
            for lift in (True, False):
                times[lift].append(run(lift, plan))
        lifted, plain = statistics.median(times[True]), statistics.median(times[False])
        print(
            f"{'late' if late else 'on time'}: {args.events:,} events, {args.keys:,} keys: "
            f"lifted {lifted:.2f} s, per element {plain:.2f} s, ratio {plain / lifted:.2f} "
            f"(medians of {args.repeat})",
            flush=True,
        )


if __name__ == "__main__":
    main()
