"""``decimal(p,s)`` and ``date`` columns end to end: JSON lines (numbers and strings) and a Delta
table read exactly, sums exact where doubles drift, a value that does not fit its decimal or is
not a date rejected with its reason (never rounded), and ``verify`` (DuckDB's own reading and
exact sum) agreeing with the view."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from tests.spark.support import put

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)
AGGREGATES = {
    "total": "sum(amount)",
    "lo": "min(amount)",
    "hi": "max(amount)",
    "n": "count()",
    "first": "min(day)",
    "last": "max(day)",
}


def _ts(minute: int) -> str:
    return (T0 + dt.timedelta(minutes=minute)).isoformat()


def test_decimal_and_date_columns_of_json_lines_are_exact(spark, tmp_path):
    """1000 x 0.10 (half JSON numbers, half strings) sum to 100.00 exactly (doubles give
    99.9999999999986); three 16-digit values sum beyond decimal(18,2) into the sum's
    decimal(38,2); 1.234 (a third decimal place), "abc" and the date 2024-1-2 are rejected with
    their reasons; verify agrees."""
    from deltalake import DeltaTable

    from jobs import api
    from jobs.config.load import pipeline_from_dict

    landing = tmp_path / "landing"
    small = [
        {"user": "u", "ts": _ts(i % 50), "amount": 0.1 if i % 2 else "0.10", "day": "2024-06-01"}
        for i in range(1000)
    ]
    lines = [json.dumps(x) for x in small]
    lines += [
        json.dumps({"user": "v", "ts": _ts(1), "amount": "9999999999999999.99", "day": d})
        for d in ("2024-05-30", "2024-06-02", "2024-05-31")
    ]
    at = _ts(2)
    bad = [  # as written: JSON's 1.234 and 1.00, not Python's reading of them
        f'{{"user": "v", "ts": "{at}", "amount": 1.234, "day": "2024-06-01"}}',
        f'{{"user": "v", "ts": "{at}", "amount": "abc", "day": "2024-06-01"}}',
        f'{{"user": "v", "ts": "{at}", "amount": 1.00, "day": "2024-6-1"}}',
    ]
    put(landing, "a.jsonl", lines + bad)
    pipeline = pipeline_from_dict(
        {
            "name": "money",
            "lake": str(tmp_path / "lake"),
            "keys": ["user"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "source": {
                "path": str(landing),
                "schema": {
                    "user": "string",
                    "ts": "timestamp",
                    "amount": "decimal(18,2)",
                    "day": "date",
                },
            },
            "aggregates": AGGREGATES,
            "state_buckets": 4,
        }
    )
    assert pipeline.aggregate_types["total"] == "decimal(38,2)"
    api.run(pipeline, spark=spark, drain=True, progress=None)
    view = {
        r["user"]: r
        for r in DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    }
    u, v = view["u"], view["v"]
    assert (u["total"], u["lo"], u["hi"], u["n"]) == (
        Decimal("100.00"),
        Decimal("0.10"),
        Decimal("0.10"),
        1000,
    )
    assert sum([0.1] * 1000) != 100.0  # what a double sum would have written
    assert v["total"] == Decimal("29999999999999999.97")  # beyond decimal(18,2): exact
    assert (v["first"], v["last"]) == (dt.date(2024, 5, 30), dt.date(2024, 6, 2))
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    reasons = {r["raw"]: r["reason"] for r in rejected}
    assert reasons == {
        bad[0]: "unparseable value (amount)",
        bad[1]: "unparseable value (amount)",
        bad[2]: "unparseable value (day)",
    }
    report = api.verify(pipeline)
    assert report.ok, str(report)
    # panestore query's DuckDB: DECIMAL and DATE columns, an exact DECIMAL sum over the view
    from jobs.config.sink_spec import view_spec
    from sinks.presentation.duck import connect

    con = connect(view_spec(pipeline))
    try:
        got = con.sql(
            "SELECT sum(total), typeof(sum(total)), max(last), typeof(max(last)) FROM current"
        ).fetchone()
    finally:
        con.close()
    assert got == (Decimal("30000000000000099.97"), "DECIMAL(38,2)", dt.date(2024, 6, 2), "DATE")


def test_decimal_and_date_columns_of_a_delta_table(spark, tmp_path):
    """A Delta table's decimal(10,2) column declared decimal(18,2) and its date column: the
    window's exact sum and its dates; a decimal(12,4) table's 1.2345 would not fit and is not
    read here (the cast back check,
    jobs.executor.record_rules.SparkRecords.typed)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from jobs import api
    from panes import FixedWindows

    table = tmp_path / "bronze"
    at = [T0 + dt.timedelta(minutes=m) for m in (1, 2, 3)]
    write_deltalake(
        table,
        pa.table(
            {
                "user": ["u", "u", "u"],
                "ts": pa.array(at, pa.timestamp("us", "UTC")),
                "amount": pa.array(
                    [Decimal("0.10"), Decimal("0.20"), Decimal("99999999.99")],
                    pa.decimal128(10, 2),
                ),
                "day": pa.array([dt.date(2024, 6, 3), dt.date(2024, 1, 1), None]),
            }
        ),
    )
    pipeline = api.define(
        "ledger",
        source=api.delta_source(
            table,
            schema={"user": "string", "ts": "timestamp", "amount": "decimal(18,2)", "day": "date"},
        ),
        lake=str(tmp_path / "lake"),
        keys="user",
        event_time="ts",
        window=FixedWindows(3_600_000_000),
        aggregates={**AGGREGATES, "avg": "mean(amount)"},
        state_buckets=4,
    )
    api.run(pipeline, spark=spark, drain=True, progress=None)
    (row,) = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    assert row["total"] == Decimal("100000000.29")
    assert (row["lo"], row["hi"], row["n"]) == (Decimal("0.10"), Decimal("99999999.99"), 3)
    assert (row["first"], row["last"]) == (dt.date(2024, 1, 1), dt.date(2024, 6, 3))
    assert row["avg"] == float(Decimal("100000000.29") / 3)
    report = api.verify(pipeline)
    assert report.ok, str(report)


def test_a_json_numbers_digits_are_read_as_written_or_refused(spark, tmp_path):
    """The text Spark's JSON-lines path gives a decimal column (from_json would give a double's
    text: 1.2345678901234568E16), and what the plan's tagging makes of it: digits as written,
    an exponent form or more than 38 digits refused, never rounded."""
    from pyspark.sql import functions as F

    from jobs.config.load import pipeline_from_dict
    from jobs.executor.record_rules import SparkRecords
    from jobs.sources.files.landing import RAW, _decimal_texts
    from jobs.sources.shape import record_shape

    pipeline = pipeline_from_dict(
        {
            "name": "digits",
            "lake": str(tmp_path / "lake"),
            "keys": ["user"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "aggregates": {"total": "sum(amount)"},
            "source": {
                "path": str(tmp_path / "landing"),
                "schema": {"user": "string", "ts": "timestamp", "amount": "decimal(20,2)"},
            },
        }
    )
    cases = [
        ('{"amount": 123456789012345678.91}', Decimal("123456789012345678.91")),
        ('{"amount": "0.10"}', Decimal("0.10")),
        ('{"amount": 7}', Decimal("7.00")),
        ('{"amount": 1.234}', None),  # a third decimal place
        ('{"amount": 1e2}', None),  # exponent form
        ('{"amount": 1.' + "0" * 40 + "}", None),  # more than 38 digits
        ('{"amount": true}', None),
        ('{"amount": null}', None),
        ("{}", None),
    ]
    raw = spark.createDataFrame([(line,) for line, _ in cases], [RAW])
    texts = raw.select(RAW, _decimal_texts(pipeline)["amount"].alias("amount"))
    typed = SparkRecords(record_shape(pipeline), dict(texts.dtypes)).typed("amount")
    got = texts.select(RAW, typed.alias("v")).collect()
    assert {r[RAW]: r["v"] for r in got} == dict(cases)
    held = texts.where(F.col("amount").isNotNull()).count()
    assert held == 7  # a line with a value holds text (its reason follows); null and absent: none
