"""The windowing strategy of a pipeline: window function, trigger, and the pane policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from panes.time import Duration, to_micros
from panes.triggers import DefaultTrigger, Trigger
from panes.windowfns import WindowFn


class AccumulationMode(Enum):
    """How the panes of one window relate to each other."""

    DISCARDING = "DISCARDING"
    """Each pane holds only the elements since the previous pane: panes add up."""
    ACCUMULATING = "ACCUMULATING"
    """Each pane holds every element so far: the latest pane is the result."""
    ACCUMULATING_AND_RETRACTING = "ACCUMULATING_AND_RETRACTING"
    """As accumulating, and each refinement first retracts the values it replaces."""


class TimestampCombiner(Enum):
    """The output timestamp of a pane, from the timestamps of its elements."""

    END_OF_WINDOW = "END_OF_WINDOW"
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"


class OnTimeBehavior(Enum):
    """Whether an ON_TIME pane is emitted when no element arrived since the previous pane."""

    FIRE_ALWAYS = "FIRE_ALWAYS"
    FIRE_IF_NON_EMPTY = "FIRE_IF_NON_EMPTY"


class ClosingBehavior(Enum):
    """Whether a window's final pane is emitted when no element arrived since the previous one.

    The final pane is the one fired when the trigger finishes, or when the window expires
    (watermark past its end plus the allowed lateness) with elements that never fired.
    """

    FIRE_IF_NON_EMPTY = "FIRE_IF_NON_EMPTY"
    FIRE_ALWAYS = "FIRE_ALWAYS"


@dataclass(frozen=True, init=False)
class Windowing:
    """Where in event time, when in processing time, and how refinements relate.

    >>> from panes import FixedWindows, AfterWatermark, AfterCount
    >>> w = Windowing(FixedWindows(60_000_000), trigger=AfterWatermark(late=AfterCount(1)),
    ...               allowed_lateness=3_600_000_000)
    >>> w.accumulation_mode.name
    'DISCARDING'
    """

    window_fn: WindowFn
    trigger: Trigger = field(default_factory=DefaultTrigger)
    accumulation_mode: AccumulationMode = AccumulationMode.DISCARDING
    allowed_lateness: int = 0
    timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW
    on_time_behavior: OnTimeBehavior = OnTimeBehavior.FIRE_ALWAYS
    closing_behavior: ClosingBehavior = ClosingBehavior.FIRE_IF_NON_EMPTY

    def __init__(
        self,
        window_fn: WindowFn,
        trigger: Trigger | None = None,
        accumulation_mode: AccumulationMode = AccumulationMode.DISCARDING,
        allowed_lateness: Duration = 0,
        timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW,
        on_time_behavior: OnTimeBehavior = OnTimeBehavior.FIRE_ALWAYS,
        closing_behavior: ClosingBehavior = ClosingBehavior.FIRE_IF_NON_EMPTY,
    ) -> None:
        if not isinstance(window_fn, WindowFn):
            raise TypeError(f"window_fn must be a WindowFn, got {window_fn!r}")
        trigger = DefaultTrigger() if trigger is None else trigger
        if not isinstance(trigger, Trigger):
            raise TypeError(f"trigger must be a Trigger, got {trigger!r}")
        lateness = to_micros(allowed_lateness, "allowed_lateness")
        if lateness < 0:
            raise ValueError(f"allowed_lateness must not be negative, got {lateness}")
        for name, value, enum in (
            ("accumulation_mode", accumulation_mode, AccumulationMode),
            ("timestamp_combiner", timestamp_combiner, TimestampCombiner),
            ("on_time_behavior", on_time_behavior, OnTimeBehavior),
            ("closing_behavior", closing_behavior, ClosingBehavior),
        ):
            if not isinstance(value, enum):
                raise TypeError(f"{name} must be a {enum.__name__}, got {value!r}")
        set_ = object.__setattr__
        set_(self, "window_fn", window_fn)
        set_(self, "trigger", trigger)
        set_(self, "accumulation_mode", accumulation_mode)
        set_(self, "allowed_lateness", lateness)
        set_(self, "timestamp_combiner", timestamp_combiner)
        set_(self, "on_time_behavior", on_time_behavior)
        set_(self, "closing_behavior", closing_behavior)
