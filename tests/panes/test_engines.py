"""panes.engines: the one factory of the engines (which one, and why not the columnar one), and
the rules of a window's life each engine takes from panes.rules."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from panes import (
    AccumulationMode,
    AfterProcessingTime,
    AfterWatermark,
    EngineKind,
    FixedWindows,
    Sessions,
    Simulator,
    SlidingWindows,
    Windowing,
    combiners,
)
from panes.columnar import ColumnarEngine, ElementColumns, Lifting, NotColumnar
from panes.engine import Engine
from panes.engines import ORDERED, KeyedRunner, build, choose, runner
from panes.pane import Timing
from panes.rules import WindowRules
from panes.time import END_OF_TIME
from panes.window import Window

COLUMNS = ElementColumns(("k",), ("n",), (("k", pa.string()), ("n", pa.int64())))
SUM = combiners.aggregates(total=combiners.sum("n"))
EARLY = AfterWatermark(early=AfterProcessingTime(5))


# -- the factory -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("windowing", "fn", "kind", "reason"),
    [
        (Windowing(FixedWindows(10)), SUM, EngineKind.COLUMNAR, None),
        (Windowing(FixedWindows(10), trigger=EARLY), SUM, EngineKind.LIFTED, "processing"),
        (Windowing(Sessions(10)), SUM, EngineKind.PER_ELEMENT, "Sessions"),
        (Windowing(SlidingWindows(10, 5)), SUM, EngineKind.PER_ELEMENT, "SlidingWindows"),
        (
            Windowing(FixedWindows(10), accumulation_mode=AccumulationMode.ACCUMULATING),
            SUM,
            EngineKind.COLUMNAR,
            None,
        ),
    ],
)
def test_the_factory_chooses_the_engine_and_says_why_not_the_columnar_one(
    windowing, fn, kind, reason
):
    choice = choose(windowing, fn, COLUMNS)
    assert choice.kind is kind
    if reason is None:
        assert choice.not_columnar is None
    else:
        assert choice.not_columnar is not None and reason in choice.not_columnar


def test_the_factory_builds_what_it_chose():
    columnar = build(Engine(Windowing(FixedWindows(10)), SUM), COLUMNS)
    assert columnar.kind is EngineKind.COLUMNAR and isinstance(columnar.columnar, ColumnarEngine)
    assert columnar.lifting is None and columnar.not_columnar is None
    lifted = build(Engine(Windowing(FixedWindows(10), trigger=EARLY), SUM), COLUMNS)
    assert lifted.kind is EngineKind.LIFTED and isinstance(lifted.lifting, Lifting)
    assert lifted.columnar is None and lifted.not_columnar
    plain = build(Engine(Windowing(Sessions(10)), SUM), COLUMNS)
    assert plain.kind is EngineKind.PER_ELEMENT and plain.lifting is plain.columnar is None
    # the per-key engine is always there, and the rules are its
    for engines in (columnar, lifted, plain):
        assert isinstance(engines.per_key, Engine) and engines.rules is engines.per_key.rules


def test_what_the_caller_adds_keeps_a_pipeline_off_an_engine():
    windowing = Windowing(FixedWindows(10))
    listed = combiners.aggregates(seen=combiners.to_list("n"))
    assert choose(windowing, listed, COLUMNS, unordered=True) == (EngineKind.PER_ELEMENT, ORDERED)
    off = choose(windowing, SUM, COLUMNS, columnar_off="mine")
    assert off == (EngineKind.LIFTED, "mine")
    assert choose(windowing, SUM, COLUMNS, columnar=False).kind is EngineKind.LIFTED
    kept_off = choose(windowing, SUM, COLUMNS, lift=False)
    assert kept_off.kind is EngineKind.PER_ELEMENT and kept_off.not_columnar
    no_columns = choose(windowing, SUM, None)
    assert no_columns.kind is EngineKind.PER_ELEMENT and no_columns.not_columnar


def test_the_simulator_takes_its_engine_from_the_factory():
    windowing = Windowing(FixedWindows(10))
    assert isinstance(
        runner(windowing, combiners.sum(), False, EngineKind.PER_ELEMENT), KeyedRunner
    )
    with pytest.raises(ValueError, match="not lifted"):
        runner(windowing, combiners.sum(), False, EngineKind.LIFTED)
    with pytest.raises(TypeError, match="EngineKind"):
        Simulator(windowing, combiners.sum(), engine="columnar")  # type: ignore[arg-type]
    with pytest.raises(NotColumnar, match="Sessions"):
        Simulator(Windowing(Sessions(10)), combiners.sum(), engine=EngineKind.COLUMNAR)
    for kind in (EngineKind.PER_ELEMENT, EngineKind.COLUMNAR):
        sim = Simulator(windowing, combiners.sum(), engine=kind)
        sim.add_elements([("k", 3, 1), ("k", 4, 2)])
        assert [p.value for p in sim.advance_watermark(10)] == [7]


# -- the rules -------------------------------------------------------------------------------


def test_too_late_is_beams_rule_for_numbers_and_arrays():
    rules = Windowing(FixedWindows(10), allowed_lateness=5).rules
    assert [rules.too_late(10, wm) for wm in (14, 15, 16)] == [False, False, True]
    assert rules.too_late(END_OF_TIME, END_OF_TIME)  # the end of time drops everything
    ends = np.array([10, 20, END_OF_TIME], np.int64)
    assert rules.too_late(ends, 16).tolist() == [True, False, False]
    # the same as watermark >= expiry(end), for every end and watermark
    for end in (0, 10, 25):
        for wm in range(end - 3, end + 10):
            assert rules.too_late(end, wm) == (wm >= rules.expiry(end))
    assert "allowed lateness (5us)" in rules.too_late_reason


def test_gone_reads_the_merge_horizon():
    fixed = Windowing(FixedWindows(10), allowed_lateness=5).rules
    sessions = Windowing(Sessions(10), allowed_lateness=5).rules
    assert [fixed.gone(Window(0, 10), wm) for wm in (15, 16)] == [False, True]
    assert [sessions.gone(Window(0, 10), wm) for wm in (24, 25)] == [False, True]
    assert fixed.gone(Window(0, END_OF_TIME), END_OF_TIME)


def test_pane_timestamp_and_counters_for_numbers_and_arrays():
    rules = WindowRules
    assert rules.pane_timestamp(False, 0, 10) == 9 and rules.pane_timestamp(True, 3, 10) == 3
    has, hold, end = np.array([True, False]), np.array([3, 0]), np.array([10, 20])
    assert rules.pane_timestamp(has, hold, end, np.where).tolist() == [3, 19]
    assert rules.counters_after(0, 0, True) == (1, 0)
    assert rules.counters_after(2, 1, False) == (3, 2)
    index, nonspec = rules.counters_after(
        np.array([0, 2]), np.array([0, 1]), np.array([Timing.EARLY, Timing.LATE]) == Timing.EARLY
    )
    assert index.tolist() == [1, 3] and nonspec.tolist() == [0, 2]


def test_forget_at_is_the_expiry_of_the_last_window_or_the_stated_horizon():
    rules = Windowing(SlidingWindows(10, 5), allowed_lateness=2).rules
    assert rules.forget_at(7, None) == 15 + 2 + 1  # windows [0, 10) and [5, 15)
    assert rules.forget_at(7, 100) == 108
    assert rules.forget_at(END_OF_TIME - 1, 100) == END_OF_TIME


def test_a_merged_windows_hold():
    from panes import TimestampCombiner

    def rules(combiner):
        return Windowing(Sessions(10), timestamp_combiner=combiner).rules

    assert rules(TimestampCombiner.EARLIEST).merged_hold([5, 3], 20) == 3
    assert rules(TimestampCombiner.LATEST).merged_hold([5, 3], 20) == 5
    assert rules(TimestampCombiner.END_OF_WINDOW).merged_hold([5, 3], 20) == 19
    assert rules(TimestampCombiner.EARLIEST).merged_hold([], 20) is None
