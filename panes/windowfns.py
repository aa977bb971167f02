"""Window functions: where in event time an element's results are computed.

A window function assigns each element to zero or more windows; a *merging* window function
(:class:`Sessions`, or your own) also merges the windows of one key when they are grouped.

Writing your own: subclass :class:`WindowFn`, implement :meth:`WindowFn.assign`, and for a
merging function set ``is_merging = True`` and implement :meth:`WindowFn.merge`. Both must be
pure functions of their arguments. ``merge`` must be order-independent: merging a set of windows
in one call, or in several calls as the windows arrive, must end with the same windows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from panes.time import Duration, format_duration, to_micros
from panes.window import GLOBAL_WINDOW, Window

Element = tuple[Any, ...]
"""An element of one key: a tuple that ends with ``(value, timestamp)``. Whatever comes before
is carried along untouched, so ``(key, value, timestamp)`` rows need no copying."""

MergeGroup = tuple[tuple[Window, ...], Window]
"""Windows to merge, and the window they become (which may be one of them)."""


@dataclass(frozen=True)
class Periodic:
    """Windows of length ``size`` starting at every ``offset + k * period`` (k any integer)."""

    size: int
    period: int
    offset: int


class WindowFn:
    """The protocol every window function follows (see the module doc)."""

    is_merging: ClassVar[bool] = False

    @property
    def periodic(self) -> Periodic | None:
        """The windows as a :class:`Periodic` grid (fixed, sliding), None when they are not one."""
        return None

    @property
    def only_window(self) -> Window | None:
        """The one window every element belongs to (global windows), else None."""
        return None

    def can_produce(self, window: Window) -> bool:
        """Whether ``window`` can be a window of this function (a check of stored windows
        against the configuration). True when the function cannot tell (custom functions)."""
        return True

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        """The windows an element belongs to; empty to drop it (it is reported, not lost)."""
        raise NotImplementedError

    def merge(self, windows: Iterable[Window]) -> list[MergeGroup]:
        """Group the given windows of one key into merges.

        Returns one ``(members, result)`` pair per merge of two or more windows; windows that
        merge with nothing are left out. Non-merging window functions return ``[]``.
        """
        return []

    def merge_horizon(self, window: Window) -> int:
        """The largest end of a window that may still merge with ``window`` (its own end for a
        non-merging function).

        The engine keeps a window until the watermark passes this horizon plus the allowed
        lateness: as long as an element that is not yet droppable could merge with the window,
        the window is still there to merge with (else a late element would open a separate
        window where a batch computation merges them). Merging functions whose windows can grow
        should override it.
        """
        return window.end

    def assign_bundle(self, elements: Iterable[Element]) -> dict[Window | None, list[Element]]:
        """Group a bundle of elements by window, in first-seen order.

        Elements assigned to no window are collected under ``None``. Subclasses may override
        this with a faster equivalent; the result must be the same as this loop's.
        """
        groups: dict[Window | None, list[Element]] = {}
        for element in elements:
            windows = self.assign(element[-1], element[-2])
            if not windows:
                groups.setdefault(None, []).append(element)
            for window in windows:
                group = groups.get(window)
                if group is None:
                    groups[window] = [element]
                else:
                    group.append(element)
        return groups


@dataclass(frozen=True)
class GlobalWindows(WindowFn):
    """Every element in one window covering all of event time.

    With the default trigger it fires only when the watermark reaches the end of time.
    """

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        return (GLOBAL_WINDOW,)

    @property
    def only_window(self) -> Window:
        return GLOBAL_WINDOW

    def can_produce(self, window: Window) -> bool:
        return tuple(window) == tuple(GLOBAL_WINDOW)

    def assign_bundle(self, elements: Iterable[Element]) -> dict[Window | None, list[Element]]:
        elements = list(elements)
        return {GLOBAL_WINDOW: elements} if elements else {}

    def __str__(self) -> str:
        return "GlobalWindows()"


@dataclass(frozen=True, init=False)
class FixedWindows(WindowFn):
    """Tumbling windows ``[offset + k*size, offset + (k+1)*size)``.

    >>> FixedWindows(60_000_000).assign(61_000_000, None)
    ([60000000, 120000000),)
    """

    size: int
    offset: int

    def __init__(self, size: Duration, offset: Duration = 0) -> None:
        size = to_micros(size, "FixedWindows size")
        if size <= 0:
            raise ValueError(f"FixedWindows size must be positive, got {size}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "offset", to_micros(offset, "FixedWindows offset") % size)

    def start_of(self, timestamp: Any) -> Any:
        """The start of the window of ``timestamp``: a number, or a numpy array of them.

        >>> import numpy as np
        >>> FixedWindows(10, 3).start_of(12), FixedWindows(10).start_of(np.array([-1, 10])).tolist()
        (3, [-10, 10])
        """
        return timestamp - (timestamp - self.offset) % self.size

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        start = self.start_of(timestamp)
        return (Window(start, start + self.size),)

    def assign_bundle(self, elements: Iterable[Element]) -> dict[Window | None, list[Element]]:
        size, start_of = self.size, self.start_of
        by_start: dict[int, list[Element]] = {}
        for element in elements:
            start = start_of(element[-1])
            group = by_start.get(start)
            if group is None:
                by_start[start] = [element]
            else:
                group.append(element)
        return {Window(start, start + size): group for start, group in by_start.items()}

    @property
    def periodic(self) -> Periodic:
        return Periodic(self.size, self.size, self.offset)

    def can_produce(self, window: Window) -> bool:
        start, end = window
        return end - start == self.size and (start - self.offset) % self.size == 0

    def __str__(self) -> str:
        if self.offset:
            return f"FixedWindows({format_duration(self.size)}, {format_duration(self.offset)})"
        return f"FixedWindows({format_duration(self.size)})"


@dataclass(frozen=True, init=False)
class SlidingWindows(WindowFn):
    """Windows of length ``size`` starting every ``period`` (at ``offset`` modulo ``period``).

    Each element belongs to every window that contains it: ``ceil(size / period)`` of them
    when ``period`` divides ``size``.
    """

    size: int
    period: int
    offset: int

    def __init__(self, size: Duration, period: Duration, offset: Duration = 0) -> None:
        size = to_micros(size, "SlidingWindows size")
        period = to_micros(period, "SlidingWindows period")
        if size <= 0 or period <= 0:
            raise ValueError(f"SlidingWindows size and period must be positive: {size}, {period}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "period", period)
        object.__setattr__(self, "offset", to_micros(offset, "SlidingWindows offset") % period)

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        last_start = timestamp - (timestamp - self.offset) % self.period
        return tuple(
            Window(start, start + self.size)
            for start in range(last_start, timestamp - self.size, -self.period)
        )

    @property
    def periodic(self) -> Periodic:
        return Periodic(self.size, self.period, self.offset)

    def can_produce(self, window: Window) -> bool:
        start, end = window
        return end - start == self.size and (start - self.offset) % self.period == 0

    def __str__(self) -> str:
        args = f"{format_duration(self.size)}, {format_duration(self.period)}"
        if self.offset:
            args += f", {format_duration(self.offset)}"
        return f"SlidingWindows({args})"


@dataclass(frozen=True, init=False)
class Sessions(WindowFn):
    """Sessions: an element opens ``[t, t + gap)``; overlapping windows of a key merge.

    Windows that only touch (one's end is the other's start) stay apart, as in Beam.
    """

    gap: int
    is_merging: ClassVar[bool] = True

    def __init__(self, gap: Duration) -> None:
        gap = to_micros(gap, "Sessions gap")
        if gap <= 0:
            raise ValueError(f"Sessions gap must be positive, got {gap}")
        object.__setattr__(self, "gap", gap)

    def assign(self, timestamp: int, value: Any) -> Sequence[Window]:
        return (Window(timestamp, timestamp + self.gap),)

    def merge(self, windows: Iterable[Window]) -> list[MergeGroup]:
        return merge_overlapping(windows)

    def merge_horizon(self, window: Window) -> int:
        # An element overlapping the window is at most at end - 1 and opens [t, t + gap).
        return window.end - 1 + self.gap

    def can_produce(self, window: Window) -> bool:
        return window.end - window.start >= self.gap

    def __str__(self) -> str:
        return f"Sessions({format_duration(self.gap)})"


def merge_overlapping(windows: Iterable[Window]) -> list[MergeGroup]:
    """Merge windows that overlap, transitively, into their span.

    Invariant: the results are pairwise disjoint, and every input window lies inside exactly
    one result (or is left out when it overlaps nothing).
    """
    groups: list[MergeGroup] = []
    members: list[Window] = []
    span: Window | None = None
    for window in sorted(set(windows)):
        if span is not None and window.start < span.end:
            members.append(window)
            span = span.span(window)
            continue
        if span is not None and len(members) > 1:
            groups.append((tuple(members), span))
        members, span = [window], window
    if span is not None and len(members) > 1:
        groups.append((tuple(members), span))
    return groups
