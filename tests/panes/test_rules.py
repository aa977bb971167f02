"""panes.rules.WindowRules: the one holder of a pipeline's allowed lateness past its
configuration, and the rule of when a window is let go (its merge horizon, the base one read
without asking the window function), which the engine takes rather than restates."""

from __future__ import annotations

from dataclasses import replace

import pytest

from panes import (
    AfterCount,
    FixedWindows,
    GlobalWindows,
    Sessions,
    SlidingWindows,
    Windowing,
    combiners,
)
from panes.engine import Engine
from panes.rules import WindowRules
from panes.time import END_OF_TIME
from panes.window import Window


class _LingeringWindows(FixedWindows):
    """Fixed windows whose merge horizon is 5 past their end (a window function that overrides
    the base rule: the rules must ask it)."""

    def merge_horizon(self, window: Window) -> int:
        return window.end + 5


# -- the one holder of the lateness ----------------------------------------------------------


def test_the_windowing_keeps_its_lateness_in_its_rules_only():
    windowing = Windowing(FixedWindows(10), allowed_lateness="5us")
    assert windowing.rules.lateness == 5
    assert windowing.rules is windowing.rules  # built once, not per asker
    assert not hasattr(windowing, "allowed_lateness")  # no second stored copy
    assert windowing == Windowing(FixedWindows(10), allowed_lateness=5)
    assert windowing != Windowing(FixedWindows(10), allowed_lateness=6)
    with pytest.raises(ValueError, match="allowed_lateness must not be negative"):
        Windowing(FixedWindows(10), allowed_lateness=-1)
    # replacing a policy would rebuild the rules: refused, rather than lose the lateness
    with pytest.raises(TypeError, match="rules"):
        replace(windowing, trigger=AfterCount(1))


def test_the_rules_are_built_from_the_windowing_and_the_lateness():
    windowing = Windowing(Sessions(10), allowed_lateness=7)
    rules = WindowRules.build(
        windowing.window_fn,
        3,
        accumulation_mode=windowing.accumulation_mode,
        on_time_behavior=windowing.on_time_behavior,
        closing_behavior=windowing.closing_behavior,
        timestamp_combiner=windowing.timestamp_combiner,
        holds_until_ontime=windowing.trigger.has_ontime_pane,
    )
    assert rules.lateness == 3 and rules.window_fn == Sessions(10)
    assert rules == replace(windowing.rules, lateness=3)


# -- when a window is let go -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("window_fn", "window", "horizon", "base"),
    [
        (FixedWindows(10), Window(0, 10), 10, True),
        (SlidingWindows(10, 5), Window(5, 15), 15, True),
        (GlobalWindows(), Window(0, END_OF_TIME), END_OF_TIME, True),
        (Sessions(10), Window(0, 10), 19, False),  # end - 1 + gap
        (_LingeringWindows(10), Window(0, 10), 15, False),
    ],
)
def test_a_windows_expiry_is_that_of_its_merge_horizon(window_fn, window, horizon, base):
    rules = Windowing(window_fn, allowed_lateness=2).rules
    assert rules.horizon_is_end is base
    assert rules.horizon(window) == horizon == window_fn.merge_horizon(window)
    expiry = min(horizon + 2 + 1, END_OF_TIME)
    assert rules.window_expiry(window) == expiry == rules.expiry(horizon)
    for wm in (expiry - 1, expiry):
        assert rules.gone(window, wm) is (wm >= expiry)


def test_replacing_the_window_function_rereads_its_horizon():
    rules = replace(Windowing(FixedWindows(10)).rules, window_fn=_LingeringWindows(10))
    assert not rules.horizon_is_end and rules.window_expiry(Window(0, 10)) == 16


def test_the_engine_keeps_a_window_until_the_rules_let_it_go():
    """The per-key engine's wake-up for a window is the rules' expiry of it: a window function
    with a horizon past the window's end keeps its window until then."""
    engine = Engine(Windowing(_LingeringWindows(10), allowed_lateness=2), combiners.sum())
    state = engine.new_state()
    engine.add_elements(state, "k", [(1, 3)])
    assert state.next_event_time == 10  # the on-time firing at the end of the window
    assert [p.value for p in engine.advance(state, "k", 10).panes] == [1]
    assert state.next_event_time == 18  # expiry: horizon 15 + lateness 2 + 1
    engine.advance(state, "k", 17)
    assert Window(0, 10) in state.windows
    engine.advance(state, "k", 18)
    assert Window(0, 10) not in state.windows
