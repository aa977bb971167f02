"""An upstream's sketch columns offered by the ``pane_log`` source: their exact struct types (from
the upstream's pane log or its configuration), their bytes carried intact to the operator (Arrow
blobs) with their weights, and the refusals of aggregates that cannot read them."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from jobs.config.load import load_pipeline
from jobs.config.values import PipelineConfigError
from jobs.executor.operator_input import (
    TS_US,
    WEIGHT,
    InputSchema,
    blob_of,
    elements_by_key,
    input_table,
    row_expression,
)
from jobs.reading.columns import decode_columns, encode_columns, spark_columns
from jobs.reading.pane_log.upstream import (
    WEIGHT as UPSTREAM_WEIGHT,
)
from jobs.reading.pane_log.upstream import (
    final_view_elements,
    latest_version,
    pane_log_columns,
    read_elements,
)
from panes import AccumulationMode, FixedWindows, Retracted, combiners
from panes.sketches import MergeSketches
from sinks.fold.materializer import Materializer
from sinks.lake.column_types import arrow_type
from tests.sinks.lakes import S, chunked, random_run, write_batches

HLL = "struct<estimate: long, sketch: binary>"
KLL = "struct<quantiles: list<double>, sketch: binary>"
RETRACTING = AccumulationMode.ACCUMULATING_AND_RETRACTING


@pytest.fixture
def sketches(tmp_path):
    """A retracting run of hourly ``approx_count_distinct`` panes written to a pane log."""
    for seed in range(1, 50):
        run = random_run(
            seed,
            str(tmp_path / f"lake{seed}"),
            RETRACTING,
            FixedWindows(10 * S),
            False,
            aggregates={"users": (combiners.approx_count_distinct(), arrow_type(HLL))},
        )
        if any(p.is_retraction for p in run.panes):
            break
    else:
        raise AssertionError("no run with retractions")
    write_batches(run, chunked(run, random.Random(seed)))
    Materializer(run.spec).run()
    return run


def test_a_pane_log_offers_its_sketch_column_and_the_operator_receives_its_bytes(sketches):
    path = sketches.spec.table_path("panes")
    offered = pane_log_columns(path)
    assert offered.values == (("users", HLL),)
    columns = [("user", pa.string()), ("users", arrow_type(HLL))]
    rows = read_elements(path, "p", -1, latest_version(path), columns)
    written = Counter(
        (p.value["users"]["sketch"], -1 if p.is_retraction else 1) for p in sketches.panes
    )
    read = rows.select(["users", UPSTREAM_WEIGHT]).to_pylist()
    assert Counter((r["users"]["sketch"], r[UPSTREAM_WEIGHT]) for r in read) == written

    # the operator's packed encoding: one Arrow blob, read back as weighted elements per key
    schema = InputSchema(("user",), ("users",), tuple(columns), weighted=True)
    elements = rows.rename_columns(["user", "users", TS_US, "wm", WEIGHT])
    table = input_table([blob_of(elements.select(list(schema.element_columns)))], [], schema)
    merged = MergeSketches(combiners.approx_count_distinct("users"))
    held = {}
    for key, values in elements_by_key(table, schema).items():
        acc = merged.create()
        for value, _ in values:  # a retraction of a sketch not held would raise
            if isinstance(value, Retracted):
                acc = merged.retract(acc, value.value)
            else:
                acc = merged.add_all(acc, [value])
        held[key] = dict(acc)
    final = final_view_elements(sketches.spec.table_path("current"), ["user", "users"])
    expected: dict = {}
    for r in final.to_pylist():
        counts = expected.setdefault(r["user"], {})
        counts[r["users"]["sketch"]] = counts.get(r["users"]["sketch"], 0) + 1
    assert {k: v for k, v in held.items() if v} == expected  # the final windows' sketches


UPSTREAM = """
name = "hourly_users"
lake = "{lake}"
keys = ["country"]
event_time = "ts"
window = "FixedWindows(1h)"
accumulation_mode = "{mode}"
[source]
path = "{landing}"
schema = {{ user = "string", country = "string", ts = "timestamp", ms = "double" }}
[aggregates]
users = "approx_count_distinct(user)"
ms = "approx_quantiles(ms, [0.5, 0.9])"
top = "top_k(user, 3)"
all_ms = "to_list(ms)"
"""

DOWNSTREAM = """
name = "daily_users"
lake = "{lake}"
keys = ["country"]
window = "FixedWindows(1d)"
accumulation_mode = "accumulating_and_retracting"
[source]
format = "pane_log"
path = "{upstream}"
[aggregates]
{aggregates}
"""


def configs(tmp_path, aggregates, mode="accumulating_and_retracting"):
    up = tmp_path / "up.toml"
    up.write_text(UPSTREAM.format(lake=tmp_path / "up", landing=tmp_path / "in", mode=mode))
    down = tmp_path / "down.toml"
    down.write_text(DOWNSTREAM.format(lake=tmp_path / "down", upstream=up, aggregates=aggregates))
    return down


def test_a_downstream_configuration_reads_the_upstreams_sketch_columns(tmp_path):
    down = load_pipeline(
        configs(
            tmp_path,
            'users = "approx_count_distinct(merge(users))"\n'
            'p50 = "approx_percentile(merge(ms), 0.5)"\n'
            'qs = "approx_quantiles(merge(ms), [0.25, 0.75])"',
        )
    )
    assert down.source.types == {
        "country": "string",
        "users": HLL,
        "ms": KLL,
        "top": "struct<items: list<struct<item: string, count: long>>, sketch: binary>",
    }  # the list aggregate is not offered
    assert down.aggregate_types == {
        "users": HLL,
        "p50": "struct<quantile: double, sketch: binary>",
        "qs": KLL,
    }
    columns = [("country", "string"), ("users", HLL), ("ms", KLL)]
    assert decode_columns(encode_columns(columns)) == columns  # the data source's option
    assert spark_columns(columns)[1:] == [
        "`users` struct<`estimate`: bigint, `sketch`: binary>",
        "`ms` struct<`quantiles`: array<double>, `sketch`: binary>",
    ]


@pytest.mark.parametrize(
    ("aggregate", "says"),
    [
        ('users = "approx_count_distinct(users)"', "only merge(users) reads it"),
        ('n = "sum(users)"', "only merge(users) reads it"),
        ('n = "first(ms)"', "only merge(ms) reads it"),
        ('n = "approx_count_distinct(merge(top))"', "merges sketches of a column of type"),
        ('n = "approx_percentile(merge(users), 0.5)"', "merges sketches of a column of type"),
        ('n = "approx_count_distinct(country)"', "writes retractions"),
    ],
)
def test_check_refuses_an_aggregate_that_cannot_read_the_sketches_naming_it(
    tmp_path, capsys, aggregate, says
):
    from jobs.cli.commands import main

    conf = configs(tmp_path, aggregate)
    with pytest.raises(PipelineConfigError) as e:
        load_pipeline(conf)
    assert e.value.field == f"aggregates.{aggregate.split(' ')[0]}" and says in e.value.message
    assert main(["check", str(conf)]) == 2
    assert f"aggregates.{aggregate.split(' ')[0]}: " in capsys.readouterr().err


def test_a_plain_sketch_over_a_non_retracting_upstream_is_accepted(tmp_path):
    down = load_pipeline(configs(tmp_path, 'n = "approx_count_distinct(country)"', "accumulating"))
    assert not down.weighted


def test_the_row_encoding_refuses_a_binary_column():
    with pytest.raises(ValueError, match="cannot carry binary column 'users'"):
        row_expression({"users": None}, {"users": "struct<estimate:bigint,sketch:binary>"})  # type: ignore[dict-item]
