"""Filtered aggregates in the configuration (output types, refusals naming the aggregate, what a
record's value carries) and in the JSON-lines decoder (each condition's flag, no more)."""

from __future__ import annotations

import json

import pytest

from jobs.config.load import pipeline_from_dict
from jobs.config.values import PipelineConfigError
from panes.conditions import parse_condition
from tests.jobs.test_jsonl_decoder import run
from tests.jobs.test_pipeline import base

SCHEMA = {
    "device_id": "string",
    "ts": "timestamp",
    "status": "string",
    "country": "string",
    "amount": "long",
    "price": "double",
    "ok": "boolean",
}


def pipeline(**aggregates):
    return pipeline_from_dict(base(source={"path": "in", "schema": SCHEMA}, aggregates=aggregates))


def test_a_filtered_aggregate_has_its_inner_aggregates_type_and_carries_only_its_flag():
    p = pipeline(
        errors="count() filter (status = 'error')",
        de="sum(amount) FILTER (WHERE country = 'de' and ok = true)",
        top="max(price) filter (status = 'error')",
    )
    assert p.aggregate_types == {"errors": "long", "de": "long", "top": "double"}
    errors, de = (parse_condition(t) for t in ("status = 'error'", "country = 'de' and ok = true"))
    assert p.conditions == (errors, de)  # distinct: computed once each
    assert p.value_columns == ("status", "amount", "country", "ok", "price")
    assert p.carried_columns == (errors.flag, "amount", de.flag, "price")
    assert p.carried_type(errors.flag) == "boolean"
    assert str(p.aggregates[1].fn) == "sum(amount) filter (country = 'de' and ok = true)"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("count() filter (nope = 'x')", "column 'nope' is not in source.schema"),
        ("count() filter (amount = 'x')", "compares column 'amount' (long) with a text literal"),
        ("count() filter (status in ('a', 1))", "compares column 'status' (string) with a number"),
        ("count() filter (ok = 1)", "compares column 'ok' (boolean) with a number literal"),
        ("count() filter (ts > '2024-01-01')", "reads column 'ts' (timestamp): not supported"),
        ("sum(status) filter (ok = true)", "sum() needs a numeric column"),
        ("count() filter (status = )", "expected a literal"),
    ],
)
def test_the_configuration_refuses_a_bad_filter_naming_the_aggregate(text, fragment):
    with pytest.raises(PipelineConfigError) as e:
        pipeline(x=text).aggregate_types  # noqa: B018 (the types are checked when asked)
    assert "aggregates.x" in str(e.value) and fragment in str(e.value)


def test_the_decoder_tags_each_record_with_its_conditions_flags():
    from jobs.sources.files.landing import jsonl_decoder

    p = pipeline(
        errors="count() filter (status = 'error' or amount > 3)",
        de="sum(amount) filter (country = 'de')",
    )
    dec = jsonl_decoder(p)
    assert dec is not None
    records = [
        {"status": "error", "country": "de", "amount": 1},
        {"status": None, "country": "fr", "amount": 5},
        {"status": "ok", "country": None, "amount": None},
        {"status": None, "country": "de"},
    ]
    lines = [
        json.dumps({"device_id": "d", "ts": f"2024-01-01T00:00:0{i}Z", **r})
        for i, r in enumerate(records)
    ]
    rows, rejected, _ = run(dec, lines)
    assert not rejected
    rows.sort(key=lambda r: r["ts_us"])
    for record, row in zip(records, rows, strict=True):
        for c in p.conditions:
            assert row[c.flag] is c.evaluate(record)
        assert "status" not in row and "country" not in row  # only the flags travel


def test_a_filtered_built_in_stays_on_the_columnar_path():
    from jobs.driver.plan import operator_config
    from panes.engines import EngineKind

    p = pipeline(
        errors="count() filter (status = 'error')",
        de="sum(amount) filter (country = 'de')",
        top="max(amount) filter (ok = true)",
    )
    assert operator_config(p).engines().kind is EngineKind.COLUMNAR
    listed = pipeline(names="to_list(status) filter (ok = true)")
    assert operator_config(listed).engines().kind is EngineKind.PER_ELEMENT


def test_a_filtered_aggregate_is_saved_as_its_text_and_loads_back(tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.config.save import save_pipeline

    p = pipeline(quoted="count() filter (status in ('it''s', 'a\\b') or not ok = true)")
    path = save_pipeline(p, tmp_path / "p.toml")
    assert load_pipeline(path).aggregates == p.aggregates
