"""State-summary benchmark: the cost of :func:`jobs.executor.state_summary.summarize` (what
``panestore status`` reports of the operator's state) on a state of many keys, without Spark.

    .venv/bin/python benchmarks/state_summary.py [--keys K] [--windows W] [--buckets B]
        [--paths columnar,lifted,per element] [--repeat R] [--dedup]

Builds, per path, the state of an operator (``tests/operator_fakes.py``: one shard's steps, its
state in a temporary directory) holding ``--keys`` keys spread over ``--buckets`` buckets, each
key with ``--windows`` open one-minute windows (one to five elements each; a sum and a count),
then times the summary (median of ``--repeat``, wall and this process's CPU) and prints what it
found. ``--dedup``: the pipeline deduplicates by an id (each element's own). One process, one
core; figures, not a test.
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

from benchmarks import dedup_operator
from jobs.executor.operator_input import blob_of
from jobs.executor.state_summary import summarize
from tests.operator_fakes import T0_MS, ShardRun, clocks

MINUTE_US = 60_000_000


def config(path: str, dedup: bool):
    """The benchmark's operator on ``path``."""
    conf = dedup_operator.config(dedup)
    if path != "columnar":
        conf = replace(conf, columnar_windows=False)
    if path == "per element":
        conf = replace(conf, lift_combiners=False)
    return conf


def build(path: str, keys: int, windows: int, buckets: int, dedup: bool) -> ShardRun:
    """A shard whose state holds ``keys`` keys with ``windows`` open windows each."""
    rng = random.Random(11)
    run = ShardRun(config(path, dedup))
    fields = [("user", pa.string()), ("ts_us", pa.int64()), ("n", pa.int64())]
    if dedup:
        fields += [(c, pa.string()) for c in ("pst_dedup_id", "pst_raw", "pst_source_file")]
    schema = pa.schema(fields)
    t0 = T0_MS * 1000
    for b in range(buckets):
        users, ts = [], []
        for k in range(b, keys, buckets):
            for w in range(windows):
                for _ in range(rng.randint(1, 5)):
                    users.append(f"user-{k:07d}")
                    ts.append(t0 + w * MINUTE_US + rng.randrange(MINUTE_US))
        columns: dict[str, list] = {"user": users, "ts_us": ts, "n": [1] * len(ts)}
        if dedup:
            columns["pst_dedup_id"] = [f"{len(str(i))}:{i}" for i in range(len(ts))]
            columns["pst_raw"] = columns["pst_source_file"] = [""] * len(ts)
        run.step(blob_of(pa.table(columns, schema=schema)), clocks(T0_MS), bucket=b)
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=2)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--paths", default="columnar,lifted,per element")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dedup", action="store_true")
    args = parser.parse_args(argv)
    for path in args.paths.split(","):
        started = time.perf_counter()
        run = build(path, args.keys, args.windows, args.buckets, args.dedup)
        built = time.perf_counter() - started
        walls, cpus = [], []
        summary = None
        for _ in range(args.repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            summary = summarize(run.root, run.batch_id - 1, 1, run.config)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        assert summary is not None
        print(
            f"{path:12s} keys {summary.keys:>8,d} (decoded {summary.decoded_keys:>8,d}) "
            f"windows {summary.windows:>8,d} "
            f"ids {summary.dedup_ids:>8,d}  summary {statistics.median(walls):6.2f} s wall "
            f"{statistics.median(cpus):6.2f} s cpu  (state built in {built:.0f} s)"
        )
        print(f"{'':12s} oldest {summary.oldest}; largest {summary.largest[0]}")


if __name__ == "__main__":
    main()
