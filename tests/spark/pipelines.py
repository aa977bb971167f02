"""Engine factories the Spark Python workers import (module-level: picklable by reference)."""

from __future__ import annotations

SIZE_US = 60_000_000
LATENESS_US = 30_000_000
TRIGGER = "AfterWatermark(early=AfterCount(2), late=AfterCount(1))"


def windowing():
    from panes import AccumulationMode, FixedWindows, Windowing, parse_trigger

    return Windowing(
        FixedWindows(SIZE_US),
        trigger=parse_trigger(TRIGGER),
        accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
        allowed_lateness=LATENESS_US,
    )


def fixed_sum_engine():
    from panes import combiners
    from panes.engine import Engine

    return Engine(windowing(), combiners.sum())
