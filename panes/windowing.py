"""The windowing strategy of a pipeline: window function, trigger, and the pane policies."""

from __future__ import annotations

from dataclasses import dataclass, field

from panes.policies import AccumulationMode, ClosingBehavior, OnTimeBehavior, TimestampCombiner
from panes.rules import WindowRules
from panes.time import Duration, to_micros
from panes.triggers import DefaultTrigger, Trigger
from panes.windowfns import WindowFn


@dataclass(frozen=True, init=False)
class Windowing:
    """Where in event time, when in processing time, and how refinements relate.

    The allowed lateness is not kept as a field of its own: it goes into the window's rules
    (:class:`~panes.rules.WindowRules`, built once here), their one holder; ask them
    (``windowing.rules.lateness``, ``windowing.rules.too_late(...)``).

    >>> from panes import FixedWindows, AfterWatermark, AfterCount
    >>> w = Windowing(FixedWindows(60_000_000), trigger=AfterWatermark(late=AfterCount(1)),
    ...               allowed_lateness=3_600_000_000)
    >>> w.accumulation_mode.name, w.rules.lateness
    ('DISCARDING', 3600000000)
    """

    window_fn: WindowFn
    rules: WindowRules
    """The rules of the windows, the allowed lateness among them (built by the constructor;
    ``dataclasses.replace`` refuses it rather than rebuild them with no lateness)."""
    trigger: Trigger = field(default_factory=DefaultTrigger)
    accumulation_mode: AccumulationMode = AccumulationMode.DISCARDING
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
        set_(self, "timestamp_combiner", timestamp_combiner)
        set_(self, "on_time_behavior", on_time_behavior)
        set_(self, "closing_behavior", closing_behavior)
        set_(
            self,
            "rules",
            WindowRules.build(
                window_fn,
                lateness,
                accumulation_mode=accumulation_mode,
                on_time_behavior=on_time_behavior,
                closing_behavior=closing_behavior,
                timestamp_combiner=timestamp_combiner,
                holds_until_ontime=trigger.has_ontime_pane,
            ),
        )


__all__ = [
    "AccumulationMode",
    "ClosingBehavior",
    "OnTimeBehavior",
    "TimestampCombiner",
    "Windowing",
]
