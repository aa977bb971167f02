"""The operator without Spark: one shard's task run batch after batch as the batch sink runs it
(:class:`jobs.executor.operator.OperatorBatch` over one Arrow batch of operator input, its state
in a directory). Used by the operator's tests and ``benchmarks/operator.py``."""

from __future__ import annotations

import tempfile
from typing import Any

import pyarrow as pa

T0_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def clocks(watermark_ms: int = 0, processing_ms: int = T0_MS):
    """A step's clocks (Spark ms)."""
    from jobs.checkpoint.clocks import Clocks

    return Clocks(watermark_ms, processing_ms)


class ShardRun:
    """Shard 0 of an operator (``config``: :class:`jobs.executor.operator.OperatorConfig`) over
    successive steps, its state kept under ``root`` (a new temporary directory by default)."""

    def __init__(self, config: Any, root: str | None = None) -> None:
        self.config = config
        self.root = root or tempfile.mkdtemp(prefix="shard-")
        self.batch_id = 0

    def step(
        self,
        blobs: list[bytes | None] | bytes | None,
        at: Any,
        bucket: int = 3,
        rows: list[bytes | None] | None = None,
    ) -> list[dict]:
        """One step at clocks ``at`` over ``blobs`` (and ``rows``, the row encoding) of
        ``bucket`` (none: a step that only fires due timers): the output rows (no clock row)."""
        from jobs.executor.operator import OperatorBatch
        from jobs.executor.operator_input import BLOB, BUCKET, CLOCK, OPERATOR_INPUT_ARROW, ROW

        blobs = [blobs] if isinstance(blobs, bytes) else [b for b in blobs or [] if b is not None]
        rows = [r for r in rows or [] if r is not None]
        n = len(blobs) + len(rows)
        batch = pa.RecordBatch.from_pydict(
            {
                BUCKET: [bucket] * n,
                BLOB: [*blobs, *[None] * len(rows)],
                ROW: [*[None] * len(blobs), *rows],
                CLOCK: [None] * n,
            },
            schema=OPERATOR_INPUT_ARROW,
        )
        step = OperatorBatch(self.config, self.root, at, self.batch_id)
        self.batch_id += 1
        out = pa.Table.from_batches(list(step(iter([batch]) if n else iter([]))))
        return [r for r in out.to_pylist() if r["record_kind"] != "clock"]

    def stored(self) -> dict:
        """The shard's stored buckets (bucket -> state bytes and timer) after the last step."""
        from jobs.executor.state_store import ShardStore, batch_versions

        return ShardStore(self.root, 0).load(batch_versions(self.batch_id)[0])

    def processor(self) -> Any:
        """A processor of this operator (to ask what it decided, e.g. whether it lifts)."""
        from jobs.executor.operator import BucketProcessor, output_arrow_schema
        from jobs.executor.task_files import TaskOutput

        proc = BucketProcessor(self.config, TaskOutput(output_arrow_schema(), None))
        _ = proc.engines  # built
        return proc
