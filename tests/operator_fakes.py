"""The stateful operator without Spark: stand-ins for what ``transformWithStateInPandas`` hands
:class:`jobs.executor.operator.BucketProcessor` (its state handle, the batch's clocks, an expired
timer), and one batch of a bucket driven as Spark drives it. Used by the operator's tests and
``benchmarks/operator.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

T0_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z


class FakeState:
    """A ValueState in memory."""

    def __init__(self) -> None:
        self.value = None

    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class FakeHandle:
    """A StatefulProcessorHandle in memory: one ValueState and the registered timers."""

    def __init__(self) -> None:
        self.state = FakeState()
        self.timers: set[int] = set()

    def getValueState(self, name, schema):
        return self.state

    def registerTimer(self, ms: int) -> None:
        self.timers.add(ms)

    def deleteTimer(self, ms: int) -> None:
        self.timers.discard(ms)


class Clocks:
    """A batch's TimerValues: its watermark and timestamp (ms)."""

    def __init__(self, watermark_ms: int = 0, processing_ms: int = T0_MS) -> None:
        self.watermark_ms, self.processing_ms = watermark_ms, processing_ms

    def getCurrentWatermarkInMs(self) -> int:
        return self.watermark_ms

    def getCurrentProcessingTimeInMs(self) -> int:
        return self.processing_ms


class Expired:
    """An ExpiredTimerInfo."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def getExpiryTimeInMs(self) -> int:
        return self.ms


def visit_batch(
    proc: Any, handle: FakeHandle, blob: bytes | None, clocks: Clocks, bucket: int = 3
) -> Iterator[Any]:
    """One batch of one bucket as Spark runs it: its input rows (one packed blob, if any), then
    the timers its watermark expired (Spark deletes each before calling back); the output
    frames."""
    import pandas as pd

    if blob is not None:
        frame = pd.DataFrame({"pst_bucket": [bucket], "pst_blob": [blob], "pst_row": [None]})
        yield from proc.handleInputRows((bucket,), iter([frame]), clocks)
    for timer in sorted(t for t in handle.timers if t <= clocks.watermark_ms):
        handle.timers.discard(timer)
        yield from proc.handleExpiredTimer((bucket,), clocks, Expired(timer))
