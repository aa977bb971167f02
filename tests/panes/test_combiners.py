"""Combiners: what is computed for each window.

Pins the built-in aggregates (sum, count, min, max, mean, to_list) with and without ``field``,
their SQL-like ``None`` handling (skipped by all but ``count()`` and ``to_list``), that merging
partial accumulators equals adding everything, that ``retract`` undoes ``add`` where supported,
named ``aggregates(...)``, that accumulators and inputs are never mutated, and that a user
CombineFn works in the Simulator. (The textual form of aggregates: ``test_syntax``.)
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    FixedWindows,
    Simulator,
    Window,
    Windowing,
    combiners,
)
from panes.combiners import CombineFn
from panes.fold import fold
from panes.syntax import parse_aggregate

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


class Range(CombineFn):
    """max - min of a window; the accumulator is ``None`` or ``(lo, hi)``."""

    def create(self):
        return None

    def add(self, acc, value):
        return (value, value) if acc is None else (min(acc[0], value), max(acc[1], value))

    def merge(self, accs):
        present = [a for a in accs if a is not None]
        if not present:
            return None
        return (min(a[0] for a in present), max(a[1] for a in present))

    def extract(self, acc):
        return None if acc is None else acc[1] - acc[0]


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
    from panes.combiners import BUILTINS as BUILTIN_CLASSES
    from panes.combiners import sql_form

    assert all(sql_form(cls("x")) is not None for cls in BUILTIN_CLASSES.values())
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
