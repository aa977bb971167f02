"""A micro-batch's clocks as Spark keeps them: the event-time watermark and the batch's
timestamp, in milliseconds.

Spark records both in its offset log's batch metadata (read back by
:func:`jobs.checkpoint.logs.batch_clocks`) and hands them to the stateful operator, which visits
every bucket with them (:mod:`jobs.executor.operator`). Runs in Spark's Python workers as on the
driver: it imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Clocks:
    """A visit's clocks as Spark keeps them (ms): the watermark and the batch's timestamp."""

    watermark_ms: int
    processing_ms: int
