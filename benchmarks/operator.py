"""Operator benchmark: one key bucket's batches through the stateful operator, without Spark:
columnar windows, combiner lifting (the engine per key) and the per-element path.

    .venv/bin/python benchmarks/operator.py [--events N] [--keys K] [--repeat R] [--value-bits B]
        [--aggregates sum|own|sketches]

The operator (:class:`jobs.executor.operator.OperatorBatch`) runs as in a Spark task, one shard
over successive steps with its state in a temporary directory (``tests/operator_fakes.py``): per
batch, the bucket's input rows (one Arrow blob) and the timers the batch's watermark reached. The
benchmark's pipeline (1-minute fixed windows, ``AfterWatermark(early=AfterCount(100),
late=AfterCount(1))``, accumulating sum of a long) on two batch sequences of ``--events``
events over ``--keys`` keys of one bucket (values below 1,000; ``--value-bits B``: uniform in
``[-2^B, 2^B]``, e.g. ``--keys 100 --value-bits 59``, where a batch's running sums could leave
64 bits while the panes' values fit; ``--aggregates own``: instead of the sum, the exact number of
distinct values by a combiner of a user's own, ``benchmarks/spark_job.py``'s workload ``1m-own``,
which the columnar engine does not serve):

* ``on time``: ten batches, each event ~1% out of order, the watermark 5 minutes behind;
* ``late``: the same events, the watermark already an hour past them (every element reaches
  the late table, each with its own row).

Paths: **columnar** (the bucket's windows as one table, :mod:`panes.columnar`),
**lifted** (the engine per key, fed parts combined in Arrow, :mod:`panes.columnar.bundle`) and
**per element** (the engine per key, element by element). Printed: the median time of
``--repeat`` runs per path and the ratios to the per-element path (above 1.0: faster), in wall
time and in this process's CPU time (on a shared machine, what one core spent; wall time also
counts the other tenants). One process, one core; figures, not a test.
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

from benchmarks.spark_job import AGGREGATES, panestore_pipeline
from jobs.driver.plan import operator_config
from jobs.executor.operator_input import blob_of
from tests.operator_fakes import T0_MS, ShardRun, clocks

MINUTE_MS = 60_000


def batches(
    events: int, keys: int, late: bool, value_bits: int | None = None
) -> list[tuple[bytes, int]]:
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
                "value": [
                    rng.randrange(1000)
                    if value_bits is None
                    else rng.randint(-(2**value_bits), 2**value_bits)
                    for _ in range(per_batch)
                ],
            },
            schema=schema,
        )
        watermark = start + 66 * MINUTE_MS if late else start - 5 * MINUTE_MS
        out.append((blob_of(rows), watermark))
    return out


PATHS = {
    "columnar": {},
    "lifted": {"columnar_windows": False},
    "per element": {"columnar_windows": False, "lift_combiners": False},
}


def run(path: str, plan: list[tuple[bytes, int]], aggregates: str = "sum") -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of the batches of ``plan`` on ``path``."""
    # the pipeline of benchmarks/spark_job.py (its landing and lake are not used here)
    pipeline = panestore_pipeline(
        Path("/nonexistent"), "/nonexistent", "jsonl", 100, aggregates=aggregates
    )
    shard = ShardRun(replace(operator_config(pipeline), **PATHS[path]))
    start, cpu = time.perf_counter(), time.process_time()
    for blob, watermark in plan:
        shard.step(blob, clocks(watermark), bucket=0)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--value-bits", type=int, default=None)
    ap.add_argument("--aggregates", choices=tuple(AGGREGATES), default="sum")
    args = ap.parse_args()
    paths = [p for p in PATHS if args.aggregates == "sum" or p != "columnar"]
    for late in (False, True):
        plan = batches(args.events, args.keys, late, args.value_bits)
        times: dict[str, list[tuple[float, float]]] = {path: [] for path in paths}
        for _ in range(args.repeat):
            for path in paths:
                times[path].append(run(path, plan, args.aggregates))
        for i, clock in enumerate(("wall", "CPU")):
            median = {path: statistics.median(t[i] for t in ts) for path, ts in times.items()}
            plain = median["per element"]
            figures = ", ".join(
                f"{path} {t:.2f} s ({plain / t:.2f}x)" for path, t in median.items()
            )
            print(
                f"{'late' if late else 'on time'}: {args.events:,} events, {args.keys:,} keys"
                f"{'' if args.value_bits is None else f', values to 2^{args.value_bits}'}"
                f"{'' if args.aggregates == 'sum' else f', aggregates {args.aggregates}'}, "
                f"{clock} time: {figures} (medians of {args.repeat})",
                flush=True,
            )


if __name__ == "__main__":
    main()
