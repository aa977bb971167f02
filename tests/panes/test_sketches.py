"""Sketch aggregates (:mod:`panes.sketches`): approx_count_distinct, approx_quantiles,
approx_percentile and top_k.

Pins that folding random panes (merging their sketches, discarding mode) gives the batch sketch's
answer of all the values (exact where the sketch is exact: HLL in its list/set mode, frequent
items that never purged, KLL holding every value; within the stated bound where it estimates),
that they run in the Simulator in every accumulation mode, that ``None`` is skipped and an empty
window's answer is defined, that accumulators are immutable bytes, and their text round trip.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("datasketches")

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    FixedWindows,
    Repeatedly,
    Simulator,
    Windowing,
    combiners,
)
from panes.fold import batch, fold
from panes.syntax import parse_aggregate

FNS = [
    combiners.approx_count_distinct("v"),
    combiners.approx_quantiles("v", [0.0, 0.5, 0.95, 1.0]),
    combiners.approx_percentile("v", 0.5),
    combiners.top_k("v", 3),
]


def answer(fn, value):
    """The answer of an output value, without the sketch bytes."""
    return {k: v for k, v in value.items() if k != "sketch"}


def of(fn, values):
    return fn.extract(fn.add_all(fn.create(), [{"v": v} for v in values]))


def folded(fn, parts):
    """The answer of merging the accumulators of ``parts`` (each a list of values) as the
    materializer does: each pane's value back to its accumulator, merged."""
    accs = [fn.value_as_accumulator(of(fn, p)) for p in parts]
    return fn.extract(fn.merge(accs))


parts_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=30), min_size=1, max_size=6)


@pytest.mark.parametrize("fn", FNS, ids=str)
@settings(max_examples=25, deadline=None)
@given(parts=parts_of_ints)
def test_merging_pane_sketches_gives_the_batch_answer_exactly_while_the_sketch_is_exact(fn, parts):
    """Few values: every sketch is exact, and the fold of the panes' sketches answers as the
    sketch of all the values, which is the exact answer."""
    values = [v for p in parts for v in p]
    merged, whole = folded(fn, parts), of(fn, values)
    assert answer(fn, merged) == answer(fn, whole)
    assert fn.agrees(whole, merged)
    if fn.name == "approx_count_distinct":
        assert merged["estimate"] == len(set(values))
    elif fn.name == "top_k":
        counts = sorted((-values.count(v), v) for v in set(values))[:3]
        assert merged["items"] == [{"item": v, "count": -c} for c, v in counts]
    elif fn.name == "approx_quantiles" and values:  # ranks 0 and 1: the least and the greatest
        assert merged["quantiles"][0] == min(values) and merged["quantiles"][-1] == max(values)


@settings(max_examples=4, deadline=None)
@given(n=st.integers(2_000, 6_000), cuts=st.lists(st.integers(1, 5_999), max_size=5))
def test_estimating_sketches_merge_within_their_stated_bounds(n, cuts):
    """Many values: HLL and KLL estimate; the fold of pane sketches agrees with the batch
    sketch by ``agrees`` (the verifier's rule), and each is near the truth."""
    values = list(range(n))
    bounds = sorted({0, *(c for c in cuts if c < n), n})
    parts = [values[a:b] for a, b in itertools.pairwise(bounds)]
    hll = combiners.approx_count_distinct("v")
    distinct, whole = folded(hll, parts), of(hll, values)
    assert hll.agrees(whole, distinct) and hll.agrees(distinct, whole)
    assert abs(distinct["estimate"] - n) <= 0.05 * n
    off = {**distinct, "estimate": int(distinct["estimate"] * 1.2)}
    assert not hll.agrees(whole, off)
    kll = combiners.approx_quantiles("v", [0.5, 0.99])
    merged, whole = folded(kll, parts), of(kll, values)
    assert kll.agrees(whole, merged)
    for rank, q in zip(kll.ranks, merged["quantiles"], strict=True):
        assert abs(q / n - rank) <= 0.03
    wrong = {**merged, "quantiles": [merged["quantiles"][0] * 0.8, merged["quantiles"][1]]}
    assert not kll.agrees(whole, wrong)


def test_nulls_are_skipped_and_an_empty_window_has_a_defined_answer():
    hll, q, p, top = FNS
    assert of(hll, [None, "a", None, "a"])["estimate"] == 1
    assert answer(q, of(q, [None, None])) == {"quantiles": None}
    assert answer(p, of(p, [None])) == {"quantile": None}
    assert answer(top, of(top, [None])) == {"items": []}
    assert answer(hll, of(hll, [])) == {"estimate": 0}
    assert of(hll, [None])["sketch"] == hll.create()


def test_top_k_orders_by_count_then_item_and_refuses_other_types():
    top = combiners.top_k("v", 2)
    assert answer(top, of(top, ["b", "a", "c", "c", "b", "a"]))["items"] == [
        {"item": "a", "count": 2},
        {"item": "b", "count": 2},
    ]
    with pytest.raises(TypeError, match="strings or integers"):
        of(top, [1.5])


def test_accumulators_are_bytes_and_merge_does_not_change_its_inputs():
    for fn in FNS:
        a, b = fn.add_all(fn.create(), [{"v": 1}]), fn.add_all(fn.create(), [{"v": 2}])
        before = (a, b)
        fn.merge([a, b])
        assert (a, b) == before
        assert isinstance(a if not isinstance(a, tuple) else a[1], bytes)
        assert not fn.can_retract


@pytest.mark.parametrize(
    "text",
    [
        "approx_count_distinct(user_id)",
        "approx_count_distinct(user_id, lg_k=14)",
        "approx_quantiles(latency, [0.5, 0.95, 0.99])",
        "approx_percentile(latency, 0.95)",
        "top_k(page, 10)",
    ],
)
def test_text_round_trips(text):
    fn = parse_aggregate(text)
    assert (
        str(fn) == text
        and parse_aggregate(str(fn)) == fn
        and hash(fn) == hash(parse_aggregate(text))
    )


@pytest.mark.parametrize(
    "text", ["top_k(page)", "approx_percentile(x, 2)", "approx_quantiles(x, [])", "top_k(p, 0)"]
)
def test_malformed_sketch_text_is_refused(text):
    with pytest.raises(ValueError, match=r"approx_|top_k"):
        parse_aggregate(text)


@pytest.mark.parametrize("mode", list(AccumulationMode), ids=lambda m: m.name)
@settings(max_examples=10, deadline=None)
@given(
    elements=st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(0, 9), st.integers(0, 50)), max_size=40
    ),
    every=st.integers(1, 4),
)
def test_the_simulator_runs_sketches_in_every_mode(mode, elements, every):
    """Early panes every few elements: folding the panes in the mode gives each window the
    batch answer of its elements (exact: few values)."""
    fn = combiners.aggregates(
        users=combiners.approx_count_distinct("v"),
        p=combiners.approx_percentile("v", 0.5),
        top=combiners.top_k("v", 2),
    )
    windowing = Windowing(
        FixedWindows(10),
        trigger=AfterWatermark(early=Repeatedly(AfterCount(every))),
        accumulation_mode=mode,
    )
    sim = Simulator(windowing, fn)
    values = [(k, {"v": v}, ts) for k, v, ts in elements]
    for el in values:
        sim.add_elements([el])
    sim.advance_watermark(END_OF_TIME)
    got = fold(sim.panes, mode, fn)
    want = batch(values, FixedWindows(10), fn)
    assert set(got) == set(want)
    for at in want:
        for name, sub in fn.fns.items():
            assert answer(sub, got[at][name]) == answer(sub, want[at][name])


# -- merging an upstream's sketches (a pane-log downstream) -----------------------------------


@settings(max_examples=15, deadline=None)
@given(
    elements=st.lists(
        st.tuples(st.sampled_from("uvwxyz"), st.integers(0, 239)), min_size=1, max_size=40
    ),
    watermarks=st.lists(st.integers(0, 300), max_size=6),
)
def test_daily_distinct_users_from_hourly_sketches_withdraw_retracted_hours_exactly(
    elements, watermarks
):
    """Hourly distinct users (accumulating & retracting, a pane per element, late data refining
    closed hours) rolled up by ``approx_count_distinct(merge(users))`` over weighted elements
    (a retraction row is a ``Retracted`` value): each day holds the union of its hours' final
    sketches, which is exact here (few users): the day's distinct users; and its quantiles
    count each value once (a KLL merge counts a sketch's values as often as it is held, so a
    withdrawn refinement left in would count them twice)."""
    from panes import Retracted
    from panes.sketches import MergeSketches

    hour, day = 60, 240
    hourly = combiners.aggregates(
        users=combiners.approx_count_distinct("user"), lat=combiners.approx_quantiles("ts", [1.0])
    )
    up = Simulator(
        Windowing(
            FixedWindows(hour),
            trigger=AfterWatermark(early=AfterCount(1), late=AfterCount(1)),
            accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
            allowed_lateness=10 * day,
        ),
        hourly,
    )
    events = [("page", {"user": u, "ts": ts}, ts) for u, ts in elements]
    for i, el in enumerate(events):
        up.add_elements([el])
        if i < len(watermarks):
            up.advance_watermark(max(watermarks[: i + 1]))
    up.advance_watermark(END_OF_TIME)
    assert any(p.is_retraction for p in up.panes) or len(events) == 1
    daily = MergeSketches(combiners.approx_count_distinct("users"))
    latency = MergeSketches(combiners.approx_quantiles("lat", [0.5, 1.0]))
    down = Simulator(
        Windowing(
            FixedWindows(day), accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING
        ),
        combiners.aggregates(users=daily, lat=latency),
        weighted=True,
    )
    rows = [(p.key, p.value, min(p.timestamp, p.window.end - 1), p.is_retraction) for p in up.panes]
    down.add_elements([(k, Retracted(v) if r else v, ts) for k, v, ts, r in rows])
    down.advance_watermark(END_OF_TIME)
    got = fold(down.panes, AccumulationMode.ACCUMULATING_AND_RETRACTING, down.combine_fn)
    final_hours = fold(up.panes, AccumulationMode.ACCUMULATING_AND_RETRACTING, hourly)
    for (_, window), value in got.items():
        users = {u for u, ts in elements if window.start <= ts < window.end}
        assert value["users"]["estimate"] == len(users)
        times = sorted(ts for _, ts in elements if window.start <= ts < window.end)
        median = times[-(-len(times) // 2) - 1]  # inclusive rank 0.5: withdrawn panes gone
        assert value["lat"]["quantiles"] == [median, times[-1]]
        hours = [
            v["users"] for (_, w), v in final_hours.items() if window.start <= w.start < window.end
        ]
        union = daily.inner.merge([h["sketch"] for h in hours])
        assert value["users"]["estimate"] == daily.inner.extract(union)["estimate"]
    assert {w.start // day for _, w in got} == {ts // day for _, ts in elements}


def test_a_merge_aggregate_withdraws_one_equal_sketch_and_refuses_one_it_does_not_hold():
    from panes.sketches import MergeSketches

    hourly = combiners.approx_quantiles("ms", [0.5])
    h1, h2 = of_field(hourly, "ms", [1, 2, 3]), of_field(hourly, "ms", [10, 20])
    daily = MergeSketches(combiners.approx_quantiles("lat", [0.5]))
    acc = daily.add_all(daily.create(), [{"lat": h1}, {"lat": h2}, {"lat": h1}])
    assert daily.extract(acc)["quantiles"] == [2.0]  # 1,1,2,2,3,3,10,20: KLL counts h1 twice
    acc = daily.retract(acc, {"lat": h1})
    assert daily.extract(acc)["quantiles"] == [3.0]  # 1,2,3,10,20
    assert daily.retract(daily.add(daily.create(), {"lat": h2}), {"lat": h2}) == daily.create()
    with pytest.raises(ValueError, match="does not hold"):
        daily.retract(daily.create(), {"lat": h2})


def of_field(fn, field, values):
    return fn.extract(fn.add_all(fn.create(), [{field: v} for v in values]))
