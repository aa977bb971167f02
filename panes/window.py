"""Windows: half-open intervals of event time."""

from __future__ import annotations

from typing import NamedTuple

from panes.time import BEGINNING_OF_TIME, END_OF_TIME, UNITS


class Window(NamedTuple):
    """The event-time interval ``[start, end)`` in microseconds.

    A window is a value: equal bounds mean the same window. Its largest timestamp is
    ``end - 1``; the watermark has *passed* the window once ``watermark >= end``.

    >>> w = Window(0, 60_000_000)
    >>> w.max_timestamp
    59999999
    """

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: Window) -> bool:
        return self.start < other.end and other.start < self.end

    def span(self, other: Window) -> Window:
        """The smallest window covering both."""
        return Window(min(self.start, other.start), max(self.end, other.end))

    def __repr__(self) -> str:
        if self == GLOBAL_WINDOW:
            return "GlobalWindow"
        return f"[{self.start}, {self.end})"


GLOBAL_WINDOW = Window(BEGINNING_OF_TIME, END_OF_TIME - UNITS["d"] + 1)
"""The single window of :class:`~panes.windowfns.GlobalWindows`.

As in Beam, it ends one day before the end of time, so that allowed lateness and the end-of-time
watermark still have room after it.
"""
