"""The columnar engine against the per-key engine, on random pipelines it serves.

For random fixed windows, triggers evaluable by class, modes, pane policies, aggregates (every
built-in, alone and named together, over whole values and fields), lateness and random steps
(bundles over several keys, watermark and processing-time moves), both simulators emit the same
panes and drop the same elements, in the same order, at every step, and keep the same keys. Where
the columnar engine does not apply it refuses at construction, saying why.
"""

from __future__ import annotations

import re

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
    EngineKind,
    FixedWindows,
    Never,
    OnTimeBehavior,
    OrFinally,
    Repeatedly,
    Sessions,
    Simulator,
    TimestampCombiner,
    Windowing,
    combiners,
)
from panes.columnar import NotColumnar

TRIGGERS = [
    DefaultTrigger(),
    AfterWatermark(),
    AfterWatermark(early=AfterCount(2)),
    AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
    AfterWatermark(late=Never()),
    Repeatedly(AfterCount(3)),
    Repeatedly(AfterAny(AfterCount(2), AfterWatermark())),
    Repeatedly(AfterAll(AfterCount(2), AfterWatermark())),
    AfterEach(AfterCount(2), Repeatedly(AfterWatermark())),
    Repeatedly(OrFinally(Repeatedly(AfterCount(2)), AfterWatermark())),
    OrFinally(Always(), AfterCount(4)),
    AfterAny(AfterCount(4), AfterWatermark()),
    AfterEach(AfterCount(1), AfterCount(2)),
    AfterCount(3),
    Always(),
    Never(),
]
WHOLE = [
    combiners.sum(),
    combiners.count(),
    combiners.mean(),
    combiners.min(),
    combiners.max(),
    combiners.to_list(),
]
FIELDS = [
    combiners.aggregates(n=combiners.count(), total=combiners.sum("v"), top=combiners.max("s")),
    combiners.aggregates(
        low=combiners.min("s"), avg=combiners.mean("v"), all=combiners.to_list("v")
    ),
    combiners.count("v"),
]
KEYS = ["a", "b", "c"]


def record(value: int | None) -> dict:
    return {"v": value, "s": None if value is None else f"s{value % 7}"}


@st.composite
def pipelines(draw):
    windowing = Windowing(
        draw(st.sampled_from([FixedWindows(10), FixedWindows(7, offset=3)])),
        trigger=draw(st.sampled_from(TRIGGERS)),
        accumulation_mode=draw(
            st.sampled_from([AccumulationMode.DISCARDING, AccumulationMode.ACCUMULATING])
        ),
        allowed_lateness=draw(st.sampled_from([0, 5, 30, 10_000])),
        timestamp_combiner=draw(st.sampled_from(list(TimestampCombiner))),
        on_time_behavior=draw(st.sampled_from(list(OnTimeBehavior))),
        closing_behavior=draw(st.sampled_from(list(ClosingBehavior))),
    )
    fields = draw(st.booleans())
    fn = draw(st.sampled_from(FIELDS if fields else WHOLE))
    return windowing, fn, fields


value = st.one_of(st.integers(-3, 9), st.integers(-3, 9), st.none())  # None: a missing value
element = st.tuples(st.sampled_from(KEYS), value, st.integers(0, 120))
step = st.one_of(
    st.tuples(st.just("bundle"), st.lists(element, min_size=1, max_size=6)),
    st.tuples(st.just("watermark"), st.integers(0, 25)),
    st.tuples(st.just("processing"), st.integers(0, 6)),
)


def steps_of(sim_per_key, sim_columnar, steps, fields):
    """Drive both simulators through ``steps``; yield each step's (per key, columnar) output."""
    wm, pt = -5, 0
    for kind, arg in [*steps, ("end", None)]:
        outputs = []
        for sim in (sim_per_key, sim_columnar):
            before = len(sim.dropped)
            if kind == "bundle":
                bundle = [(k, record(v) if fields else v, ts) for k, v, ts in arg]
                panes = sim.add_elements(bundle)
            elif kind == "watermark":
                panes = sim.advance_watermark(wm + arg)
            elif kind == "processing":
                panes = sim.advance_processing_time(pt + arg)
            else:
                panes = sim.advance_watermark(END_OF_TIME)
            outputs.append((panes, sim.dropped[before:]))
        wm += arg if kind == "watermark" else 0
        pt += arg if kind == "processing" else 0
        yield (kind, arg), outputs


@pytest.mark.heavy
@given(pipelines(), st.lists(step, max_size=25))
def test_both_engines_emit_the_same_panes_and_drops(pipeline, steps):
    windowing, fn, fields = pipeline
    per_key = Simulator(windowing, fn)
    columnar = Simulator(windowing, fn, engine=EngineKind.COLUMNAR)
    for i, (what, ((panes, dropped), (c_panes, c_dropped))) in enumerate(
        steps_of(per_key, columnar, steps, fields)
    ):
        where = f"{windowing.trigger}, {fn!r}: step {i} {what}"
        assert c_panes == panes, f"{where}: panes"
        assert c_dropped == dropped, f"{where}: dropped"
        states = {k: s.to_bytes() for k, s in per_key.states.items()}
        assert set(columnar.states) == set(states), f"{where}: keys in state"
    assert not columnar.states


@pytest.mark.parametrize(
    ("windowing", "fn", "reason"),
    [
        (Windowing(Sessions(10)), combiners.sum(), "Sessions(10us) are not fixed windows"),
        (
            Windowing(FixedWindows(10), trigger=Repeatedly(AfterProcessingTime(5))),
            combiners.sum(),
            "reads the clocks as numbers",
        ),
        (
            Windowing(
                FixedWindows(10), accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING
            ),
            combiners.sum(),
            "accumulating & retracting",
        ),
    ],
)
def test_the_columnar_engine_says_where_it_does_not_apply(windowing, fn, reason):
    with pytest.raises(NotColumnar, match=re.escape(reason)):
        Simulator(windowing, fn, engine=EngineKind.COLUMNAR)


def test_a_float_sum_is_refused_at_its_first_bundle():
    sim = Simulator(Windowing(FixedWindows(10)), combiners.sum(), engine=EngineKind.COLUMNAR)
    with pytest.raises(NotColumnar, match="order of additions"):
        sim.add_elements([("k", 1.5, 1)])


def test_a_column_whose_first_values_are_all_missing_takes_its_type_from_later_ones():
    """The simulator learns a column's type from its values; a column of only ``None`` so far
    has none, and takes the type of its first values, the windows kept."""
    windowing = Windowing(
        FixedWindows(10),
        trigger=Repeatedly(AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
    )
    for fn, values in [
        (combiners.max(), [None, "b", "a"]),
        (combiners.to_list(), [None, "a"]),
        (combiners.sum(), [None, 3]),
    ]:
        sims = [Simulator(windowing, fn), Simulator(windowing, fn, engine=EngineKind.COLUMNAR)]
        for v in values:
            outs = [[p.value for p in sim.add_elements([("k", v, 1)])] for sim in sims]
            assert outs[0] == outs[1], (fn, v)


def test_a_columnar_kind_the_engine_has_not_is_refused_naming_the_kinds():
    """The kind is the aggregate's declaration, read as it is (no table of the engine's maps
    aggregates to kinds): one the engine has not is a one-line error, not a lookup failure."""
    import pyarrow as pa

    from panes.columnar.accumulators import parts_of

    class Median(combiners.Sum):
        name = ""
        columnar_kind = "median"

    with pytest.raises(ValueError) as e:
        parts_of(Median("amount"), {"amount": pa.int64()}.get, False)
    assert str(e.value) == (
        "(amount) declares the columnar kind 'median'; the kinds: count_rows, count, sum, "
        "mean, min, max, list"
    )

    # a kind it has is read from the aggregate, whatever its class
    class Total(combiners.Sum):
        columnar_kind = "max"

    (part,) = parts_of(Total("amount"), {"amount": pa.int64()}.get, False)
    assert part.kind == "max"
