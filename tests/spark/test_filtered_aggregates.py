"""Filtered aggregates through the job: each condition is computed where records are tagged (the
JSON-lines decoder in Arrow; Spark SQL for CSV), the view holds the hand-counted values, and
``verify`` agrees, computing the conditions itself in DuckDB over the raw events."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.panes.test_conditions import conditions, records
from tests.spark.support import T0, iso, put

pytestmark = pytest.mark.spark

RECORDS = [  # device, seconds into the hour, status, country, amount
    ("d1", 10, "error", "de", 5),
    ("d1", 20, "ok", "de", 3),
    ("d1", 30, None, "de", None),  # status unknown: neither an error nor not one
    ("d1", 40, "error", "fr", 7),
    ("d1", 4000, "error", None, 2),  # the next hour
    ("d2", 50, "it's", "de", 1),  # a quote in the text, in Spark SQL and DuckDB
]
AGGREGATES = {
    "errors": "count() filter (status = 'error')",
    "de": "sum(amount) FILTER (WHERE country = 'de')",
    "not_errors": "count() filter (not status = 'error')",
    "quoted": "count() filter (status in ('it''s', 'x\\y'))",
    "all": "count()",
}
EXPECTED = {  # counted by hand from RECORDS
    ("d1", 0): {"errors": 2, "de": 8, "not_errors": 1, "quoted": 0, "all": 4},
    ("d1", 3600): {"errors": 1, "de": 0, "not_errors": 0, "quoted": 0, "all": 1},
    ("d2", 0): {"errors": 0, "de": 1, "not_errors": 1, "quoted": 1, "all": 1},
}


def _line(fmt: str, device: str, at: int, status, country, amount) -> str:
    if fmt == "jsonl":
        record = {"device_id": device, "ts": iso(at), "status": status}
        record.update({"country": country, "amount": amount})
        return json.dumps(record)
    quoted = f'"{status}"' if status is not None else ""
    return ",".join([device, iso(at), quoted, country or "", "" if amount is None else str(amount)])


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_filtered_aggregates_reach_the_view_and_verify(spark, tmp_path, fmt):
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.load import pipeline_from_dict
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from jobs.sources.files.landing import jsonl_decoder
    from sinks.verification.view_check import verify

    pipeline = pipeline_from_dict(
        {
            "name": "filtered",
            "lake": str(tmp_path / "lake"),
            "keys": ["device_id"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
            "accumulation_mode": "accumulating",
            "source": {
                "format": fmt,
                "path": str(tmp_path / "landing"),
                "schema": {
                    "device_id": "string",
                    "ts": "timestamp",
                    "status": "string",
                    "country": "string",
                    "amount": "long",
                },
            },
            "aggregates": AGGREGATES,
            "state_buckets": 4,
        }
    )
    # the decoder tags JSON lines; Spark SQL tags CSV
    assert (jsonl_decoder(pipeline) is not None) == (fmt == "jsonl")
    put(tmp_path / "landing", f"a.{fmt}", [_line(fmt, *r) for r in RECORDS[:3]])
    run(pipeline, spark=spark, progress=None)
    put(tmp_path / "landing", f"b.{fmt}", [_line(fmt, *r) for r in RECORDS[3:]])
    run(pipeline, spark=spark, drain=True, progress=None)

    assert DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().num_rows == 0
    materialize(pipeline)
    report = verify(view_spec(pipeline), elements=load_source_elements(pipeline))
    assert report.ok, str(report)
    rows = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    got = {
        (r["device_id"], r["window_start_us"] // 1_000_000 - T0): {n: r[n] for n in AGGREGATES}
        for r in rows
    }
    assert got == EXPECTED


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(conditions, min_size=20, max_size=20), st.lists(records, min_size=10, max_size=10))
def test_spark_sql_renders_conditions_as_the_model_evaluates_them(spark, many, rows):
    """The rendering the Spark SQL tagger uses agrees with the model's evaluation, nulls,
    quotes and backslashes included (one query per example)."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(rows, "s string, n bigint, x double, b boolean")
    flags = [F.expr(c.sql("spark")).alias(f"c{i}") for i, c in enumerate(many)]
    got = [[r[f"c{i}"] for i in range(len(many))] for r in frame.select(*flags).collect()]
    assert got == [[c.evaluate(r) for c in many] for r in rows]
