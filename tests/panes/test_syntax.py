"""The textual form of triggers, window functions and aggregates, as pipeline configurations
write it.

Pins the round trip both ways (``parse_trigger(str(t)) == t`` for random trigger trees
of every class, and canonical strings print back unchanged), durations in trigger text (the
durations themselves: ``test_time``), and that malformed expressions raise ``TriggerSyntaxError`` (a
``ValueError``) whose ``.position`` points at the offending character; the same for
aggregates (``AggregateSyntaxError``), which round-trip through ``str`` too.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterFirst,
    AfterProcessingTime,
    AfterWatermark,
    AggregateSyntaxError,
    Always,
    DefaultTrigger,
    FixedWindows,
    GlobalWindows,
    Never,
    OrFinally,
    Repeatedly,
    Sessions,
    SlidingWindows,
    TriggerSyntaxError,
    Windowing,
    combiners,
    parse_aggregate,
    parse_trigger,
    parse_window,
)
from tests.panes.test_time import DURATIONS, durations

# -- strategies (also used by test_triggers) --------------------------------------------

leaf_triggers = st.one_of(
    st.builds(AfterCount, st.integers(1, 10**6)),
    st.builds(AfterProcessingTime, durations),
    st.just(AfterWatermark()),
    st.just(Always()),
    st.just(Never()),
    st.just(DefaultTrigger()),
)


def trigger_trees(depth=4, leaves=leaf_triggers):
    """Random trigger trees of every class, nested up to ``depth`` levels."""
    if depth <= 1:
        return leaves
    sub = trigger_trees(depth - 1, leaves)
    children = st.lists(sub, min_size=1, max_size=3)
    return st.one_of(
        leaves,
        st.builds(AfterWatermark, early=st.none() | sub, late=st.none() | sub),
        st.builds(Repeatedly, sub),
        st.builds(OrFinally, sub, sub),
        children.map(lambda ts: AfterEach(*ts)),
        children.map(lambda ts: AfterAny(*ts)),
        children.map(lambda ts: AfterAll(*ts)),
    )


# -- round trips -----------------------------------------------------------------------------

CANONICAL = [
    "AfterWatermark()",
    "AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))",
    "AfterWatermark(early=AfterCount(100))",
    "AfterWatermark(late=AfterProcessingTime(90s))",
    "AfterCount(3)",
    "AfterProcessingTime(0s)",
    "AfterProcessingTime(250ms)",
    "AfterProcessingTime(10us)",
    "AfterProcessingTime(2h)",
    "AfterProcessingTime(1d)",
    "Repeatedly(AfterCount(2))",
    "AfterEach(AfterCount(1), AfterProcessingTime(5m), Never())",
    "AfterAny(AfterCount(10), AfterWatermark())",
    "AfterAll(AfterCount(2), AfterProcessingTime(30s))",
    "OrFinally(Repeatedly(AfterCount(2)), AfterWatermark())",
    "Always()",
    "Never()",
    "DefaultTrigger()",
    "Repeatedly(AfterAny(AfterAll(AfterEach(AfterCount(1), Always()), Never()), "
    "AfterWatermark(early=OrFinally(AfterCount(5), AfterProcessingTime(1h)))))",
]


@pytest.mark.parametrize("text", CANONICAL)
def test_canonical_strings_print_back_unchanged(text):
    trigger = parse_trigger(text)
    assert str(trigger) == text
    assert repr(trigger) == text
    assert parse_trigger(str(trigger)) == trigger


def test_parsing_builds_the_trigger_it_names():
    assert parse_trigger(
        "AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))"
    ) == AfterWatermark(early=AfterProcessingTime(60_000_000), late=AfterCount(1))
    assert parse_trigger("OrFinally(Repeatedly(AfterCount(2)), AfterWatermark())") == (
        Repeatedly(AfterCount(2)).or_finally(AfterWatermark())
    )
    assert parse_trigger("AfterEach(Never(), Always())") == AfterEach(Never(), Always())
    assert parse_trigger("DefaultTrigger()") == DefaultTrigger()


def test_arguments_may_be_given_by_position_or_keyword_and_white_space_is_free():
    expected = AfterWatermark(early=AfterCount(2), late=AfterProcessingTime(5_000_000))
    assert parse_trigger("AfterWatermark(AfterCount(2), AfterProcessingTime(5s))") == expected
    assert (
        parse_trigger("AfterWatermark(late=AfterProcessingTime(5s), early=AfterCount(2))")
        == expected
    )
    assert (
        parse_trigger(
            " AfterWatermark (\n  early = AfterCount ( 2 ) ,\n\tlate=AfterProcessingTime( 5s )\n) "
        )
        == expected
    )
    assert parse_trigger("AfterCount(count=7)") == AfterCount(7)
    assert parse_trigger("AfterProcessingTime(delay=1m)") == AfterProcessingTime(60_000_000)


def test_after_first_is_an_alias_of_after_any():
    assert parse_trigger("AfterFirst(AfterCount(1), Never())") == AfterAny(AfterCount(1), Never())
    assert AfterFirst is AfterAny
    assert str(AfterFirst(Never())) == "AfterAny(Never())"


@given(trigger_trees())
def test_random_trigger_trees_round_trip(trigger):
    text = str(trigger)
    parsed = parse_trigger(text)
    assert parsed == trigger
    assert str(parsed) == text


# -- durations in trigger text (the durations themselves: test_time) -------------------------


@pytest.mark.parametrize(("text", "micros", "canonical"), DURATIONS)
def test_durations_in_trigger_text_parse_to_micros_and_print_canonically(text, micros, canonical):
    trigger = parse_trigger(f"AfterProcessingTime({text})")
    assert trigger == AfterProcessingTime(micros)
    assert str(trigger) == f"AfterProcessingTime({canonical})"


# -- errors point at the offending character --------------------------------------------------


def _error(text):
    with pytest.raises(TriggerSyntaxError) as info:
        parse_trigger(text)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.text == text
    assert f"position {error.position}" in str(error)
    return error


@pytest.mark.parametrize(
    ("text", "offending", "message"),
    [
        # missing parentheses
        ("AfterCount(3", 12, "expected ',' or ')'"),
        ("AfterWatermark(early=AfterCount(3)", 34, "expected ',' or ')'"),
        ("AfterCount 3)", 11, "expected '('"),
        ("AfterWatermark", 14, "expected '('"),
        # unknown names, with a suggestion
        ("AfterCont(3)", 0, "unknown trigger 'AfterCont' (did you mean AfterCount?)"),
        ("AfterWatermark(early=AfterProcesingTime(1m))", 21, "did you mean AfterProcessingTime?"),
        ("Sometimes()", 0, "unknown trigger 'Sometimes'"),
        # bad counts
        ("AfterCount(5m)", 11, "expects a count"),
        ("AfterCount(-1)", 11, "unexpected character '-'"),
        ("AfterCount(1.5)", 12, "unexpected character '.'"),
        ("AfterCount()", 11, "needs 1 argument"),
        # a duration without a unit
        ("AfterProcessingTime(90)", 20, "expects a duration"),
        ("AfterWatermark(early=AfterProcessingTime(5))", 41, "expects a duration"),
        # stray text
        ("AfterCount(3) AfterCount(4)", 14, "unexpected 'AfterCount' after the trigger"),
        ("AfterCount(3))", 13, "unexpected ')'"),
        ("Never() ;", 8, "unexpected character ';'"),
        # positional after keyword
        (
            "AfterWatermark(early=AfterCount(1), AfterCount(2))",
            36,
            "positional argument after a keyword argument",
        ),
        # too many and repeated arguments, wrong kinds
        ("AfterCount(1, 2)", 14, "at most 1 argument"),
        ("AfterWatermark(early=Never(), early=Always())", 36, "'early' given twice"),
        ("Repeatedly(3)", 11, "expects a trigger"),
        ("OrFinally(Never())", 17, "needs 2 argument"),
        ("AfterAll()", 9, "needs at least 1 trigger"),
        # the empty string
        ("", 0, "expected a trigger name, found the end"),
        ("   ", 0, "expected a trigger name, found the end"),
    ],
)
def test_malformed_expressions_point_at_the_offending_position(text, offending, message):
    error = _error(text)
    assert message in error.message
    assert error.position == offending


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("AfterCount(early=AfterCount(1))", "AfterCount has no argument 'early'"),
        ("AfterAny(early=Never())", "AfterAny takes no keyword arguments"),
        ("AfterWatermark(erly=Never())", "AfterWatermark has no argument 'erly'"),
    ],
)
def test_keyword_on_the_wrong_trigger_points_at_the_keyword(text, message):
    error = _error(text)
    assert message in error.message
    assert error.position == text.index("(") + 1


@pytest.mark.parametrize("text", ["AfterCount(0)", "AfterWatermark(late=AfterCount(0))"])
def test_a_count_that_is_not_positive_points_at_the_count(text):
    error = _error(text)
    assert "positive integer count" in error.message
    assert error.position == text.index("0")


def test_caret_in_the_message_sits_under_the_offending_character():
    error = _error("AfterWatermark(early=AfterCont(3))")
    source, caret = str(error).splitlines()[-2:]
    assert source.strip() == error.text
    assert caret.index("^") - 2 == 21 == error.position  # both lines are indented by two


# -- window functions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FixedWindows(1m)", FixedWindows(60_000_000)),
        ("FixedWindows(1h, offset=30m)", FixedWindows(3_600_000_000, 1_800_000_000)),
        ("SlidingWindows(10m, 1m)", SlidingWindows(600_000_000, 60_000_000)),
        ("Sessions(30m)", Sessions(1_800_000_000)),
        ("GlobalWindows()", GlobalWindows()),
    ],
)
def test_parse_window(text, expected):
    assert parse_window(text) == expected
    assert parse_window(str(expected)) == expected


def test_text_form_drives_the_same_semantics():
    text = "AfterWatermark(early=AfterCount(2), late=AfterCount(1))"
    windowing = Windowing(FixedWindows(10), trigger=parse_trigger(text), allowed_lateness=100)
    assert windowing == Windowing(
        FixedWindows(10),
        trigger=AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
        allowed_lateness=100,
    )


def test_nesting_is_bounded_with_a_clear_error():
    from panes.syntax import MAX_TRIGGER_DEPTH

    def nested(depth: int) -> str:
        return "Repeatedly(" * (depth - 1) + "AfterCount(1)" + ")" * (depth - 1)

    assert parse_trigger(nested(MAX_TRIGGER_DEPTH)) is not None
    error = _error(nested(5000))
    assert f"triggers nest at most {MAX_TRIGGER_DEPTH} deep" in str(error)
    assert error.position == len("Repeatedly(") * MAX_TRIGGER_DEPTH


# -- aggregates -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count()", combiners.count()),
        ("count(id)", combiners.count("id")),
        ("sum(seconds)", combiners.sum("seconds")),
        ("min(price)", combiners.min("price")),
        ("max(price)", combiners.max("price")),
        ("mean(price)", combiners.mean("price")),
        ("to_list(id)", combiners.to_list("id")),
        ("  sum ( seconds )  ", combiners.sum("seconds")),
        ("sum(_private_2)", combiners.sum("_private_2")),
        ("sum(play.seconds)", combiners.sum("play.seconds")),
        ("max_by(page, seconds)", combiners.max_by("page", "seconds")),
        (" min_by( page ,seconds ) ", combiners.min_by("page", "seconds")),
        ("first(status)", combiners.first("status")),
        ("last(status)", combiners.last("status")),
    ],
)
def test_aggregates_parse_and_print_back(text, expected):
    assert parse_aggregate(text) == expected
    assert parse_aggregate(str(expected)) == expected
    assert str(parse_aggregate(text)) == str(expected)  # canonical: ", " between fields
    assert str(expected).replace(" ", "") == "".join(text.split())


@pytest.mark.parametrize(
    ("text", "offending", "problem"),
    [
        ("avg(price)", "avg", "unknown aggregate 'avg'"),
        ("median(x)", "median", "known: sum(), count(), min(), max(), mean(), to_list()"),
        ("coutn()", "coutn", "did you mean count?"),
        ("sum()", "sum", "sum() needs a field"),
        ("mean( )", "mean", "mean() needs a field"),
        ("sum(seconds", "", "expected ')', found the end"),
        ("sum(", "", "expected a field name or ')', found the end"),
        ("sum", "", "expected '('"),
        ("", "", "expected an aggregate name like sum"),
        ("sum(a, b)", ", b)", "sum() takes one field"),
        ("last(a, b)", ", b)", "last() takes one field"),
        ("max_by(a, b, c)", ", c)", "max_by() takes 2 fields"),
        ("max_by(page)", "max_by", "max_by() needs two fields"),
        ("min_by()", "min_by", "e.g. min_by(page, seconds)"),
        ("first()", "first", "first() needs a field"),
        ("max_by(a,)", ")", "expected a field name, found ')'"),
        ("max_by(a b)", "b)", "expected ')', found 'b)'"),
        ("sum(1x)", "1x)", "not an aggregate: expected a field name or ')'"),
        ("count() extra", "extra", "expected the end, found 'extra'"),
    ],
)
def test_malformed_aggregates_point_at_the_offending_position(text, offending, problem):
    with pytest.raises(AggregateSyntaxError) as info:
        parse_aggregate(text)
    error = info.value
    assert isinstance(error, ValueError)
    assert problem in str(error)
    assert text[error.position :].startswith(offending) or not offending
    assert f"at position {error.position}:" in str(error)  # with an excerpt and a caret
