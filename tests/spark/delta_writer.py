"""Another process writing a Delta table with delta-rs, as a producer of a pipeline's source does.

``python -m tests.spark.delta_writer TABLE COMMAND ...``:

* ``append FIRST COUNT [COMMITS [PAUSE_S]]``: events ``FIRST..FIRST+COUNT-1`` in ``COMMITS``
  appends (default 1), ``PAUSE_S`` seconds apart;
* ``optimize``: compact the table's files (a commit that changes no data);
* ``vacuum``: delete every file no longer in the table, at once (retention 0);
* ``delete PREDICATE``: delete rows (a commit that changes data).

Event ``i`` (:func:`rows`) is a pure function of ``i``: a user, an event time that goes back and
forth, an amount; every 53rd has no user (the pipeline rejects it).
"""

from __future__ import annotations

import sys
import time

import pyarrow as pa

T0_US = 1_704_067_200 * 1_000_000


def rows(first: int, count: int) -> pa.Table:
    ids = range(first, first + count)
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "user": [None if i % 53 == 52 else f"u{i % 5}" for i in ids],
            "ts": pa.array(
                [T0_US + ((i * 13) % 900) * 1_000_000 + i * 500_000 for i in ids],
                pa.timestamp("us", "UTC"),
            ),
            "amount": [float(i % 11) for i in ids],
        }
    )


def main(argv: list[str]) -> int:
    from deltalake import DeltaTable, write_deltalake

    table, command, args = argv[0], argv[1], argv[2:]
    if command == "append":
        first, count = int(args[0]), int(args[1])
        commits = int(args[2]) if len(args) > 2 else 1
        pause = float(args[3]) if len(args) > 3 else 0.0
        step = -(-count // commits)
        for k, start in enumerate(range(first, first + count, step)):
            if k and pause:
                time.sleep(pause)
            write_deltalake(table, rows(start, min(step, first + count - start)), mode="append")
    elif command == "optimize":
        DeltaTable(table).optimize.compact()
    elif command == "vacuum":
        DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    elif command == "delete":
        DeltaTable(table).delete(args[0])
    else:
        raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
