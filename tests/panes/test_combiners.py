"""Combiners: what is computed for each window.

Pins the built-in aggregates (sum, count, min, max, mean, to_list) with and without ``field``,
their SQL-like ``None`` handling (skipped by all but ``count()`` and ``to_list``), that merging
partial accumulators equals adding everything, that ``retract`` undoes ``add`` where supported,
named ``aggregates(...)``, that accumulators and inputs are never mutated, and that a user
CombineFn works in the Simulator. (The textual form of aggregates: ``test_syntax``.)
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterProcessingTime,
    AfterWatermark,
    EngineKind,
    FixedWindows,
    GlobalWindows,
    Repeatedly,
    Sessions,
    Simulator,
    SlidingWindows,
    Window,
    Windowing,
    combiners,
)
from panes.combiners import CombineFn, inputs_of
from panes.fold import batch, fold
from panes.syntax import parse_aggregate
from tests.combiners_of_your_own import Spread

BUILTINS = ["sum", "count", "min", "max", "mean", "to_list"]


def run(fn, values):
    return fn.extract(fn.add_all(fn.create(), values))


def run_one_by_one(fn, values):
    acc = fn.create()
    for value in values:
        acc = fn.add(acc, value)
    return fn.extract(acc)


# -- the built-ins ---------------------------------------------------------------------------

# each built-in over the values 3, 8, -2, 4
BUILTIN_RESULTS = [
    ("sum", 13),
    ("count", 4),
    ("min", -2),
    ("max", 8),
    ("mean", 3.25),
    ("to_list", [3, 8, -2, 4]),
]


@pytest.mark.parametrize(("name", "expected"), BUILTIN_RESULTS)
def test_builtin_aggregates_of_plain_values(name, expected):
    fn = getattr(combiners, name)()
    assert run(fn, [3, 8, -2, 4]) == expected
    assert run_one_by_one(fn, [3, 8, -2, 4]) == expected


@pytest.mark.parametrize(("name", "expected"), BUILTIN_RESULTS)
def test_builtin_aggregates_read_the_field(name, expected):
    fn = getattr(combiners, name)("x")
    values = [{"x": 3, "y": 100}, {"x": 8}, {"x": -2, "y": -100}, {"x": 4}]
    assert run(fn, values) == expected
    assert run_one_by_one(fn, values) == expected


@pytest.mark.parametrize(
    ("name", "empty"),
    [
        ("sum", 0),
        ("count", 0),
        ("min", None),
        ("max", None),
        ("mean", None),
        ("to_list", []),
    ],
)
def test_builtin_aggregates_of_nothing(name, empty):
    assert run(getattr(combiners, name)(), []) == empty


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sum", 6),
        ("count", 5),
        ("min", 1),
        ("max", 5),
        ("mean", 3.0),
    ],
)
def test_none_is_skipped_by_every_aggregate_but_count(name, expected):
    inputs = [None, 1, 5, None, None]
    fn = getattr(combiners, name)()
    assert run(fn, inputs) == expected
    assert run_one_by_one(fn, inputs) == expected
    by_field = getattr(combiners, name)("x")
    # count(field) counts only the elements whose field is not None.
    assert run(by_field, [{"x": v} for v in inputs]) == (2 if name == "count" else expected)


@pytest.mark.parametrize("name", ["sum", "min", "max", "mean"])
def test_only_none_gives_the_empty_result(name):
    fn = getattr(combiners, name)()
    assert run(fn, [None, None]) == run(fn, [])


def test_to_list_keeps_none_values_like_array_agg():
    assert run(combiners.to_list(), [None, 1, None, 5]) == [None, 1, None, 5]
    assert run(combiners.to_list("x"), [{"x": None}, {"x": 1}]) == [None, 1]


def test_count_counts_none_elements_but_count_field_does_not():
    assert run(combiners.count(), [None, None]) == 2
    assert run(combiners.count("x"), [{"x": None}, {"x": 0}, {"x": False}]) == 2


def test_mean_of_a_window_is_the_mean_of_all_its_elements_not_of_partial_means():
    mean = combiners.mean()
    parts = [mean.add_all(mean.create(), [1, 2, 3]), mean.add_all(mean.create(), [10])]
    assert mean.extract(mean.merge(parts)) == 4.0


def test_combiners_compare_by_kind_and_field():
    assert combiners.sum("x") == combiners.sum("x")
    assert combiners.sum("x") != combiners.sum("y")
    assert combiners.sum() != combiners.count()
    assert len({combiners.min("a"), combiners.min("a"), combiners.max("a")}) == 2
    assert repr(combiners.sum("seconds")) == "sum(seconds)"
    assert repr(combiners.count()) == "count()"


# -- merge equals adding everything ----------------------------------------------------------

values = st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), max_size=20)


@given(st.sampled_from(BUILTINS), st.lists(values, min_size=1, max_size=5))
def test_merging_partial_accumulators_equals_adding_all_values(name, chunks):
    fn = getattr(combiners, name)()
    partial = [fn.add_all(fn.create(), chunk) for chunk in chunks]
    everything = [v for chunk in chunks for v in chunk]
    assert fn.extract(fn.merge(partial)) == run(fn, everything)
    assert fn.merge(partial) == fn.add_all(fn.create(), everything)


@given(st.sampled_from(BUILTINS), values, values)
def test_add_all_continues_from_an_existing_accumulator(name, first, second):
    fn = getattr(combiners, name)()
    assert fn.add_all(fn.add_all(fn.create(), first), second) == fn.add_all(
        fn.create(), first + second
    )


# -- retract ---------------------------------------------------------------------------------


def test_which_combiners_can_retract():
    assert combiners.sum().can_retract
    assert combiners.count().can_retract
    assert combiners.mean().can_retract
    assert combiners.to_list().can_retract
    assert not combiners.min().can_retract
    assert not combiners.max().can_retract
    with pytest.raises(NotImplementedError):
        combiners.min().retract(5, 5)


@given(
    st.sampled_from(["sum", "count", "mean", "to_list"]),
    st.booleans(),
    values,
    st.one_of(st.none(), st.integers(-1000, 1000)),
)
def test_retract_is_the_inverse_of_add(name, by_field, before, value):
    fn = getattr(combiners, name)("x" if by_field else None)

    def wrap(v):
        return {"x": v} if by_field else v

    acc = fn.add_all(fn.create(), [wrap(v) for v in before])
    restored = fn.retract(fn.add(acc, wrap(value)), wrap(value))
    if name == "to_list":  # an equal earlier value may be the one removed: same multiset
        assert Counter(restored) == Counter(acc)
    else:
        assert restored == acc


@given(values, st.randoms(use_true_random=False))
def test_retracting_every_added_value_in_any_order_gives_the_empty_accumulator(vals, rnd):
    for name in ["sum", "count", "mean", "to_list"]:
        fn = getattr(combiners, name)()
        acc = fn.add_all(fn.create(), vals)
        shuffled = list(vals)
        rnd.shuffle(shuffled)
        for value in shuffled:
            acc = fn.retract(acc, value)
        assert acc == fn.create(), name


# -- named aggregates ------------------------------------------------------------------------


def test_aggregates_output_a_dict_by_name():
    agg = combiners.aggregates(
        plays=combiners.count(),
        watched=combiners.sum("seconds"),
        longest=combiners.max("seconds"),
        avg=combiners.mean("seconds"),
        ids=combiners.to_list("id"),
    )
    rows = [{"id": 1, "seconds": 30}, {"id": 2, "seconds": None}, {"id": 3, "seconds": 12}]
    assert run(agg, rows) == {
        "plays": 3,
        "watched": 42,
        "longest": 30,
        "avg": 21.0,
        "ids": [1, 2, 3],
    }
    assert list(run(agg, rows)) == ["plays", "watched", "longest", "avg", "ids"]
    assert run(agg, []) == {"plays": 0, "watched": 0, "longest": None, "avg": None, "ids": []}


def test_aggregates_merge_and_retract_per_name():
    agg = combiners.aggregates(n=combiners.count(), total=combiners.sum("v"))
    a = agg.add_all(agg.create(), [{"v": 1}, {"v": 2}])
    b = agg.add_all(agg.create(), [{"v": 10}])
    merged = agg.merge([a, b])
    assert agg.extract(merged) == {"n": 3, "total": 13}
    assert agg.extract(agg.retract(merged, {"v": 10})) == {"n": 2, "total": 3}
    assert agg.can_retract
    assert not combiners.aggregates(n=combiners.count(), lo=combiners.min("v")).can_retract


def test_aggregates_need_named_combine_fns():
    with pytest.raises(ValueError, match="at least one"):
        combiners.aggregates()
    with pytest.raises(TypeError, match="'total'"):
        combiners.aggregates(total=sum)


# -- accumulators are values -----------------------------------------------------------------

ALL_FNS = (
    [getattr(combiners, name)() for name in BUILTINS]
    + [getattr(combiners, name)("x") for name in BUILTINS]
    + [
        combiners.aggregates(
            n=combiners.count(),
            s=combiners.sum("x"),
            m=combiners.mean("x"),
            lo=combiners.min("x"),
            xs=combiners.to_list("x"),
        )
    ]
)


@pytest.mark.parametrize("fn", ALL_FNS, ids=repr)
def test_accumulators_and_inputs_are_never_mutated(fn):
    def wrap(vs):
        return vs if getattr(fn, "field", "x") is None else [{"x": v} for v in vs]

    first, second = wrap([3, None, 1]), wrap([7, 2])
    a = fn.add_all(fn.create(), first)
    b = fn.add_all(fn.create(), second)
    snapshot = copy.deepcopy((first, second, a, b))
    accs = [a, b]
    fn.merge(accs)
    fn.add(a, second[0])
    fn.add_all(a, second)
    fn.extract(a)
    if fn.can_retract:
        fn.retract(fn.add(a, second[0]), second[0])
        fn.retract(a, first[0])
    assert (first, second, a, b) == snapshot
    assert accs == [a, b]


def test_extracted_list_is_not_the_accumulator():
    fn = combiners.to_list()
    acc = fn.add_all(fn.create(), [1, 2])
    fn.extract(acc).append(99)
    assert fn.extract(acc) == [1, 2]


# -- a user CombineFn ------------------------------------------------------------------------


class Range(Spread):
    """max - min of a window's whole values; the accumulator is ``None`` or ``(lo, hi)``."""

    fields = ()


def test_user_combine_fn_works_in_the_simulator():
    windowing = Windowing(
        FixedWindows(10),
        trigger=AfterWatermark(early=AfterCount(2)),
        accumulation_mode=AccumulationMode.DISCARDING,
    )
    fn = Range()
    assert not fn.can_retract
    sim = Simulator(windowing, fn)
    early = sim.add_elements([("k", 5, 1), ("k", 9, 2), ("k", 100, 15)])
    assert [(p.window, p.value, p.pane.timing.name) for p in early] == [(Window(0, 10), 4, "EARLY")]
    sim.add_elements([("k", 2, 3)])
    sim.advance_watermark(END_OF_TIME)
    assert [(p.window, p.value, p.pane.timing.name) for p in sim.panes[1:]] == [
        (Window(0, 10), 0, "ON_TIME"),
        (Window(10, 20), 0, "ON_TIME"),
    ]
    # Discarding panes fold back through the user's merge to the batch result.
    assert fold(sim.panes, windowing.accumulation_mode, fn) == {
        ("k", Window(0, 10)): 7,
        ("k", Window(10, 20)): 0,
    }


def test_value_is_accumulator_says_when_merging_values_is_exact():
    for text in ("sum(x)", "count()", "min(x)", "max(x)", "to_list(x)"):
        assert parse_aggregate(text).value_is_accumulator, text
    assert not parse_aggregate("mean(x)").value_is_accumulator
    assert not CombineFn().value_is_accumulator  # user combiners: unless they say so
    assert combiners.aggregates(n=combiners.count(), s=combiners.sum("x")).value_is_accumulator
    assert not combiners.aggregates(n=combiners.count(), m=combiners.mean("x")).value_is_accumulator


def test_the_sql_table_covers_the_builtins_and_values_fold_back_to_accumulators():
    from panes.combiners import AGGREGATES, sql_form
    from panes.sketches import SketchFn

    exact = [cls for cls in AGGREGATES.values() if not issubclass(cls, SketchFn)]
    assert len(exact) == 10
    assert all(sql_form(parse_aggregate(cls.examples[0])) is not None for cls in exact)
    merges = [sql_form(parse_aggregate(t)).merge for t in ("sum(x)", "count()", "min(x)", "max(x)")]
    assert merges == ["sum", "sum", "min", "max"]
    assert sql_form(parse_aggregate("mean(x)")).merge is None
    assert sql_form(combiners.aggregates(n=combiners.count())) is None
    assert not combiners.count().reads_value
    assert combiners.count("x").reads_value and combiners.sum("x").reads_value
    xs = combiners.to_list("x")
    assert xs.value_as_accumulator(xs.extract(("a", "b"))) == ("a", "b")
    assert xs.value_as_accumulator(None) == ()
    assert combiners.sum("x").value_as_accumulator(3) == 3


# -- picked values: max_by, min_by, first, last ----------------------------------------------

MAX_BY, MIN_BY = combiners.max_by("v", "by"), combiners.min_by("v", "by")
FIRST, LAST = combiners.first("v"), combiners.last("v")
PICKED = [MAX_BY, MIN_BY, FIRST, LAST]


def picked(fn, elements):
    """The specification of the picked aggregates, written out: over ``(value, by, event time)``
    triples, the elements with the best ranking (by, or event time; no by: skipped), and among
    them the largest (max_by, last) or smallest (min_by, first) value, None losing."""
    largest = fn in (MAX_BY, LAST)
    ranked = [(t if fn in (FIRST, LAST) else b, v) for v, b, t in elements]
    ranked = [(r, v) for r, v in ranked if r is not None]
    if not ranked:
        return None
    best = (max if largest else min)(r for r, _ in ranked)
    tied = [v for r, v in ranked if r == best and v is not None]
    return (max if largest else min)(tied) if tied else None


def engine_elements(elements):
    """``(value, by, event time)`` triples as the engine's ``(record, event time)`` elements."""
    return [({"v": v, "by": b}, t) for v, b, t in elements]


def run_picked(fn, elements):
    return run(fn, inputs_of(fn, engine_elements(elements)))


def test_max_by_and_min_by_pick_the_value_of_the_element_with_the_largest_or_smallest_by():
    elements = [("a", 3, 0), ("b", 9, 0), ("c", None, 0), (None, 1, 0)]
    assert run_picked(MAX_BY, elements) == "b"
    # Spark's semantics: the picked element's value, even when it is None
    assert run_picked(MIN_BY, elements) is None
    assert run_picked(MAX_BY, [("a", None, 0)]) is None  # no element has a by
    assert run_picked(MAX_BY, []) is None


def test_first_and_last_pick_the_value_of_the_earliest_and_latest_element():
    elements = [("up", 0, 20), ("down", 0, 10), (None, 0, 30), ("late", 0, 25)]
    assert run_picked(FIRST, elements) == "down"
    assert run_picked(LAST, elements) is None  # the latest element's value, None included
    assert run_picked(LAST, elements[:2]) == "up"


@pytest.mark.parametrize(
    ("fn", "expected"), [(MAX_BY, "c"), (LAST, "c"), (MIN_BY, "a"), (FIRST, "a")]
)
def test_a_tie_is_broken_by_the_value_whatever_the_arrival_order(fn, expected):
    tied = [("b", 5, 7), (None, 5, 7), ("a", 5, 7), ("c", 5, 7), ("z", 1, 1)]
    if fn in (MIN_BY, FIRST):
        tied[-1] = ("z", 9, 9)  # the other end: ranks last for the smallest
    for order in itertools.permutations(tied):
        assert run_picked(fn, order) == expected
        acc = fn.create()
        for element in engine_elements(order):
            acc = fn.add(acc, inputs_of(fn, [element])[0])
        assert fn.extract(acc) == expected


def test_none_loses_a_tie_and_nan_ranks_above_every_number():
    assert run_picked(MAX_BY, [(None, 5, 0), ("x", 5, 0)]) == "x"
    assert run_picked(MIN_BY, [(None, 5, 0), ("x", 5, 0)]) == "x"
    assert run_picked(MAX_BY, [(None, 5, 0)]) is None
    nan = float("nan")
    assert run_picked(MAX_BY, [("n", nan, 0), ("i", float("inf"), 0)]) == "n"
    assert run_picked(MIN_BY, [("n", nan, 0), ("i", float("inf"), 0)]) == "i"
    assert run_picked(MAX_BY, [(nan, 1, 0), (3.0, 1, 0)]) != 3.0  # NaN, the largest value


def test_a_combiner_that_reads_event_times_is_refused_plain_values():
    with pytest.raises(TypeError, match="inputs_of"):
        run(LAST, [{"v": 1}])


def test_aggregates_hand_event_times_only_to_the_parts_that_read_them():
    fn = combiners.aggregates(
        n=combiners.count(), total=combiners.sum("v"), latest=LAST, top=MAX_BY
    )
    assert fn.reads_event_time and not combiners.aggregates(top=MAX_BY).reads_event_time
    elements = engine_elements([(1, 2, 50), (7, 1, 30), (4, None, 40)])
    assert run(fn, inputs_of(fn, elements)) == {"n": 3, "total": 12, "latest": 1, "top": 1}


def test_picked_aggregates_are_values_that_merge_but_cannot_retract():
    for fn in PICKED:
        assert not fn.can_retract and not fn.value_is_accumulator
        elements = engine_elements([("a", 1, 1), ("b", 2, 2)])
        first, second = inputs_of(fn, elements[:1]), inputs_of(fn, elements[1:])
        a = fn.add_all(fn.create(), first)
        snapshot = copy.deepcopy((first, second, a))
        fn.merge([a, fn.add_all(fn.create(), second)])
        fn.add_all(a, second)
        assert (first, second, a) == snapshot
    assert combiners.fields_of(MAX_BY) == ("v", "by") and combiners.fields_of(LAST) == ("v",)
    assert repr(MAX_BY) == "max_by(v, by)" and repr(LAST) == "last(v)"
    assert MAX_BY == combiners.max_by("v", "by") != combiners.max_by("by", "v")
    assert len({MAX_BY, MIN_BY, combiners.max_by("v", "by")}) == 2
    with pytest.raises(ValueError, match="max_by"):
        combiners.max_by("v", None)  # type: ignore[arg-type]


ELEMENTS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from("abc")),
        st.one_of(st.none(), st.integers(-2, 2)),
        st.integers(0, 5),
    ),
    max_size=12,
)


@pytest.mark.parametrize("fn", PICKED, ids=repr)
@settings(max_examples=60)
@given(elements=ELEMENTS, rnd=st.randoms(use_true_random=False), parts=st.integers(1, 4))
def test_any_split_merged_in_any_order_is_the_answer_over_all_elements(fn, elements, rnd, parts):
    shuffled = elements[:]
    rnd.shuffle(shuffled)
    cuts = sorted(rnd.randint(0, len(shuffled)) for _ in range(parts - 1))
    chunks = [shuffled[i:j] for i, j in zip([0, *cuts], [*cuts, len(shuffled)], strict=True)]
    accs = [fn.add_all(fn.create(), inputs_of(fn, engine_elements(c))) for c in chunks]
    rnd.shuffle(accs)
    assert fn.extract(fn.merge(accs)) == picked(fn, elements) == run_picked(fn, shuffled)


def _json_round_trip(acc):
    """An accumulator through JSON as the pane log keeps it (lists back to tuples)."""
    return tuple(tuple(a) if isinstance(a, list) else a for a in json.loads(json.dumps(acc)))


@pytest.mark.parametrize("mode", list(AccumulationMode), ids=lambda m: m.name)
@pytest.mark.parametrize(
    "window_fn",
    [FixedWindows(10), SlidingWindows(20, 10), Sessions(5), GlobalWindows()],
    ids=repr,
)
@settings(max_examples=20)  # x 12 configurations
@given(elements=ELEMENTS, seed=st.integers(0, 2**16))
def test_the_simulators_panes_fold_to_the_batch_answer_in_every_mode(
    mode, window_fn, elements, seed
):
    """Random bundles, watermarks and processing times; every pane's accumulator survives JSON;
    the view folded from the panes (the mode's rule) is the batch over the accepted elements."""
    rng = random.Random(seed)
    fn = combiners.aggregates(hi=MAX_BY, lo=MIN_BY, first=FIRST, last=LAST, n=combiners.count())
    if isinstance(window_fn, GlobalWindows):
        trigger = Repeatedly(AfterCount(rng.randint(1, 3)))
    else:
        trigger = rng.choice(
            [
                AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
                AfterWatermark(early=AfterProcessingTime(3)),
                Repeatedly(AfterCount(rng.randint(1, 3))),
            ]
        )
    windowing = Windowing(window_fn, trigger=trigger, accumulation_mode=mode, allowed_lateness=5)
    sim = Simulator(windowing, fn)
    rows = [(rng.choice("kj"), {"v": v, "by": b}, t * 7) for v, b, t in elements]
    wm = pt = 0
    for start in range(0, len(rows), 3):
        sim.add_elements(rows[start : start + 3])
        wm, pt = wm + rng.randint(0, 15), pt + rng.randint(0, 4)
        sim.advance(watermark=wm, processing_time=pt)
    sim.advance_watermark(END_OF_TIME)
    panes = [p._replace(accumulator=_json_round_trip(p.accumulator)) for p in sim.panes]
    assert fold(panes, mode, fn) == batch(rows, window_fn, fn, sim.dropped)


@pytest.mark.parametrize(
    ("fn", "reason"),
    [(LAST, "last(v) reads event times"), (MAX_BY, "max_by(v, by) has no columnar form")],
)
def test_the_columnar_engine_refuses_picked_aggregates_naming_them(fn, reason):
    from panes.columnar import NotColumnar

    combined = combiners.aggregates(n=combiners.count(), x=fn)
    with pytest.raises(NotColumnar, match=re.escape(reason)):
        Simulator(Windowing(FixedWindows(10)), combined, engine=EngineKind.COLUMNAR)
