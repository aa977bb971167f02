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
:meth:`~WindowRules.merged_hold`    the hold of a window merged from others
:meth:`~WindowRules.counters_after`  a window's pane index and non-speculative count after a pane
:meth:`~WindowRules.pane_timestamp` a pane's timestamp: the hold, or the window's max timestamp
:meth:`~WindowRules.too_late`       whether an element of a window is dropped as late (Beam's rule)
:meth:`~WindowRules.expiry`         the watermark at which a window is let go (garbage collection)
:meth:`~WindowRules.window_expiry`  the same, of a window (the expiry of its merge horizon)
:meth:`~WindowRules.gone`           whether a window is let go at a watermark (its panes are final)
:meth:`~WindowRules.due`            the next watermark at which a window needs attention
:meth:`~WindowRules.forget_at`      when a deduplicated pipeline forgets a record's id
==================================  ==============================================================

The rules are the one holder of the pipeline's allowed lateness past its configuration: a
:class:`~panes.windowing.Windowing` builds them once from its ``allowed_lateness`` argument and
keeps them (``windowing.rules``) rather than the lateness; the engines, the executor's
deduplication and the lake's ``verify`` and ``report`` take a :class:`WindowRules`, never a
loose lateness.

>>> from panes import FixedWindows, Sessions, Windowing
>>> rules = Windowing(FixedWindows(10), allowed_lateness=5).rules
>>> rules.timing(past_end=True, by_watermark=True, nonspeculative=0)
(<Timing.ON_TIME: 'ON_TIME'>, 0)
>>> rules.expiry(10), rules.due(rules.expiry(10), 10)
(16, 10)
>>> [rules.too_late(10, wm) for wm in (15, 16)], [rules.gone(Window(0, 10), wm) for wm in (15, 16)]
([False, True], [False, True])
>>> sessions = Windowing(Sessions(10), allowed_lateness=5).rules
>>> [sessions.gone(Window(0, 10), wm) for wm in (24, 25)]  # its horizon: end - 1 + gap
[False, True]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from panes.pane import DropReason, Timing
from panes.policies import (
    AccumulationMode,
    ClosingBehavior,
    OnTimeBehavior,
    TimestampCombiner,
)
from panes.time import END_OF_TIME, format_duration
from panes.window import Window
from panes.windowfns import WindowFn

EARLY, ON_TIME, LATE = Timing.EARLY, Timing.ON_TIME, Timing.LATE


@dataclass(frozen=True)
class WindowRules:
    """The rules of one pipeline's windows: built once by its
    :class:`~panes.windowing.Windowing` (:meth:`build`), which holds them (``windowing.rules``)."""

    window_fn: WindowFn
    lateness: int
    discarding: bool
    ontime_always: bool
    closing_always: bool
    holds_until_ontime: bool
    timestamps: TimestampCombiner
    horizon_is_end: bool = field(init=False, repr=False, compare=False)
    """The window function keeps the base merge horizon (a window's end): :meth:`horizon`
    need not ask it."""

    def __post_init__(self) -> None:
        inherited = type(self.window_fn).merge_horizon is WindowFn.merge_horizon
        object.__setattr__(self, "horizon_is_end", inherited)

    @classmethod
    def build(
        cls,
        window_fn: WindowFn,
        lateness: int,
        *,
        accumulation_mode: AccumulationMode,
        on_time_behavior: OnTimeBehavior,
        closing_behavior: ClosingBehavior,
        timestamp_combiner: TimestampCombiner,
        holds_until_ontime: bool,
    ) -> WindowRules:
        """The rules of a windowing strategy's window function and policies with the allowed
        ``lateness`` (µs): what :class:`~panes.windowing.Windowing` builds, once, and holds
        (``windowing.rules``) in place of a lateness of its own. ``holds_until_ontime``: the
        trigger has an on-time pane (its elements hold the output watermark until then)."""
        return cls(
            window_fn=window_fn,
            lateness=lateness,
            discarding=accumulation_mode is AccumulationMode.DISCARDING,
            ontime_always=on_time_behavior is OnTimeBehavior.FIRE_ALWAYS,
            closing_always=closing_behavior is ClosingBehavior.FIRE_ALWAYS,
            holds_until_ontime=holds_until_ontime,
            timestamps=timestamp_combiner,
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

    # -- a pane ----------------------------------------------------------------------------------

    @staticmethod
    def counters_after(index: Any, nonspeculative: Any, early: Any) -> tuple[Any, Any]:
        """A window's pane counters after it emitted a pane: the pane index counts every pane,
        the non-speculative count every pane that is not ``early``. Numbers, or numpy arrays of
        them (``early`` then an array of bools)."""
        return index + 1, nonspeculative + 1 - early

    @staticmethod
    def pane_timestamp(has_hold: Any, hold: Any, end: Any, where: Any = None) -> Any:
        """A pane's timestamp: the window's output-timestamp hold if it has one, else the
        window's max timestamp (``end - 1``). ``where``: for numpy arrays, ``numpy.where``."""
        if where is not None:
            return where(has_hold, hold, end - 1)
        return hold if has_hold else end - 1

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

    def merged_hold(self, holds: list[int], end: int) -> int | None:
        """The hold of a window merged from windows holding ``holds`` (None: none held), its
        end ``end``: with the ``END_OF_WINDOW`` combiner its max timestamp, otherwise the pick
        of its members' holds."""
        if not holds:
            return None
        if self.timestamps is TimestampCombiner.END_OF_WINDOW:
            return end - 1
        return self.hold_pick(holds)

    @property
    def hold_pick(self):
        """How two holds combine: ``min`` (``EARLIEST``) or ``max`` (``LATEST``)."""
        return min if self.timestamps is TimestampCombiner.EARLIEST else max

    # -- the watermark -------------------------------------------------------------------------

    def late_before(self, watermark: int) -> int:
        """At ``watermark``, an element of a window that ends before this is dropped as late
        (:meth:`too_late`)."""
        return END_OF_TIME + 1 if watermark >= END_OF_TIME else watermark - self.lateness

    def too_late(self, end: Any, watermark: int) -> Any:
        """Whether the elements of a window ending at ``end`` (an element's own window, before
        any merge) are dropped as late at ``watermark``: the watermark passed the end plus the
        allowed lateness, or reached the end of time (Beam's rule; the same as
        ``watermark >= expiry(end)``). ``end``: a number, or a numpy array of them."""
        return end < self.late_before(watermark)

    @property
    def too_late_reason(self) -> str:
        """The late-table reason of an element dropped by :meth:`too_late`."""
        return (
            f"{DropReason.EXPIRED}: the watermark passed the window's end plus the allowed "
            f"lateness ({format_duration(self.lateness)})"
        )

    def horizon(self, window: Window) -> int:
        """The window's merge horizon (:meth:`~panes.windowfns.WindowFn.merge_horizon`: its end,
        or for sessions ``end - 1 + gap``); its end without asking a window function that keeps
        the base rule (:attr:`horizon_is_end`)."""
        return window.end if self.horizon_is_end else self.window_fn.merge_horizon(window)

    def expiry(self, horizon: int) -> int:
        """The first watermark at which a window whose merge horizon is ``horizon`` (its end,
        but for sessions) is let go: past the horizon plus the allowed lateness (capped at the
        end of time)."""
        return min(horizon + self.lateness + 1, END_OF_TIME)

    def window_expiry(self, window: Window) -> int:
        """The first watermark at which ``window`` is let go: the :meth:`expiry` of its
        :meth:`horizon`."""
        return self.expiry(self.horizon(window))

    def gone(self, window: Window, watermark: int) -> bool:
        """Whether the engines have let ``window`` go at ``watermark`` (garbage collection): the
        watermark passed its merge horizon plus the allowed lateness, or reached the end of
        time. Nothing that is not dropped can reach the window any more, not even by merging,
        and its elements have all been fired (a closing pane fires those that never were): its
        panes are final (what ``verify`` and ``report`` tell final windows by)."""
        return watermark >= self.window_expiry(window)

    @staticmethod
    def due(expiry: int, wakeup: int | None) -> int:
        """The next watermark at which a window needs attention: its trigger's wake-up if that
        comes before its expiry."""
        return wakeup if wakeup is not None and wakeup < expiry else expiry

    # -- deduplication ---------------------------------------------------------------------------

    def forget_at(self, timestamp: int, horizon: int | None, value: Any = None) -> int | None:
        """The first watermark at which a deduplicated pipeline forgets the id of a record at
        ``timestamp`` (``value``: the record's, for a window function that reads it).

        ``horizon`` None: the pipeline's own, the first watermark at which the record is late
        in all of its windows (:meth:`expiry` of the last window's end: :meth:`too_late`,
        judged on the record's own windows before merging); None when the window function
        assigns it no window (the engine drops it: ``no window``). Otherwise the first
        watermark past ``timestamp + horizon``. Capped at the end of time.

        >>> from panes import SlidingWindows, Windowing
        >>> Windowing(SlidingWindows(10, 5)).rules.forget_at(7, None)  # [0, 10), [5, 15)
        16
        """
        if horizon is not None:
            return min(timestamp + horizon + 1, END_OF_TIME)
        windows = self.window_fn.assign(timestamp, value)
        if not windows:
            return None
        return self.expiry(max(w.end for w in windows))


__all__ = ["WindowRules"]
