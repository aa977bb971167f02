"""Dedup benchmark: one operator step of one key bucket with and without ``dedup``, without
Spark (``tests/operator_fakes.py``).

    .venv/bin/python benchmarks/dedup_operator.py [--events N] [--keys K] [--copies F] [--repeat R]

The pipeline: 1-minute fixed windows, ``sum(n)`` and ``count()`` (the columnar path), keyed by
``user``; ``--events`` events over 10 minutes and ``--keys`` keys, the first ``--copies`` share
of them sent twice, all in one batch. With ``dedup = "event_id"`` the records also carry their id,
raw text and file (as the taggers send them). Printed per setting: the best of ``--repeat``
steps, records a second, the bucket's state size and the rejected rows. One process, one core;
figures, not a test.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa

from jobs.config.load import pipeline_from_dict
from jobs.driver.plan import operator_config
from jobs.executor.operator_input import blob_of
from tests.operator_fakes import T0_MS, ShardRun, clocks

RAW = '{"user":"u1","t":"2024-01-01T00:00:00Z","n":5,"event_id":"e0000001"}'


def config(dedup: bool):
    settings = {
        "name": "p",
        "lake": "/tmp/unused",
        "keys": ["user"],
        "event_time": "t",
        "window": "FixedWindows(1m)",
        "aggregates": {"total": "sum(n)", "rows": "count()"},
        "source": {
            "path": "/tmp/unused",
            "schema": {"user": "string", "t": "timestamp", "n": "long", "event_id": "string"},
        },
    }
    if dedup:
        settings["dedup"] = "event_id"
    return operator_config(pipeline_from_dict(settings))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=5_000)
    parser.add_argument("--copies", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    a = parser.parse_args()
    rng = random.Random(1)
    rows = [
        {
            "user": f"u{rng.randrange(a.keys)}",
            "ts_us": T0_MS * 1000 + rng.randrange(600) * 1_000_000,
            "n": rng.randrange(100),
            "pst_dedup_id": f"8:e{i:07d}",
            "pst_raw": RAW,
            "pst_source_file": "file:/landing/events.jsonl",
        }
        for i in range(a.events)
    ]
    rows += rows[: int(a.events * a.copies)]
    for dedup in (False, True):
        columns = ["user", "ts_us", "n"]
        if dedup:
            columns += ["pst_dedup_id", "pst_raw", "pst_source_file"]
        blob = blob_of(pa.Table.from_pylist([{c: r[c] for c in columns} for r in rows]))
        best, out, run = float("inf"), [], None
        for _ in range(a.repeat):
            run = ShardRun(config(dedup))
            start = time.perf_counter()
            out = run.step(blob, clocks())
            best = min(best, time.perf_counter() - start)
        assert run is not None
        size = sum(len(s.blob) for s in run.stored().values())
        rejected = sum(r["record_kind"] == "rejected" for r in out)
        print(
            f"dedup={'on ' if dedup else 'off'}: {len(rows):,} records in {best:.3f} s "
            f"({len(rows) / best:,.0f}/s), state {size:,} bytes, {rejected:,} rejected"
        )


if __name__ == "__main__":
    main()
