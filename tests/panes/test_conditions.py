"""Filtered aggregates in the model: the condition grammar (round trip, errors), its three-valued
meaning, the filtered combiner's text, and the combiner in the simulator in every mode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panes import (
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    EngineKind,
    FixedWindows,
    Repeatedly,
    Sessions,
    Simulator,
    Windowing,
    combiners,
)
from panes.columnar import NotColumnar
from panes.conditions import (
    And,
    Comparison,
    ConditionSyntaxError,
    In,
    IsNull,
    Not,
    Or,
    parse_condition,
)
from panes.fold import batch, fold
from panes.syntax import AggregateSyntaxError, parse_aggregate

# -- random conditions over columns s (string), n (long), x (double), b (boolean) -------------

COLUMNS = {
    "s": st.sampled_from(["a", "b", "it's", "x\\y", ""]),
    "n": st.integers(-5, 5),
    "x": st.sampled_from([-1.5, 0.0, 0.25, 2.0, 1e-05]),
    "b": st.booleans(),
}


def predicates() -> st.SearchStrategy:
    def on(column: str) -> st.SearchStrategy:
        literal = COLUMNS[column]
        ops = ["=", "!="] if column in ("s", "b") else ["=", "!=", "<", "<=", ">", ">="]
        if column == "s":
            ops += ["<", ">="]
        return st.one_of(
            st.builds(Comparison, st.just(column), st.sampled_from(ops), literal),
            st.builds(
                In,
                st.just(column),
                st.lists(literal, min_size=1, max_size=3).map(tuple),
                st.booleans(),
            ),
            st.builds(IsNull, st.just(column), st.booleans()),
        )

    return st.sampled_from(list(COLUMNS)).flatmap(on)


conditions = st.recursive(
    predicates(),
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.builds(And, st.lists(inner, min_size=2, max_size=3).map(tuple)),
        st.builds(Or, st.lists(inner, min_size=2, max_size=3).map(tuple)),
    ),
    max_leaves=6,
)

records = st.fixed_dictionaries({c: st.one_of(st.none(), s) for c, s in COLUMNS.items()})


@pytest.mark.heavy
@settings(max_examples=40, deadline=None)
@given(conditions)
def test_a_condition_prints_text_that_parses_back_to_it(condition):
    text = str(condition)
    assert parse_condition(text) == condition
    fn = combiners.count().filter(condition)
    assert parse_aggregate(repr(fn)) == fn
    assert parse_aggregate(f"count() FILTER (WHERE {text})") == fn


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status = 'error'", Comparison("status", "=", "error")),
        ("n <> 3", Comparison("n", "!=", 3)),
        ("x >= -1.5e2", Comparison("x", ">=", -150.0)),
        ("s = 'it''s'", Comparison("s", "=", "it's")),
        ("ok = TRUE", Comparison("ok", "=", True)),
        ("c NOT IN ('de', 'at')", In("c", ("de", "at"), True)),
        ("c is not null", IsNull("c", True)),
        (
            "a = 1 or b = 2 and not c = 3",
            Or(
                (
                    Comparison("a", "=", 1),
                    And((Comparison("b", "=", 2), Not(Comparison("c", "=", 3)))),
                )
            ),
        ),
        (
            "(a = 1 or b = 2) and c = 3",
            And((Or((Comparison("a", "=", 1), Comparison("b", "=", 2))), Comparison("c", "=", 3))),
        ),
    ],
)
def test_the_grammar_reads_precedence_literals_and_key_words(text, expected):
    assert parse_condition(text) == expected
    assert parse_condition(str(expected)) == expected


@pytest.mark.parametrize(
    ("text", "position", "problem"),
    [
        ("", 0, "empty condition"),
        ("status =", 8, "expected a literal"),
        ("status = error", 9, "expected a literal"),
        ("status = null", 9, "null is no literal"),
        ("status == 'x'", 8, "expected a literal ('text', a number, true or false), found '='"),
        ("status = 'x", 9, "unterminated text literal"),
        ("status", 6, "expected a comparison"),
        ("a = 1 and", 9, "expected a column name"),
        ("(a = 1", 6, "expected ')'"),
        ("a = 1)", 5, "expected 'and', 'or' or the end"),
        ("a in ()", 6, "expected a literal"),
        ("a not = 1", 6, "expected 'in'"),
        ("and = 1", 0, "expected a column name"),
        ("a is 1", 5, "expected 'null'"),
    ],
)
def test_malformed_conditions_point_at_the_offending_position(text, position, problem):
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(text)
    assert problem in str(info.value)
    assert info.value.position == position


def test_a_malformed_filter_is_an_aggregate_syntax_error_at_its_place_in_the_aggregate():
    with pytest.raises(AggregateSyntaxError) as info:
        parse_aggregate("sum(amount) filter (country = )")
    assert info.value.position == len("sum(amount) filter (country =")  # right after the =
    with pytest.raises(AggregateSyntaxError, match="expected '\\)' closing"):
        parse_aggregate("count() filter (a = 1")
    with pytest.raises(AggregateSyntaxError, match="expected the end"):
        parse_aggregate("count() filtr (a = 1)")


@pytest.mark.heavy
@settings(max_examples=40, deadline=None)
@given(conditions, records)
def test_three_valued_logic(condition, record):
    """An unknown (null) operand makes not/and/or unknown unless and's False or or's True
    decides; the comparisons of a null column are unknown, ``is null`` never is."""
    value = condition.evaluate(record)
    assert value in (True, False, None)
    if isinstance(condition, Not):
        inner = condition.operand.evaluate(record)
        assert value == (None if inner is None else not inner)
    if isinstance(condition, Comparison | In) and record[condition.column] is None:
        assert value is None
    if isinstance(condition, IsNull):
        assert value == ((record[condition.column] is None) != condition.negated)


# -- the combiner -----------------------------------------------------------------------------

ERRORS = combiners.count().filter("status = 'error'")
DE = combiners.sum("amount").filter("country = 'de'")
AGG = combiners.aggregates(errors=ERRORS, de=DE, all=combiners.count())
EVERY_KIND = combiners.aggregates(  # every built-in the columnar engine lifts, filtered
    errors=ERRORS,
    de=DE,
    known=combiners.count("amount").filter("country is not null"),
    top=combiners.max("amount").filter("status != 'ok'"),
    low=combiners.min("status").filter("amount >= 2"),
    mean=combiners.mean("amount").filter("not country in ('fr')"),
)


def test_a_filtered_aggregate_is_the_inner_one_over_the_values_whose_condition_is_true():
    values = [
        {"status": "error", "country": "de", "amount": 5},
        {"status": None, "country": "de", "amount": None},
        {"status": "ok", "country": None, "amount": 7},
        {"status": "error", "country": "fr", "amount": 1},
    ]
    assert AGG.extract(AGG.add_all(AGG.create(), values)) == {"errors": 2, "de": 5, "all": 4}
    assert repr(ERRORS) == "count() filter (status = 'error')"
    assert combiners.count().filter("status = 'ok'") != ERRORS and combiners.count() != ERRORS
    # a tagged value carries the condition's flag, which decides alone
    flagged = {ERRORS.condition.flag: True}
    assert ERRORS.add(0, flagged) == 1 and ERRORS.add(0, {ERRORS.condition.flag: None}) == 0
    assert DE.retract(DE.add(0, values[0]), values[0]) == 0 and DE.retract(5, values[3]) == 5


def test_a_filtered_list_is_not_columnar_and_says_why():
    listed = combiners.to_list("amount").filter("status = 'error'")
    with pytest.raises(NotColumnar, match="a filtered list is added element by element"):
        Simulator(Windowing(FixedWindows(10)), listed, engine=EngineKind.COLUMNAR)


RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["k1", "k2"]),
        st.fixed_dictionaries(
            {
                "status": st.sampled_from(["error", "ok", None]),
                "country": st.sampled_from(["de", "fr", None]),
                "amount": st.one_of(st.none(), st.integers(-3, 9)),
            }
        ),
        st.integers(0, 59),
    ),
    max_size=30,
)


def _expected(elements, window_fn) -> dict:
    """Per (key, window): the errors and the German amount, counted here by hand."""
    out: dict = {}
    for key, v, ts in elements:
        for w in window_fn.assign(ts, v):
            got = out.setdefault((key, w), {"errors": 0, "de": 0, "all": 0})
            got["errors"] += v["status"] == "error"
            got["de"] += (v["amount"] or 0) if v["country"] == "de" else 0
            got["all"] += 1
    return out


@pytest.mark.parametrize("mode", list(AccumulationMode))
@settings(max_examples=15, deadline=None)
@given(elements=RECORDS, cut=st.integers(0, 30))
def test_filtered_aggregates_in_the_simulator_in_every_mode(mode, elements, cut):
    window_fn = FixedWindows(20)
    windowing = Windowing(
        window_fn,
        trigger=AfterWatermark(early=Repeatedly(AfterCount(2))),
        accumulation_mode=mode,
    )
    sim = Simulator(windowing, AGG)
    sim.add_elements(elements[:cut])
    sim.add_elements(elements[cut:])
    sim.advance_watermark(100)
    expected = _expected(elements, window_fn)
    assert fold(sim.panes, mode, AGG) == expected
    assert batch(elements, window_fn, AGG) == expected


@pytest.mark.heavy
@pytest.mark.parametrize("mode", [AccumulationMode.DISCARDING, AccumulationMode.ACCUMULATING])
@settings(max_examples=15, deadline=None)
@given(elements=RECORDS, cut=st.integers(0, 30), watermark=st.integers(0, 40))
def test_the_columnar_engine_masks_a_bundle_with_the_flags_as_the_per_key_engine_filters(
    mode, elements, cut, watermark
):
    """Same panes and drops, in the same order, from both engines (the columnar one sums,
    counts, ... each filtered aggregate's column masked by its condition's flag)."""
    windowing = Windowing(
        FixedWindows(20),
        trigger=AfterWatermark(early=Repeatedly(AfterCount(2)), late=AfterCount(1)),
        accumulation_mode=mode,
        allowed_lateness=10,
    )
    sims = [
        Simulator(windowing, EVERY_KIND, engine=e)
        for e in (EngineKind.PER_ELEMENT, EngineKind.COLUMNAR)
    ]
    for sim in sims:
        sim.add_elements(elements[:cut])
        sim.advance_watermark(watermark)
        sim.add_elements(elements[cut:])
        sim.advance_watermark(100)
    per_key, columnar = sims
    assert columnar.panes == per_key.panes
    assert columnar.dropped == per_key.dropped


def test_filtered_aggregates_over_merging_windows():
    window_fn = Sessions(10)
    elements = [
        ("k", {"status": "error", "country": "de", "amount": 2}, 0),
        ("k", {"status": "ok", "country": "de", "amount": 3}, 15),
        ("k", {"status": "error", "country": None, "amount": 4}, 8),  # joins both sessions
        ("k", {"status": "error", "country": "de", "amount": 1}, 100),
    ]
    sim = Simulator(Windowing(window_fn), AGG)
    sim.add_elements(elements)
    sim.advance_watermark(1000)
    values = sorted(fold(sim.panes, AccumulationMode.DISCARDING, AGG).values(), key=str)
    assert values == [{"errors": 1, "de": 1, "all": 1}, {"errors": 2, "de": 5, "all": 3}]
