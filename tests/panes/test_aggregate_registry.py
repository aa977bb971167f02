"""The registry of built-in aggregates: each class declares every facet the other layers ask of
it (spelling, output type, path, SQL form, retraction, verify rule), and nothing switches on its
name (``docs/aggregates.md``, "Adding an aggregate")."""

from __future__ import annotations

import inspect

import pytest

from jobs.config.aggregates import Aggregate
from jobs.config.values import PipelineConfigError
from panes import combine_fn, combiners, sketches
from panes.combine_fn import AggregateTypeError, Column, CombineFn, Path, SqlForm
from panes.combiners import AGGREGATES, RETRACTING
from panes.sketches import HLL_TYPE, QUANTILES_TYPE, MergeSketches, SketchFn
from panes.syntax import AggregateSyntaxError, parse_aggregate

# A source every example of a built-in reads (``sum(seconds)``, ``max_by(page, seconds)``, ...).
TYPES = {
    "seconds": "long",
    "page": "string",
    "status": "string",
    "user_id": "long",
    "latency": "double",
    "users": HLL_TYPE,  # an upstream's sketch columns, which merge(...) reads
    "latencies": QUANTILES_TYPE,
}
COLUMNS = {name: Column(t, t in ("long", "double"), t == "long") for name, t in TYPES.items()}

EXPECTED_TYPES = {  # the output type of each class's first example over TYPES
    "sum": "long",
    "count": "long",
    "min": "long",
    "max": "long",
    "mean": "double",
    "to_list": "list<string>",
    "max_by": "string",
    "min_by": "string",
    "first": "string",
    "last": "string",
    "approx_count_distinct": "struct<estimate: long, sketch: binary>",
    "approx_quantiles": "struct<quantiles: list<double>, sketch: binary>",
    "approx_percentile": "struct<quantile: double, sketch: binary>",
    "top_k": "struct<items: list<struct<item: string, count: long>>, sketch: binary>",
    "merge": HLL_TYPE,  # the sketch's it merges: approx_count_distinct(merge(users))
}

EXPECTED_PATHS = {
    **dict.fromkeys(("sum", "count", "min", "max", "mean", "to_list"), Path.COLUMNAR),
    **dict.fromkeys(("max_by", "min_by", "first", "last"), Path.PER_ELEMENT),
    **dict.fromkeys(
        ("approx_count_distinct", "approx_quantiles", "approx_percentile", "top_k", "merge"),
        Path.LIFTED,
    ),
}

REGISTERED = sorted(AGGREGATES.items())


def test_the_registry_holds_every_built_in_once_under_its_own_spelling():
    assert list(AGGREGATES) == [
        "sum",
        "count",
        "min",
        "max",
        "mean",
        "to_list",
        "max_by",
        "min_by",
        "first",
        "last",
        "approx_count_distinct",
        "approx_quantiles",
        "approx_percentile",
        "top_k",
        "merge",
    ]
    assert all(cls.name == name for name, cls in AGGREGATES.items())
    # every class of the model with a spelling of its own is registered (a new one too)
    spelled = {
        cls
        for module in (combine_fn, combiners, sketches)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, CombineFn) and cls.__dict__.get("name")
    }
    assert spelled == set(AGGREGATES.values())


@pytest.mark.parametrize(("name", "cls"), REGISTERED)
def test_every_built_in_declares_all_its_facets(name, cls):
    assert cls.examples, f"{name}: no example text"
    for text in cls.examples:
        fn = parse_aggregate(text)  # the parser finds it by its spelling
        assert type(fn) is cls
        assert parse_aggregate(str(fn)) == fn
    fn = parse_aggregate(cls.examples[0])
    # its output type, worked out from its columns (not declared, as a user's)
    assert not fn.declares_output_type
    assert fn.output_type_in(COLUMNS) == EXPECTED_TYPES[name]
    assert Aggregate(name, fn).output_type(TYPES) == EXPECTED_TYPES[name]
    # its path, and why it is added element by element
    assert fn.path is EXPECTED_PATHS[name]
    assert (fn.per_element_reason is not None or fn.reads_event_time) == (
        fn.path is Path.PER_ELEMENT
    )
    # its SQL form: every exact built-in has one, a sketch none (verify compares in Python)
    assert (fn.sql is None) == isinstance(fn, SketchFn)
    assert fn.sql is None or isinstance(fn.sql, SqlForm)
    # retraction: declared by defining retract
    assert fn.can_retract == (name in RETRACTING)
    # its words in docs/aggregates.md's table at a glance, its own (not a combiner of yours')
    assert cls.glance is not CombineFn.glance and cls.glance.spelled
    # verify's rule: an answer agrees with itself
    # (an upstream's sketch columns hold no sketch here: merge(...) holds none, as a sketch)
    values = [{c: None if "sketch" in t else v for c, t in TYPES.items()} for v in (3, 4, 4)]
    values = [{**v, "page": str(v["page"]), "status": str(v["status"])} for v in values]
    inputs = [(i, v) for i, v in enumerate(values)] if fn.reads_event_time else values
    answer = fn.extract(fn.add_all(fn.create(), inputs))
    assert fn.agrees(answer, answer)


def test_the_retracting_built_ins_are_those_that_define_retract():
    assert RETRACTING == ("sum", "count", "mean", "to_list", "merge")


def test_an_unknown_aggregate_is_refused_naming_every_spelling():
    with pytest.raises(AggregateSyntaxError) as e:
        parse_aggregate("avg(price)")
    assert e.value.message == (
        "unknown aggregate 'avg'; known: sum(), count(), min(), max(), mean(), to_list(), "
        "max_by(), min_by(), first(), last(), approx_count_distinct(), approx_quantiles(), "
        "approx_percentile(), top_k(), merge()"
    )
    with pytest.raises(AggregateSyntaxError, match=r"did you mean top_k\?"):
        parse_aggregate("topk(page)")


def test_a_malformed_sketch_is_shown_its_class_examples():
    with pytest.raises(AggregateSyntaxError) as e:
        parse_aggregate("approx_count_distinct(user_id, 14)")
    assert e.value.message == (
        "malformed approx_count_distinct(...): write e.g. approx_count_distinct(user_id) or "
        "approx_count_distinct(user_id, lg_k=14)"
    )


def test_an_output_type_refused_by_the_class_is_reported_under_the_aggregate():
    with pytest.raises(AggregateTypeError, match="sum\\(\\) needs a numeric column"):
        combiners.sum("page").output_type_in(COLUMNS)
    with pytest.raises(PipelineConfigError) as e:
        Aggregate("total", combiners.sum("page")).output_type(TYPES)
    assert str(e.value).startswith("aggregates.total")
    assert "sum() needs a numeric column, 'page' is string" in str(e.value)


def test_merge_of_a_sketch_takes_its_output_type_from_the_sketch_it_merges():
    fn = MergeSketches(combiners.approx_percentile("p95", 0.95))
    assert fn.reads_sketches
    columns = {"p95": Column("struct<quantiles: list<double>, sketch: binary>")}
    assert fn.output_type_in(columns) == "struct<quantile: double, sketch: binary>"
    with pytest.raises(ValueError, match="merge"):
        MergeSketches(combiners.top_k("page", 3))  # top_k declares no sketches it merges


def test_merge_is_registered_and_alone_is_refused_naming_the_texts_it_goes_in():
    assert AGGREGATES["merge"] is MergeSketches
    fn = parse_aggregate("approx_quantiles(merge(latencies), [0.5])")
    assert type(fn) is MergeSketches and fn.can_retract and fn.path is Path.LIFTED
    assert str(fn) == "approx_quantiles(merge(latencies), [0.5])"  # spelled as what it merges
    with pytest.raises(AggregateSyntaxError) as e:
        parse_aggregate("merge(users)")
    assert e.value.message == (
        "merge(users) stands in place of a sketch's column: write e.g. "
        "approx_count_distinct(merge(users)) or approx_quantiles(merge(users), [0.5])"
    )
    with pytest.raises(AggregateSyntaxError, match=r"malformed merge\(\.\.\.\)"):
        parse_aggregate("merge(users, 3)")


def test_a_combiner_of_your_own_is_the_same_kind_of_object_and_declares_its_type():
    class Spread(CombineFn):
        output_type = "double"
        fields = ("seconds",)

    fn = Spread()
    assert fn.declares_output_type and fn.output_type_in(COLUMNS) == "double"
    assert fn.path is Path.LIFTED and fn.sql is None and not fn.can_retract
    assert fn.agrees([1.0, 2.0], [2.0, 1.0])  # verify's exact rule, lists as multisets
    assert Aggregate("spread", fn).output_type(TYPES) == "double"


def test_a_filtered_aggregate_asks_its_inner_one():
    fn = combiners.sum("seconds").filter("page = 'home'")
    assert fn.output_type_in(COLUMNS) == "long" and not fn.declares_output_type
    assert fn.path is Path.COLUMNAR
    assert combiners.to_list("page").filter("page = 'x'").path is Path.PER_ELEMENT
    hll = combiners.approx_count_distinct("page").filter("status = 'ok'")
    answer = hll.extract(hll.add_all(hll.create(), [{"page": "a", "status": "ok"}]))
    assert hll.agrees(answer, answer)
