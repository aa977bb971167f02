"""Property tests: for random streams, bundlings and clock schedules, in every mode and for every
window function, the panes fold back to the batch result."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    Always,
    ClosingBehavior,
    DefaultTrigger,
    FixedWindows,
    GlobalWindows,
    Never,
    OnTimeBehavior,
    OrFinally,
    Repeatedly,
    Sessions,
    Simulator,
    SlidingWindows,
    TimestampCombiner,
    Windowing,
    combiners,
)
from panes.fold import batch, fold
from tests.panes.support import DailyBuckets, EvenOnly

WINDOW_FNS = [
    FixedWindows(10),
    FixedWindows(7, offset=3),
    SlidingWindows(10, 5),
    SlidingWindows(6, 4),
    Sessions(5),
    GlobalWindows(),
    DailyBuckets(25),
    EvenOnly(),
]

REPEATING_TRIGGERS = [
    DefaultTrigger(),
    AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
    AfterWatermark(early=AfterProcessingTime(3), late=AfterProcessingTime(2)),
    Repeatedly(AfterCount(3)),
    Repeatedly(AfterProcessingTime(4)),
    Repeatedly(AfterAny(AfterCount(2), AfterWatermark())),
    Repeatedly(AfterAll(AfterCount(2), AfterProcessingTime(2))),
    Repeatedly(AfterEach(AfterCount(2), AfterProcessingTime(3))),
    AfterEach(AfterCount(2), Repeatedly(AfterWatermark())),
    Repeatedly(OrFinally(Repeatedly(AfterCount(2)), AfterWatermark())),
    Always(),
    Never(),
]

FINISHING_TRIGGERS = [
    AfterWatermark(),
    AfterWatermark(early=AfterCount(2)),
    AfterCount(3),
    OrFinally(Repeatedly(AfterCount(2)), AfterProcessingTime(5)),
    AfterAny(AfterCount(4), AfterWatermark()),
    AfterEach(AfterCount(1), AfterCount(2)),
]

COMBINERS = [combiners.sum(), combiners.count(), combiners.mean(), combiners.to_list()]
KEYS = ["a", "b", "c"]

element = st.tuples(st.sampled_from(KEYS), st.integers(0, 9), st.integers(0, 120))
step = st.one_of(
    st.tuples(st.just("bundle"), st.lists(element, min_size=1, max_size=6)),
    st.tuples(st.just("watermark"), st.integers(0, 25)),
    st.tuples(st.just("processing"), st.integers(0, 6)),
)


@st.composite
def windowings(draw, triggers=REPEATING_TRIGGERS + FINISHING_TRIGGERS):
    return Windowing(
        draw(st.sampled_from(WINDOW_FNS)),
        trigger=draw(st.sampled_from(triggers)),
        accumulation_mode=draw(st.sampled_from(list(AccumulationMode))),
        allowed_lateness=draw(st.sampled_from([0, 5, 30, 10_000])),
        timestamp_combiner=draw(st.sampled_from(list(TimestampCombiner))),
        on_time_behavior=draw(st.sampled_from(list(OnTimeBehavior))),
        closing_behavior=draw(st.sampled_from(list(ClosingBehavior))),
    )


def run(windowing, combine_fn, steps, after_step=None):
    """Drive a simulator through ``steps`` (relative clock moves), then close every window.
    ``after_step(sim)`` runs before the first step and after each one."""
    sim = Simulator(windowing, combine_fn)
    wm, pt = -5, 0
    if after_step:
        after_step(sim)
    for kind, arg in steps:
        if kind == "bundle":
            sim.add_elements(arg)
        elif kind == "watermark":
            wm += arg
            sim.advance_watermark(wm)
        else:
            pt += arg
            sim.advance_processing_time(pt)
        if after_step:
            after_step(sim)
    sim.advance_watermark(END_OF_TIME)
    assert not sim.states, "every window is gone at the end of time"
    return sim


def elements_of(steps):
    return [e for kind, arg in steps if kind == "bundle" for e in arg]


def comparable(view, combine_fn):
    if isinstance(combine_fn, combiners.ToList):
        return {k: sorted(v) for k, v in view.items()}
    return view


@given(windowings(), st.sampled_from(COMBINERS), st.lists(step, max_size=25))
def test_fold_of_panes_equals_batch_of_accepted_elements(windowing, combine_fn, steps):
    sim = run(windowing, combine_fn, steps)
    folded = fold(sim.panes, windowing.accumulation_mode, combine_fn)
    expected = batch(elements_of(steps), windowing.window_fn, combine_fn, sim.dropped)
    assert comparable(folded, combine_fn) == comparable(expected, combine_fn)


@pytest.mark.heavy
@given(windowings(), st.lists(step, max_size=25))
def test_nothing_is_lost_every_element_is_accepted_or_dropped(windowing, steps):
    """Per (element, window): the counts of the batch over accepted elements plus the dropped
    ones equal the count of all assignments."""
    sim = run(windowing, combiners.count(), steps)
    elements = elements_of(steps)
    assigned = sum(len(windowing.window_fn.assign(ts, v)) or 1 for _, v, ts in elements)
    accepted = sum(batch(elements, windowing.window_fn, combiners.count(), sim.dropped).values())
    assert accepted + len(sim.dropped) == assigned
    for dropped in sim.dropped:
        assert dropped.reason.split(":")[0] in {"expired", "closed", "no window"}


@pytest.mark.heavy
@given(windowings(), st.lists(step, max_size=25))
def test_retractions_net_out_to_exactly_the_live_windows(windowing, steps):
    windowing = Windowing(
        windowing.window_fn,
        trigger=windowing.trigger,
        accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
        allowed_lateness=windowing.rules.lateness,
        on_time_behavior=windowing.on_time_behavior,
    )
    sim = run(windowing, combiners.sum(), steps)
    net = Counter()
    for pane in sim.panes:
        net[(pane.key, pane.window, pane.value)] += -1 if pane.is_retraction else 1
    live = fold(sim.panes, windowing.accumulation_mode, combiners.sum())
    assert +net == Counter({(k, w, v): 1 for (k, w), v in live.items()})
    assert all(count >= 0 for count in net.values())


@st.composite
def rebundled(draw):
    """The same arrivals and clock moves, with bundles cut differently."""
    steps = draw(st.lists(step, max_size=20))
    out = []
    for kind, arg in steps:
        if kind != "bundle":
            out.append((kind, arg))
            continue
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(arg) - 1)), max_size=3)))
        parts = [arg[i:j] for i, j in zip([0, *cuts], [*cuts, len(arg)], strict=True) if arg[i:j]]
        out.extend(("bundle", part) for part in parts)
    return steps, out


@pytest.mark.heavy
@given(windowings(triggers=REPEATING_TRIGGERS), st.sampled_from(COMBINERS), rebundled())
def test_results_do_not_depend_on_bundle_boundaries(windowing, combine_fn, pair):
    """With triggers that never finish, the folded result is the same however arrivals are
    cut into bundles (a finishing trigger closes its window at a bundle boundary)."""
    original, split = pair
    a = run(windowing, combine_fn, original)
    b = run(windowing, combine_fn, split)
    mode = windowing.accumulation_mode
    assert comparable(fold(a.panes, mode, combine_fn), combine_fn) == comparable(
        fold(b.panes, mode, combine_fn), combine_fn
    )
    assert Counter(a.dropped) == Counter(b.dropped)


@pytest.mark.heavy
@given(windowings(), st.lists(step, max_size=20), st.randoms(use_true_random=False))
def test_order_within_a_bundle_does_not_change_results(windowing, steps, rnd):
    shuffled = []
    for kind, arg in steps:
        if kind == "bundle":
            arg = list(arg)
            rnd.shuffle(arg)
        shuffled.append((kind, arg))
    combine_fn = combiners.sum()
    a, b = run(windowing, combine_fn, steps), run(windowing, combine_fn, shuffled)
    mode = windowing.accumulation_mode
    assert fold(a.panes, mode, combine_fn) == fold(b.panes, mode, combine_fn)
    assert sorted(map(describe_key, a.panes)) == sorted(map(describe_key, b.panes))


def describe_key(pane):
    return (
        pane.key,
        pane.window,
        pane.value,
        pane.pane,
        pane.is_retraction,
        tuple(sorted(pane.supersedes)),
    )


def test_a_dropped_elements_reason_gives_the_lateness_as_the_configuration_writes_it():
    from panes import FixedWindows, Simulator, Windowing, combiners

    sim = Simulator(
        Windowing(FixedWindows(60_000_000), allowed_lateness=7_200_000_000), combiners.count()
    )
    sim.advance_watermark(10_000_000_000)
    sim.add_elements([("k", 1, 0)])
    assert [d.reason for d in sim.dropped] == [
        "expired: the watermark passed the window's end plus the allowed lateness (2h)"
    ]
