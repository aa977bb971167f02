"""Combiners that are not built in, lifted (a ``combine`` part: ``panes.columnar.accumulators``):
each key's and window's values of a bundle grouped in Arrow and added with one ``add_all`` per
group, then merged by ``Engine.add_combined``, give exactly the panes, drops and window states
that adding the same elements one bundle at a time with ``Engine.add_elements`` gives, step by
step and in order: every accumulation mode, element-counting and processing-time triggers,
lateness, timestamp combiners, values as mappings (declared fields, or every value column) or
whole, nulls, and built-ins beside them in one ``aggregates``. The columnar engine still refuses
them.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    ClosingBehavior,
    DefaultTrigger,
    EngineKind,
    FixedWindows,
    OnTimeBehavior,
    Repeatedly,
    Simulator,
    TimestampCombiner,
    Windowing,
    combiners,
)
from panes.columnar import TIMESTAMP, ElementColumns, Lifting, NotColumnar, add_bundle
from panes.columnar.accumulators import VALUE
from panes.combiners import CombineFn
from panes.engine import Engine
from panes.state import KeyState
from tests.combiners_of_your_own import Distinct, Spread


class Pairs(CombineFn):
    """Elements with both columns present; it names no fields, so its values are mappings of
    every value column (as the per-element path gives them)."""

    def create(self):
        return 0

    def add(self, acc, value):
        return acc + (value["v"] is not None and value["s"] is not None)

    def merge(self, accs):
        return sum(accs)

    def extract(self, acc):
        return acc


class WholeDistinct(CombineFn):
    """Distinct whole values (the simulator's elements: values, not mappings)."""

    def create(self):
        return frozenset()

    def add(self, acc, value):
        return acc if value is None else acc | {value}

    def merge(self, accs):
        return frozenset().union(*accs)

    def extract(self, acc):
        return sorted(acc)


MAPPED = [
    Spread(),
    Distinct(),
    Pairs(),
    combiners.aggregates(
        n=combiners.count(),
        spread=Spread(),
        total=combiners.sum("v"),
        distinct=Distinct(),
        top=combiners.max("s"),
        pairs=Pairs(),
    ),
    # the deterministic sketches (a KLL sketch's compaction is random: tests/panes/test_sketches.py)
    combiners.aggregates(users=combiners.approx_count_distinct("v"), top=combiners.top_k("s", 2)),
]
WHOLE = [
    WholeDistinct(),
    combiners.aggregates(total=combiners.sum(), distinct=WholeDistinct(), n=combiners.count()),
]
TRIGGERS = [
    DefaultTrigger(),
    AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
    AfterWatermark(early=AfterProcessingTime(3), late=AfterCount(2)),
    Repeatedly(AfterCount(2)),
    Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(4))),
    AfterCount(3),
    AfterEach(AfterCount(1), AfterCount(2)),
]
KEYS = ["a", "b", "c"]


@st.composite
def pipelines(draw):
    windowing = Windowing(
        draw(st.sampled_from([FixedWindows(10), FixedWindows(7, offset=3)])),
        trigger=draw(st.sampled_from(TRIGGERS)),
        accumulation_mode=draw(st.sampled_from(list(AccumulationMode))),
        allowed_lateness=draw(st.sampled_from([0, 5, 30])),
        timestamp_combiner=draw(st.sampled_from(list(TimestampCombiner))),
        on_time_behavior=draw(st.sampled_from(list(OnTimeBehavior))),
        closing_behavior=draw(st.sampled_from(list(ClosingBehavior))),
    )
    whole = draw(st.booleans())
    return windowing, draw(st.sampled_from(WHOLE if whole else MAPPED)), whole


value = st.one_of(st.integers(-3, 9), st.none())  # None: a missing value
element = st.tuples(st.sampled_from(KEYS), value, st.integers(0, 120))
step = st.one_of(
    st.tuples(st.just("bundle"), st.lists(element, min_size=1, max_size=8)),
    st.tuples(st.just("watermark"), st.integers(0, 25)),
    st.tuples(st.just("processing"), st.integers(0, 6)),
)


def columns_of(whole: bool) -> ElementColumns:
    if whole:
        return ElementColumns(("k",), (VALUE,), (("k", pa.string()), (VALUE, pa.int64())), True)
    types = (("k", pa.string()), ("v", pa.int64()), ("s", pa.string()))
    return ElementColumns(("k",), ("v", "s"), types)


def value_of(v: int | None, whole: bool) -> Any:
    if whole:
        return v
    return {"v": v, "s": None if v is None else f"s{v % 4}"}


def table_of(elements: list[tuple[str, Any, int]], whole: bool) -> pa.Table:
    columns = columns_of(whole)
    rows = [{"k": k, TIMESTAMP: ts, **({VALUE: v} if whole else v)} for k, v, ts in elements]
    schema = pa.schema([("k", pa.string()), (TIMESTAMP, pa.int64()), *columns.types[1:]])
    return pa.Table.from_pylist(rows, schema)


def window_states(state: KeyState) -> dict:
    """What a key's state holds of each window (accumulators compared as values: a frozenset's
    bytes depend on the order it was built in)."""
    return {
        w: (
            ws.acc,
            ws.fresh,
            ws.hold,
            ws.index,
            ws.nonspeculative,
            ws.emitted,
            ws.closed,
            ws.trigger,
            ws.last,
        )
        for w, ws in state.windows.items()
    }


class Both:
    """The same engine fed two ways: lifted bundles (``add_bundle``) and elements."""

    def __init__(self, windowing: Windowing, fn: CombineFn, whole: bool) -> None:
        self.engine = Engine(windowing, fn)
        self.lifting = Lifting.of(windowing, fn, columns_of(whole))
        self.whole = whole
        self.states: list[dict[str, KeyState]] = [{}, {}]
        self.wm, self.pt = -5, 0

    def bundle(self, given: list[tuple[str, int | None, int]]):
        # each key's elements in event-time order on both sides (as the operator sorts them)
        elements = sorted(
            ((k, value_of(v, self.whole), ts) for k, v, ts in given), key=lambda e: e[2]
        )
        lifted = self.lifting.combined_by_key(table_of(elements, self.whole), self.wm)
        outs: list[list] = [[], []]
        for key in sorted({k for k, _, _ in elements}):
            for side, states in enumerate(self.states):
                state = states.get(key)
                if state is None:
                    state = states[key] = KeyState(self.wm, self.pt)
                if side == 0:
                    out = add_bundle(self.engine, state, key, lifted[key])
                else:
                    mine = [(v, ts) for k, v, ts in elements if k == key]
                    out = self.engine.add_elements(state, key, mine)
                outs[side].append((out.panes, out.dropped))
        return outs

    def advance(self, wm: int, pt: int):
        self.wm, self.pt = max(self.wm, wm), max(self.pt, pt)
        outs: list[list] = [[], []]
        for side, states in enumerate(self.states):
            for key in sorted(states):
                out = self.engine.advance(states[key], key, self.wm, self.pt)
                outs[side].append((out.panes, out.dropped))
        return outs


@pytest.mark.heavy
@given(pipelines(), st.lists(step, max_size=25))
def test_lifted_combiners_of_your_own_emit_what_elements_do(pipeline, steps):
    windowing, fn, whole = pipeline
    both = Both(windowing, fn, whole)
    for i, (kind, arg) in enumerate([*steps, ("end", None)]):
        if kind == "bundle":
            lifted, plain = both.bundle(arg)
        elif kind == "watermark":
            lifted, plain = both.advance(both.wm + arg, both.pt)
        elif kind == "processing":
            lifted, plain = both.advance(both.wm, both.pt + arg)
        else:
            lifted, plain = both.advance(END_OF_TIME, both.pt)
        where = f"{windowing}, {fn!r}: step {i} {kind} {arg}"
        assert lifted == plain, where
        states = [{k: window_states(s) for k, s in side.items()} for side in both.states]
        assert states[0] == states[1], where


class CountedSpread(Spread):
    """:class:`Spread` that records each ``add_all`` call's values and refuses ``add``."""

    def __init__(self) -> None:
        self.calls: list[list] = []

    def add_all(self, acc, values):
        self.calls.append(list(values))
        return super().add_all(acc, values)

    def add(self, acc, value):
        if not self.calls or not self.calls[-1]:
            raise AssertionError("lifting adds a group's values with add_all, not add")
        return super().add(acc, value)


def test_a_group_of_values_is_added_with_one_add_all_call():
    """Once per key and window of a bundle, with all of that group's values (what a sketch's
    ``add_all`` builds on): two keys, three windows, nine elements, six calls."""
    fn = CountedSpread()
    windowing = Windowing(FixedWindows(10))
    lifting = Lifting.of(
        windowing, combiners.aggregates(n=combiners.count(), s=fn), columns_of(False)
    )
    elements = [
        ("a", value_of(v, False), ts) for v, ts in [(1, 1), (2, 2), (3, 11), (None, 12), (5, 25)]
    ] + [("b", value_of(v, False), ts) for v, ts in [(7, 3), (8, 4), (9, 13), (1, 27)]]
    bundles = lifting.combined_by_key(table_of(elements, False), watermark=0)
    groups = sorted(sorted(map(repr, call)) for call in fn.calls)
    want = {}
    for k, v, ts in elements:
        want.setdefault((k, ts // 10), []).append(repr({"v": v["v"]}))  # its fields
    assert groups == sorted(sorted(g) for g in want.values())
    parts = {k: [(p.window.start, p.acc, p.n) for p in b.parts] for k, b in bundles.items()}
    assert parts == {
        "a": [(0, (2, (1, 2)), 2), (10, (2, (3, 3)), 2), (20, (1, (5, 5)), 1)],
        "b": [(0, (2, (7, 8)), 2), (10, (1, (9, 9)), 1), (20, (1, (1, 1)), 1)],
    }


@pytest.mark.parametrize("fn", [Spread(), combiners.aggregates(n=combiners.count(), s=Spread())])
def test_the_columnar_engine_refuses_a_combiner_of_your_own(fn):
    """Lifted, but no column holds its accumulator: the columnar engine says so."""
    with pytest.raises(NotColumnar, match=re.escape("is not a built-in aggregate")):
        Simulator(Windowing(FixedWindows(10)), fn, engine=EngineKind.COLUMNAR)


def test_a_combiner_reading_a_column_the_elements_lack_does_not_lift():
    class Other(Spread):
        fields = ("missing",)

    with pytest.raises(NotColumnar, match="reads a column 'missing' the elements do not have"):
        Lifting.of(Windowing(FixedWindows(10)), Other(), columns_of(False))
