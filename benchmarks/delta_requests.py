"""What delta-rs asks of a store for each thing a run does to a Delta table: the floor of a run's
requests on an object store.

    PYTHONPATH=. .venv/bin/python benchmarks/delta_requests.py [--commits 6]

Starts the benchmarks' S3 server (moto's, ``benchmarks/s3_server.py``), creates a small table
in a bucket (no Delta checkpoint: ``delta.checkpointInterval`` 1000), appends ``--commits`` - 1
times, and counts the requests of each step, by kind, from the server's request log:

* a fresh opening (``DeltaTable(uri)``) with that many JSON commits and no checkpoint;
* ``transaction_version`` on that opened table (what a run asks to know a batch committed);
* a Delta checkpoint written from the opened table (``create_checkpoint``);
* a fresh opening at that checkpoint, and one with a commit since;
* an append through an opened table (a run's commit of a batch).

Figures, not a test; the counts do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pyarrow as pa  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from benchmarks.s3_server import S3Server, by_kind  # noqa: E402
from sinks.lake.object_store import delta_storage_options  # noqa: E402

BUCKET = "delta-requests"
URI = f"s3://{BUCKET}/table"


def counted(server: S3Server, label: str, step: Callable[[], Any]) -> Any:
    """Run ``step``; print its requests by kind and the objects they named."""
    start, end = f"{label}-start", f"{label}-end"
    server.mark(start)
    got = step()
    server.mark(end)
    requests = server.requests_between(start, end)
    kinds = ", ".join(f"{k} {n}" for k, n in by_kind(requests).items() if n)
    print(f"{label.replace('-', ' '):<44} {len(requests):>3}  ({kinds})")
    names: dict[str, int] = {}
    for r in requests:
        name = r.key.rsplit("/", 1)[-1] if r.key else "(list)"
        names[name] = names.get(name, 0) + 1
    print(" " * 6 + ", ".join(f"{n} x{c}" if c > 1 else n for n, c in names.items()))
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=6, help="JSON commits before the checkpoint")
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="panestore-delta-requests-") as work,
        S3Server(Path(work) / "server.log") as server,
    ):
        server.fresh_bucket(BUCKET)
        options = delta_storage_options(URI)
        rows = pa.table({"key": pa.array(range(100)), "value": pa.array(range(100))})
        write_deltalake(
            URI,
            rows,
            storage_options=options,
            configuration={"delta.checkpointInterval": "1000"},
        )
        for _ in range(args.commits - 1):
            write_deltalake(URI, rows, storage_options=options, mode="append")
        table = counted(
            server,
            f"open-with-{args.commits}-commits-no-checkpoint",
            lambda: DeltaTable(URI, storage_options=options),
        )
        counted(server, "transaction_version", lambda: table.transaction_version("app"))
        counted(server, "checkpoint-written-from-the-open-table", table.create_checkpoint)
        counted(server, "open-at-the-checkpoint", lambda: DeltaTable(URI, storage_options=options))
        counted(
            server,
            "append-through-the-open-table",
            lambda: write_deltalake(table, rows, mode="append"),
        )
        counted(
            server, "open-one-commit-after-it", lambda: DeltaTable(URI, storage_options=options)
        )


if __name__ == "__main__":
    main()
