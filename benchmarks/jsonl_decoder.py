"""The JSON-lines decoder alone: lines of the benchmark's workload through ``JsonlDecoder``.

    .venv/bin/python benchmarks/jsonl_decoder.py [--lines N] [--bad-every K] [--repeat R]

N lines (default 500,000) like ``benchmarks/workload.py``'s (``{"key", "ts", "value"}``, 1,000
keys, ISO-8601 times in UTC), handed to the decoder in Spark's batches of 10,000 lines
(``mapInArrow``); ``--bad-every K`` makes every K-th line not JSON. Prints each run's time and
the median (one process, warm: the decoder's own cost, not Spark's). The decoder of another
checkout: ``PYTHONPATH=DIR .venv/bin/python benchmarks/jsonl_decoder.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import pyarrow as pa

from jobs.executor.jsonl_decoder import JsonlDecoder
from jobs.executor.record_rules import RecordShape

T0 = 1_717_232_400  # 2024-06-01T09:00:00Z


def lines(n: int, bad_every: int | None) -> list[str]:
    out = []
    for i in range(n):
        if bad_every and i % bad_every == bad_every - 1:
            out.append("{not json")
            continue
        ms = T0 * 1000 + i * 7
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"
        out.append(json.dumps({"key": f"key-{i * 7919 % 1000:04d}", "ts": ts, "value": i % 100}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=500_000)
    ap.add_argument("--bad-every", type=int)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    text = lines(args.lines, args.bad_every)
    batches = [
        pa.RecordBatch.from_pydict(
            {
                "_raw": pa.array(text[i : i + 10_000]),
                "_source_file": ["f.jsonl"] * len(text[i : i + 10_000]),
            }
        )
        for i in range(0, len(text), 10_000)
    ]
    shape = RecordShape(
        columns=(("key", "string"), ("ts", "timestamp"), ("value", "long")),
        keys=("key",),
        event_time="ts",
        values=("value",),
        buckets=64,
    )
    decoder = JsonlDecoder(shape, ("value",))
    times = []
    for run in range(1, args.repeat + 1):
        started = time.perf_counter()
        out = list(decoder(iter(batches)))
        took = time.perf_counter() - started
        times.append(took)
        blobs = sum(o.column(2).drop_null().__len__() for o in out)
        others = sum(o.num_rows for o in out) - blobs
        print(f"run {run}: {took:.3f}s ({blobs} blobs, {others} lines rejected or passed on)")
    print(f"median of {args.repeat}: {statistics.median(times):.3f}s for {args.lines:,} lines")


if __name__ == "__main__":
    main()
