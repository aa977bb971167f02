"""Triggers: merging their state, and their static properties.

Merging trigger state (the spec's ``further(rewind(R1), rewind(R2), ...)``).

Pins that ``panes.triggers.merge_states`` is commutative and associative, with and without
rewind, for random trigger trees and random *reachable* states (built from ``new_state()`` by
random element arrivals and firings at random, monotonic clocks), and that it never modifies
its inputs. Windows of one key merge in whatever order and grouping bundles bring them, so any
other behaviour would make a merged window's firings depend on arrival order.
"""

from __future__ import annotations

import copy
import itertools

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from panes import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    Always,
    DefaultTrigger,
    Never,
    OrFinally,
    Repeatedly,
    Window,
    parse_trigger,
)
from panes.triggers import ROOT, TriggerContext, merge_states
from tests.panes.test_syntax import trigger_trees

WINDOW = Window(0, 100)

# Small counts and delays, so that random schedules make triggers fire and finish.
small_leaves = st.one_of(
    st.builds(AfterCount, st.integers(1, 3)),
    st.builds(AfterProcessingTime, st.integers(0, 8)),
    st.just(AfterWatermark()),
    st.just(Always()),
    st.just(Never()),
    st.just(DefaultTrigger()),
)
triggers = trigger_trees(depth=4, leaves=small_leaves)


@st.composite
def reachable_states(draw, trigger):
    """A state the engine can reach for a window that is still open: a random sequence of
    bundles and clock moves, firing whenever the trigger is evaluated and ready (a firing
    that would finish the root closes the window, so it is left out)."""
    state = trigger.new_state()
    watermark = draw(st.integers(-20, 60))
    processing_time = draw(st.integers(0, 10))
    for _ in range(draw(st.integers(0, 10))):
        watermark += draw(st.integers(0, 30))
        processing_time += draw(st.integers(0, 5))
        ctx = TriggerContext(WINDOW, watermark, processing_time)
        if draw(st.booleans()):
            trigger.on_elements(state, ROOT, ctx, draw(st.integers(1, 3)))
        if draw(st.booleans()) and trigger.should_fire(state, ROOT, ctx):
            fired = list(state)
            trigger.on_fire(fired, ROOT, ctx)
            if not trigger.is_done(fired, ROOT):
                state = fired
    return state


@st.composite
def trigger_and_states(draw, n):
    trigger = draw(triggers)
    return trigger, [draw(reachable_states(trigger)) for _ in range(n)]


@given(trigger_and_states(2), st.booleans())
def test_merge_is_commutative(pair, rewind):
    trigger, (a, b) = pair
    assert merge_states(trigger, [a, b], rewind) == merge_states(trigger, [b, a], rewind)


@given(trigger_and_states(3))
def test_merge_without_rewind_is_associative_in_any_order(triple):
    trigger, states = triple
    _assert_every_grouping_and_order_agrees(trigger, states, rewind=False)


# AfterEach(EndOfWindow, AfterCount(1), AfterCount(1)) after its ON_TIME firing and one late
# element, which fired the first AfterCount: EndOfWindow and the first AfterCount are done, and
# the second (which sees every element too) has counted that element.
AFTER_EACH = AfterEach(AfterWatermark(), AfterCount(1), AfterCount(1))
PAST_END = [0b01100, None, None, 0, 1]


@example((AFTER_EACH, [AFTER_EACH.new_state(), PAST_END, AFTER_EACH.new_state()]))
# AfterEach restarts the second AfterWatermark out of its late phase; its late count is kept
@example(
    (
        AfterEach(AfterWatermark(), AfterWatermark(late=AfterCount(1))),
        [
            [0, None, None, None, None, 0],
            [0, None, None, None, None, 0],
            [12, None, None, None, None, 1],
        ],
    )
)
@given(trigger_and_states(3))
def test_merge_with_rewind_is_associative_in_any_order(triple):
    trigger, states = triple
    _assert_every_grouping_and_order_agrees(trigger, states, rewind=True)


def test_merging_with_rewind_in_two_steps_equals_merging_at_once():
    """Sessions: a window past its end (b) merges with a into a window whose end the watermark
    has not reached, and in the next bundle with c. Merged in one bundle instead, the result
    must be the same trigger state."""
    trigger, a, b, c = AFTER_EACH, AFTER_EACH.new_state(), PAST_END, AFTER_EACH.new_state()
    at_once = merge_states(trigger, [a, b, c], rewind=True)
    in_two_steps = merge_states(
        trigger, [merge_states(trigger, [a, b], rewind=True), c], rewind=True
    )
    # As in Beam Java (AfterEachStateMachine.onMerge): EndOfWindow is unfinished again, so the
    # AfterCounts after it are restarted (unfinished; element counts kept).
    assert at_once == in_two_steps == [0, None, None, 0, 1]


def _assert_every_grouping_and_order_agrees(trigger, states, rewind):
    def merge(*parts):
        return merge_states(trigger, list(parts), rewind)

    expected = merge(*states)
    for a, b, c in itertools.permutations(states):
        assert merge(a, b, c) == expected
        assert merge(merge(a, b), c) == expected
        assert merge(a, merge(b, c)) == expected


@given(trigger_and_states(3), st.booleans())
def test_merge_does_not_modify_its_inputs(triple, rewind):
    trigger, states = triple
    before = copy.deepcopy(states)
    merged = merge_states(trigger, states, rewind)
    assert states == before
    assert all(merged is not s for s in states)


@given(trigger_and_states(1), st.booleans())
def test_merging_a_single_state_without_rewind_is_the_identity(single, rewind):
    trigger, (state,) = single
    assert merge_states(trigger, [state], False) == state


@given(trigger_and_states(1))
def test_merging_with_a_fresh_state_changes_nothing_but_the_rewind(single):
    """A window that has seen nothing adds nothing to a merge."""
    trigger, (state,) = single
    for rewind in (False, True):
        alone = merge_states(trigger, [state], rewind)
        assert merge_states(trigger, [state, trigger.new_state()], rewind) == alone


# -- hand-checked merges, from the spec's rules -----------------------------------------------


def _state(trigger, *steps):
    """Apply ``steps``: ("el", n, watermark, pt) or ("fire", watermark, pt)."""
    s = trigger.new_state()
    for step in steps:
        if step[0] == "el":
            trigger.on_elements(s, ROOT, TriggerContext(WINDOW, step[2], step[3]), step[1])
        else:
            ctx = TriggerContext(WINDOW, step[1], step[2])
            assert trigger.should_fire(s, ROOT, ctx)
            trigger.on_fire(s, ROOT, ctx)
    return s


def test_element_counts_add_up():
    trigger = AfterCount(5)
    a = _state(trigger, ("el", 2, 0, 0))
    b = _state(trigger, ("el", 2, 0, 0))
    merged = merge_states(trigger, [a, b], rewind=True)
    ctx = TriggerContext(WINDOW, 0, 0)
    assert not trigger.should_fire(merged, ROOT, ctx)
    trigger.on_elements(merged, ROOT, ctx, 1)
    assert trigger.should_fire(merged, ROOT, ctx)


def test_earliest_arrival_time_wins():
    trigger = Repeatedly(AfterProcessingTime(10))
    a = _state(trigger, ("el", 1, 0, 7))
    b = _state(trigger, ("el", 1, 0, 3))
    merged = merge_states(trigger, [a, b], rewind=False)
    assert trigger.should_fire(merged, ROOT, TriggerContext(WINDOW, 0, 13))
    assert not trigger.should_fire(merged, ROOT, TriggerContext(WINDOW, 0, 12))


def test_finished_in_any_is_finished_after_the_merge():
    trigger = AfterAny(AfterCount(2), Never())
    a = _state(trigger, ("el", 2, 0, 0), ("fire", 0, 0))
    b = _state(trigger, ("el", 1, 0, 0))
    assert trigger.is_done(merge_states(trigger, [a, b], rewind=True), ROOT)


def test_rewind_takes_after_watermark_back_to_its_early_phase():
    """One window's end has passed (it fired ON_TIME), the merged window's has not: with rewind
    the merged trigger waits for the merged window's end again and counts early elements;
    without, it stays in its late phase."""
    trigger = AfterWatermark(early=AfterCount(3), late=AfterCount(1))
    on_time = _state(trigger, ("el", 1, 0, 0), ("fire", 100, 0))
    early = _state(trigger, ("el", 1, 0, 0))
    before_end = TriggerContext(Window(0, 200), 100, 0)
    rewound = merge_states(trigger, [on_time, early], rewind=True)
    late = merge_states(trigger, [on_time, early], rewind=False)
    assert trigger.event_wakeup(rewound, ROOT, before_end) == 200
    assert trigger.event_wakeup(late, ROOT, before_end) is None
    for state in (rewound, late):
        trigger.on_elements(state, ROOT, before_end, 1)
    assert trigger.should_fire(late, ROOT, before_end), "late: one element fires"
    assert not trigger.should_fire(rewound, ROOT, before_end), "early: 2 of 3 elements"
    trigger.on_elements(rewound, ROOT, before_end, 1)
    assert trigger.should_fire(rewound, ROOT, before_end)


def test_or_finally_and_after_all_merge_their_branches():
    trigger = OrFinally(Repeatedly(AfterAll(AfterCount(2), AfterCount(3))), AfterCount(10))
    a = _state(trigger, ("el", 2, 0, 0))
    b = _state(trigger, ("el", 1, 0, 0))
    merged = merge_states(trigger, [a, b], rewind=True)
    assert trigger.should_fire(merged, ROOT, TriggerContext(WINDOW, 0, 0))


def test_after_each_merge_moves_on_as_far_as_the_furthest_state():
    """The spec's example: AfterEach(R1, R2, R3) merged with AfterEach(<done>, <done>, R3) is
    at R3, which has seen every element of both windows."""
    trigger = AfterEach(AfterCount(1), AfterCount(1), AfterCount(6))
    fresh = _state(trigger, ("el", 1, 0, 0))
    advanced = _state(
        trigger, ("el", 1, 0, 0), ("fire", 0, 0), ("el", 1, 0, 0), ("fire", 0, 0), ("el", 3, 0, 0)
    )
    ctx = TriggerContext(WINDOW, 0, 0)
    merged = merge_states(trigger, [fresh, advanced], rewind=True)
    # R3 counted every element of both windows, 1 + (1 + 1 + 3) = 6, so it is ready, and its
    # firing finishes the AfterEach (were R1 active again, the trigger would go on).
    assert trigger.should_fire(merged, ROOT, ctx)
    trigger.on_fire(merged, ROOT, ctx)
    assert trigger.is_done(merged, ROOT)


# -- static properties (what a configuration check may ask of a trigger tree) ----------------


@pytest.mark.parametrize(
    ("text", "early"),
    [
        ("AfterWatermark()", False),
        ("DefaultTrigger()", False),
        ("Never()", False),
        ("AfterWatermark(early=AfterCount(1))", True),
        ("Repeatedly(AfterCount(3))", True),
        ("AfterAny(AfterWatermark(), AfterProcessingTime(1m))", True),
        ("AfterAll(AfterWatermark(), AfterCount(2))", False),
        ("AfterEach(AfterWatermark(), AfterCount(2))", False),
        ("OrFinally(Repeatedly(AfterWatermark()), AfterCount(5))", True),
    ],
)
def test_fires_before_end_of_window(text, early):
    t = parse_trigger(text)
    assert t.fires_before_end_of_window is early


# -- evaluation by class ----------------------------------------------------------------------


BY_CLASS = [
    DefaultTrigger(),
    AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
    Repeatedly(AfterAny(AfterCount(2), AfterWatermark())),
    AfterEach(AfterCount(2), Repeatedly(AfterWatermark())),
    OrFinally(Repeatedly(AfterCount(2)), AfterWatermark()),
    AfterAll(AfterCount(3), AfterWatermark()),
    Repeatedly(Always()),
    AfterWatermark(late=Never()),
]


@given(
    st.sampled_from(BY_CLASS),
    st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 30)), max_size=12),
    st.integers(1, 20),
)
def test_a_trigger_by_class_answers_as_it_does_for_each_window_of_the_class(trigger, steps, end):
    """The contract of :class:`ClassContext`: for a ``by_class`` trigger, the answers in a real
    window's context equal the answers in the context of its class (the watermark on the same
    side of the window's end; its end as the wake-up)."""
    from panes.triggers import ClassContext

    assert trigger.by_class
    window = Window(end - 10, end)
    real, by_class = trigger.new_state(), trigger.new_state()
    for n, watermark in steps:
        ctx, cls = TriggerContext(window, watermark, 0), ClassContext(watermark >= end)
        if n:
            trigger.on_elements(real, ROOT, ctx, n)
            trigger.on_elements(by_class, ROOT, cls, n)
        fires = trigger.should_fire(real, ROOT, ctx)
        assert fires == trigger.should_fire(by_class, ROOT, cls)
        if fires:
            trigger.on_fire(real, ROOT, ctx)
            trigger.on_fire(by_class, ROOT, cls)
        assert real == by_class
        wake = trigger.event_wakeup(real, ROOT, ctx)
        assert (wake == end) == (trigger.event_wakeup(by_class, ROOT, cls) == ClassContext.END)
        assert wake in (None, end)


def test_a_node_that_does_not_declare_how_it_reads_the_clocks_is_not_evaluated_by_class():
    from dataclasses import dataclass

    from panes.triggers import _Leaf

    @dataclass(frozen=True, repr=False)
    class AfterWatermarkAtLeast(_Leaf):  # reads the watermark as a number
        at: int

        def should_fire(self, s, o, ctx):
            return ctx.watermark >= self.at

    trigger = Repeatedly(AfterWatermarkAtLeast(5))
    assert not trigger.by_class
    assert not Repeatedly(AfterAny(AfterCount(2), AfterProcessingTime(3))).by_class


def test_a_node_that_reads_the_clocks_of_a_class_as_numbers_is_refused():
    from dataclasses import dataclass

    from panes.triggers import ClassContext, NotByClass, _Leaf

    @dataclass(frozen=True, repr=False)
    class Misdeclared(_Leaf):
        clocks_by_end = True  # wrongly: it reads the watermark as a number

        def should_fire(self, s, o, ctx):
            return ctx.watermark >= 5

    trigger = Repeatedly(Misdeclared())
    assert trigger.by_class
    with pytest.raises(NotByClass, match="watermark"):
        trigger.should_fire(trigger.new_state(), ROOT, ClassContext(past_end=True))
