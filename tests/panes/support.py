"""Shared helpers for the panes tests: a custom merging window function and transcripts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from panes import Pane, Window, WindowFn
from panes.windowfns import MergeGroup


@dataclass(frozen=True)
class DailyBuckets(WindowFn):
    """A custom merging window function: an element opens ``[t, t + 1)``, and all windows of a
    key that start in the same ``bucket`` merge into their span. Order-independent: the result
    for a bucket is always [first start, last end)."""

    bucket: int
    is_merging = True

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        return (Window(timestamp, timestamp + 1),)

    def merge(self, windows: Iterable[Window]) -> list[MergeGroup]:
        by_bucket: dict[int, list[Window]] = {}
        for window in windows:
            by_bucket.setdefault(window.start // self.bucket, []).append(window)
        groups = []
        for members in by_bucket.values():
            if len(members) > 1:
                span = Window(min(w.start for w in members), max(w.end for w in members))
                groups.append((tuple(sorted(members)), span))
        return groups

    def merge_horizon(self, window: Window) -> int:
        return (window.start // self.bucket + 1) * self.bucket


@dataclass(frozen=True)
class EvenOnly(WindowFn):
    """Assigns even values to a fixed window of 10 and odd values to no window at all."""

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        start = timestamp - timestamp % 10
        return (Window(start, start + 10),) if value % 2 == 0 else ()


def describe(pane: Pane) -> str:
    """A compact, readable form of a pane for transcripts:
    ``[start,end) value @timestamp TIMING index/nonspeculative``, with ``-`` for retractions,
    ``last`` for final panes and ``supersedes`` listed."""
    info = pane.pane
    text = (
        f"{'-' if pane.is_retraction else ''}[{pane.window.start},{pane.window.end}) "
        f"{_value(pane.value)} @{pane.timestamp} {info.timing.name} "
        f"{info.index}/{info.nonspeculative_index}"
    )
    if info.is_last:
        text += " last"
    if pane.supersedes and not pane.is_retraction:
        text += " supersedes " + ",".join(f"[{w.start},{w.end})" for w in pane.supersedes)
    return text


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in sorted(value)) + "]"
    return str(value)
