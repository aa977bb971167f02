"""The rules of a window's life, stated once for both engines.

A window's clocks-and-counters bookkeeping (what happens when it receives elements, fires,
expires) is the same whichever engine keeps it: the per-key :class:`~panes.engine.Engine`
applies these rules to one window at a time, the columnar engine (:mod:`panes.columnar`) to a
class of windows at a time. Every rule is a function of a few of the window's facts, so the
columnar engine evaluates it once per distinct combination of those facts among its rows
(:func:`panes.columnar.classes.per_class`), as it evaluates the trigger.

==================================  ==============================================================
rule                                what it decides
==================================  ==============================================================
:meth:`~WindowRules.timing`         a firing's timing and the pane's non-speculative index
:meth:`~WindowRules.emits`          whether a firing emits a pane (or only moves the trigger on)
:meth:`~WindowRules.closes`         whether a window let go fires a closing pane
:meth:`~WindowRules.is_last`        whether the pane is the window's last
:meth:`~WindowRules.keeps_hold`     whether the output-timestamp hold survives a firing
:meth:`~WindowRules.resets`         whether the accumulator starts over after a firing
:meth:`~WindowRules.holds`          whether an element holds its window's output timestamp
:meth:`~WindowRules.hold_after`     the hold after elements arrived
:meth:`~WindowRules.expiry`         the watermark at which a window is let go (garbage collection)
:meth:`~WindowRules.due`            the next watermark at which a window needs attention
==================================  ==============================================================

>>> from panes import FixedWindows, Windowing
>>> rules = WindowRules.of(Windowing(FixedWindows(10), allowed_lateness=5))
>>> rules.timing(past_end=True, by_watermark=True, nonspeculative=0)
(<Timing.ON_TIME: 'ON_TIME'>, 0)
>>> rules.expiry(10), rules.due(rules.expiry(10), 10)
(16, 10)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from panes.pane import Timing
from panes.time import END_OF_TIME
from panes.windowing import (
    AccumulationMode,
    ClosingBehavior,
    OnTimeBehavior,
    TimestampCombiner,
    Windowing,
)

EARLY, ON_TIME, LATE = Timing.EARLY, Timing.ON_TIME, Timing.LATE


@dataclass(frozen=True)
class WindowRules:
    """The rules of one pipeline's windows (built by :meth:`of` from its windowing)."""

    lateness: int
    discarding: bool
    ontime_always: bool
    closing_always: bool
    holds_until_ontime: bool
    timestamps: TimestampCombiner

    @classmethod
    def of(cls, windowing: Windowing) -> WindowRules:
        return cls(
            lateness=windowing.allowed_lateness,
            discarding=windowing.accumulation_mode is AccumulationMode.DISCARDING,
            ontime_always=windowing.on_time_behavior is OnTimeBehavior.FIRE_ALWAYS,
            closing_always=windowing.closing_behavior is ClosingBehavior.FIRE_ALWAYS,
            holds_until_ontime=windowing.trigger.has_ontime_pane,
            timestamps=windowing.timestamp_combiner,
        )

    # -- a firing ------------------------------------------------------------------------------

    @staticmethod
    def timing(past_end: bool, by_watermark: bool, nonspeculative: int) -> tuple[Timing, int]:
        """A firing's timing and its pane's non-speculative index: EARLY (-1) before the
        watermark passed the end of the window; after it, ON_TIME for the first pane the
        watermark fires, LATE otherwise (``nonspeculative``: the window's non-early panes so
        far)."""
        if not past_end:
            return EARLY, -1
        return (ON_TIME if by_watermark and nonspeculative == 0 else LATE), nonspeculative

    def emits(self, fresh: bool, timing: Timing, finished: bool, closing: bool) -> bool:
        """Whether a firing emits a pane: when elements arrived since the last one (``fresh``),
        or, empty, when the on-time or closing behavior asks for one. ``closing``: the firing
        at expiry of a window whose trigger never finished; ``finished``: its trigger did."""
        if fresh:
            return True
        if closing:
            return self.closing_always
        return (timing is ON_TIME and self.ontime_always) or (finished and self.closing_always)

    def closes(self, fresh: bool) -> bool:
        """Whether a window let go while its trigger had not finished fires a closing pane:
        elements never fired, or the closing behavior fires always."""
        return fresh or self.closing_always

    def is_last(self, finished: bool, gone: bool, closing: bool) -> bool:
        """Whether a pane is its window's last: its trigger finished, it is the closing pane,
        or the window is let go right after this firing and no closing pane follows."""
        return finished or closing or (gone and not self.closing_always)

    def keeps_hold(self, past_end: bool) -> bool:
        """Whether the output-timestamp hold survives a firing: only an early firing of a
        trigger that will still fire on time keeps it."""
        return not past_end and self.holds_until_ontime

    def resets(self, finished: bool) -> bool:
        """Whether the accumulator starts over after a firing (discarding mode; a finished
        window keeps nothing)."""
        return self.discarding and not finished

    # -- elements ------------------------------------------------------------------------------

    @staticmethod
    def holds(timestamp: Any, watermark: int) -> Any:
        """Whether an element at ``timestamp`` holds its window's output timestamp: it is not
        behind the watermark (Beam's rule). Numbers, or numpy arrays of them."""
        return timestamp >= watermark

    def hold_after(self, hold: int | None, new: int | None, end: int, watermark: int) -> int | None:
        """The hold of a window ending at ``end`` after elements arrived whose earliest (or
        latest) time not behind the watermark is ``new`` (None: none). With the
        ``END_OF_WINDOW`` combiner a window not yet past its end holds its last timestamp;
        otherwise Beam's rule: elements behind the watermark hold nothing."""
        if self.timestamps is TimestampCombiner.END_OF_WINDOW:
            return end - 1 if end > watermark else hold
        if new is None:
            return hold
        if hold is None:
            return new
        return self.hold_pick(hold, new)

    @property
    def hold_pick(self):
        """How two holds combine: ``min`` (``EARLIEST``) or ``max`` (``LATEST``)."""
        return min if self.timestamps is TimestampCombiner.EARLIEST else max

    # -- the watermark -------------------------------------------------------------------------

    def expiry(self, horizon: int) -> int:
        """:func:`expiry` at this pipeline's allowed lateness."""
        return expiry(horizon, self.lateness)

    def gone(self, horizon: int, watermark: int) -> bool:
        """Whether the window is let go at ``watermark`` (:func:`panes.engine.window_gone`)."""
        return watermark >= self.expiry(horizon)

    @staticmethod
    def due(expiry: int, wakeup: int | None) -> int:
        """The next watermark at which a window needs attention: its trigger's wake-up if that
        comes before its expiry."""
        return wakeup if wakeup is not None and wakeup < expiry else expiry


def expiry(horizon: int, allowed_lateness: int) -> int:
    """The first watermark at which a window whose merge horizon is ``horizon`` (its end,
    but for sessions) is let go: past the horizon plus the allowed lateness (capped at the end
    of time)."""
    return min(horizon + allowed_lateness + 1, END_OF_TIME)


__all__ = ["WindowRules", "expiry"]
