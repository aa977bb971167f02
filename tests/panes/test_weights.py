"""Weighted input: elements of weight -1 (Retracted values) withdraw what earlier elements added.

The rules (docs/semantics.md, "Weighted input") and the reason they exist: a pipeline reading
another pipeline's panes must withdraw what a retracted pane contributed.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    DefaultTrigger,
    Engine,
    FixedWindows,
    GlobalWindows,
    Repeatedly,
    Retracted,
    Sessions,
    Simulator,
    SlidingWindows,
    WeightedInputError,
    Windowing,
    combiners,
)
from panes.combiners import CombineFn
from panes.fold import batch, fold
from panes.state import KeyState

RETRACTING = AccumulationMode.ACCUMULATING_AND_RETRACTING


def windowing(window_fn=None, trigger=None, lateness=10_000, mode=RETRACTING):
    return Windowing(
        window_fn or FixedWindows(10),
        trigger=trigger or DefaultTrigger(),
        accumulation_mode=mode,
        allowed_lateness=lateness,
    )


class Product(CombineFn):
    """A user combiner without ``retract``: it cannot read retractions."""

    def create(self):
        return 1

    def add(self, acc, value):
        return acc * value

    def merge(self, accs):
        out = 1
        for acc in accs:
            out *= acc
        return out

    def extract(self, acc):
        return acc


class SumOfSquares(Product):
    """A user combiner that withdraws through its ``retract`` method."""

    def create(self):
        return 0

    def add(self, acc, value):
        return acc + value * value

    def merge(self, accs):
        return sum(accs)

    def retract(self, acc, value):
        return acc - value * value


class TimedSum(SumOfSquares):
    """A user combiner that reads event times: the sum of value x event time; it withdraws."""

    reads_event_time = True

    def add(self, acc, value):
        time, v = value
        return acc + v * time

    def retract(self, acc, value):
        time, v = value
        return acc - v * time


# -- what is refused ---------------------------------------------------------------------------


def test_min_and_max_are_refused_naming_the_aggregate():
    agg = combiners.aggregates(total=combiners.sum("s"), longest=combiners.max("s"))
    with pytest.raises(WeightedInputError, match=r"aggregate 'longest' \(max\(s\)\)"):
        Engine(windowing(), agg, weighted=True)
    with pytest.raises(WeightedInputError, match=r"min\(s\)"):
        Engine(windowing(), combiners.min("s"), weighted=True)


def test_a_user_combiner_without_retract_is_refused_and_one_with_it_withdraws():
    with pytest.raises(WeightedInputError, match="retract"):
        Engine(windowing(), Product(), weighted=True)
    sim = Simulator(windowing(), SumOfSquares(), weighted=True)
    sim.add_elements([("k", 3, 1), ("k", 2, 2), ("k", Retracted(3), 1)])
    sim.advance_watermark(END_OF_TIME)
    assert fold(sim.panes, RETRACTING, SumOfSquares()) == {
        ("k", FixedWindows(10).assign(1, 0)[0]): 4
    }


@pytest.mark.parametrize("mode", [AccumulationMode.ACCUMULATING, AccumulationMode.DISCARDING])
def test_modes_that_cannot_withdraw_a_window_are_refused(mode):
    with pytest.raises(WeightedInputError, match=mode.name.lower()):
        Engine(windowing(mode=mode), combiners.sum(), weighted=True)


def test_an_engine_without_weighted_input_accepts_any_configuration():
    Engine(windowing(mode=AccumulationMode.DISCARDING), combiners.max(), weighted=False)


# -- the rules ---------------------------------------------------------------------------------


def test_a_retraction_withdraws_its_value_from_the_window_of_its_timestamp():
    sim = Simulator(
        windowing(), combiners.aggregates(n=combiners.count(), s=combiners.sum("x")), True
    )
    sim.add_elements([("k", {"x": 5}, 3), ("k", {"x": 7}, 4), ("k", {"x": 1}, 12)])
    sim.add_elements([("k", Retracted({"x": 5}), 3)])
    sim.advance_watermark(END_OF_TIME)
    values = {p.window.start: p.value for p in sim.panes if not p.is_retraction}
    assert values == {0: {"n": 1, "s": 7}, 10: {"n": 1, "s": 1}}


def test_a_window_whose_weight_drops_to_zero_retracts_its_pane_and_leaves_the_view():
    sim = Simulator(windowing(trigger=Repeatedly(AfterCount(1))), combiners.sum(), weighted=True)
    first = sim.add_elements([("k", 5, 3)])
    assert [(p.value, p.is_retraction) for p in first] == [(5, False)]
    second = sim.add_elements([("k", Retracted(5), 3)])
    assert [(p.value, p.is_retraction) for p in second] == [(5, True)]  # no value pane
    sim.advance_watermark(END_OF_TIME)
    assert fold(sim.panes, RETRACTING, combiners.sum()) == {}


def test_a_window_emptied_before_it_fires_emits_nothing():
    sim = Simulator(windowing(), combiners.sum(), weighted=True)
    sim.add_elements([("k", 5, 3), ("k", Retracted(5), 3)])
    assert sim.advance_watermark(END_OF_TIME) == []


def test_after_count_counts_elements_of_either_weight():
    sim = Simulator(windowing(trigger=AfterCount(3)), combiners.sum(), weighted=True)
    assert sim.add_elements([("k", 5, 1), ("k", 2, 2)]) == []
    fired = sim.add_elements([("k", Retracted(5), 1)])  # the third element
    assert [(p.value, p.is_retraction) for p in fired] == [(2, False)]


def test_a_retraction_still_bridges_sessions_it_is_assigned_and_merged_like_any_element():
    sim = Simulator(windowing(Sessions(5)), combiners.sum(), weighted=True)
    sim.add_elements([("k", 1, 0), ("k", 2, 8), ("k", 4, 4)])
    sim.add_elements([("k", Retracted(4), 4)])
    sim.advance_watermark(END_OF_TIME)
    view = fold(sim.panes, RETRACTING, combiners.sum())
    assert [(w.start, w.end, v) for (_, w), v in view.items()] == [(0, 13, 3)]


def test_to_list_withdraws_one_equal_value():
    sim = Simulator(windowing(), combiners.to_list(), weighted=True)
    sim.add_elements([("k", "a", 1), ("k", "b", 2), ("k", "a", 3), ("k", Retracted("a"), 1)])
    sim.advance_watermark(END_OF_TIME)
    assert list(fold(sim.panes, RETRACTING, combiners.to_list()).values()) == [["b", "a"]]


def test_the_weight_survives_the_state_bytes_and_old_states_read_as_weight_zero():
    engine = Engine(windowing(), combiners.sum(), weighted=True)
    state = engine.new_state()
    engine.add_elements(state, "k", [(5, 3), (Retracted(5), 3), (2, 4)])
    (restored,) = engine.load_state(state.to_bytes()).windows.values()
    assert restored.weight == 1
    _, wm, pt, windows = pickle.loads(state.to_bytes())
    old = pickle.dumps((1, wm, pt, [w[:15] for w in windows]))
    (from_old,) = KeyState.from_bytes(old).windows.values()
    assert from_old.weight == 0 and from_old.acc == 2


# -- property: the fold equals the weighted batch ----------------------------------------------

WINDOW_FNS = [FixedWindows(10), SlidingWindows(10, 5), Sessions(5), GlobalWindows()]
TRIGGERS = [
    DefaultTrigger(),
    Repeatedly(AfterCount(2)),
    AfterWatermark(early=AfterCount(1), late=AfterCount(1)),
]


@st.composite
def weighted_steps(draw):
    """Bundles of +1 elements and retractions of earlier ones, with watermark moves."""
    steps, added = [], []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["add", "add", "retract", "watermark"]))
        if kind == "watermark":
            steps.append(("watermark", draw(st.integers(0, 20))))
            continue
        if kind == "retract" and added:
            key, value, ts = added.pop(draw(st.integers(0, len(added) - 1)))
            steps.append(("bundle", [(key, Retracted(value), ts)]))
            continue
        bundle = draw(
            st.lists(
                st.tuples(st.sampled_from("ab"), st.integers(1, 9), st.integers(0, 60)),
                min_size=1,
                max_size=4,
            )
        )
        added.extend(bundle)
        steps.append(("bundle", bundle))
    return steps


@given(
    st.sampled_from(WINDOW_FNS),
    st.sampled_from(TRIGGERS),
    st.sampled_from([0, 10, 10_000]),
    st.sampled_from(
        [
            combiners.sum(),
            combiners.count(),
            combiners.mean(),
            TimedSum(),  # given (event time, value) pairs, a -1 element's value unwrapped
            combiners.aggregates(timed=TimedSum(), total=combiners.sum()),
        ]
    ),
    weighted_steps(),
)
def test_fold_of_weighted_input_equals_the_weighted_batch(window_fn, trigger, lateness, fn, steps):
    sim = Simulator(windowing(window_fn, trigger, lateness), fn, weighted=True)
    wm = 0
    for kind, arg in steps:
        if kind == "bundle":
            sim.add_elements(arg)
        else:
            wm += arg
            sim.advance_watermark(wm)
    sim.advance_watermark(END_OF_TIME)
    elements = [e for kind, arg in steps if kind == "bundle" for e in arg]
    assert fold(sim.panes, RETRACTING, fn) == batch(elements, window_fn, fn, sim.dropped)


# -- a chain: sessions per device feed totals per country ---------------------------------------

SESSION_VALUE = combiners.aggregates(plays=combiners.count(), watched=combiners.sum("s"))
TOTALS = combiners.aggregates(sessions=combiners.count(), watched=combiners.sum("watched"))


def run_chain(upstream_mode, views):
    """Upstream: sessions per (device, country); downstream: per country, windows of 100, fed
    each upstream pane as an element at its output timestamp (a retraction weighs -1) and the
    upstream's watermark."""
    up = Simulator(
        windowing(
            Sessions(15),
            AfterWatermark(early=AfterCount(1), late=AfterCount(1)),
            1_000,
            upstream_mode,
        ),
        SESSION_VALUE,
    )
    down = Simulator(windowing(FixedWindows(100)), TOTALS, weighted=True)

    def feed(panes):
        down.add_elements(
            [
                (p.key[1], Retracted(p.value) if p.is_retraction else p.value, p.timestamp)
                for p in panes
            ]
        )
        down.advance_watermark(up.watermark)

    for bundle, watermark in views:
        feed(up.add_elements(bundle))
        feed(up.advance_watermark(watermark))
    feed(up.advance_watermark(END_OF_TIME))
    final_sessions = fold(up.panes, up.windowing.accumulation_mode, SESSION_VALUE)
    expected = batch(
        [(key[1], value, window.max_timestamp) for (key, window), value in final_sessions.items()],
        FixedWindows(100),
        TOTALS,
    )
    return fold(down.panes, RETRACTING, TOTALS), expected


# Two sessions of one device merge when a late view bridges them: the upstream withdraws both.
MERGING_VIEWS = [
    ([(("d1", "fr"), {"s": 3}, 5), (("d1", "fr"), {"s": 4}, 30), (("d2", "de"), {"s": 1}, 7)], 50),
    ([(("d1", "fr"), {"s": 2}, 18)], 60),  # late: bridges [5, 20) and [30, 45)
    ([(("d1", "fr"), {"s": 6}, 95)], 200),  # another session, moves the merged one's hour
]


def test_a_chain_over_retracting_panes_equals_the_batch_over_the_final_sessions():
    view, expected = run_chain(RETRACTING, MERGING_VIEWS)
    assert view == expected
    assert sorted((key, w.start, v["sessions"], v["watched"]) for (key, w), v in view.items()) == [
        ("de", 0, 1, 1),
        ("fr", 0, 1, 9),  # one session: three views, merged
        ("fr", 100, 1, 6),
    ]


def test_the_same_chain_over_accumulating_panes_double_counts():
    view, expected = run_chain(AccumulationMode.ACCUMULATING, MERGING_VIEWS)
    assert view != expected
    fr = next(v for (key, w), v in view.items() if key == "fr" and w.start == 0)
    assert fr["sessions"] > 1 and fr["watched"] > 9  # every refinement was added again
