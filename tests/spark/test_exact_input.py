"""What a source holds becomes an element only as it is: a value that does not convert exactly to
the schema's type rejects its record with a reason, from a Delta table as from a file, and text
event times without a zone are UTC, whatever the caller's session time zone says."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.spark.support import put

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)


def test_doubles_of_a_delta_table_declared_long_are_rejected_not_truncated(spark, tmp_path):
    """A Delta column of doubles declared ``long``: 1.5 and 2.7 were truncated (the window's sum
    was 1 + 2 + 2 + 3 = 8, nothing rejected, exit 0); now they are rejected naming the column,
    and 2.0 and 3.0, which are exactly longs, count."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from jobs import api
    from panes import FixedWindows

    table = tmp_path / "bronze"
    at = [T0 + dt.timedelta(minutes=m) for m in (1, 2, 3, 4)]
    write_deltalake(
        table,
        pa.table(
            {
                "user": ["u", "u", "u", "u"],
                "ts": pa.array(at, pa.timestamp("us", "UTC")),
                "amount": [1.5, 2.7, 2.0, 3.0],
            }
        ),
    )
    pipeline = api.define(
        "exact",
        source=api.delta_source(
            table, schema={"user": "string", "ts": "timestamp", "amount": "long"}
        ),
        lake=str(tmp_path / "lake"),
        keys="user",
        event_time="ts",
        window=FixedWindows(3_600_000_000),
        aggregates={"total": "sum(amount)", "n": "count()"},
        state_buckets=4,
    )
    api.run(pipeline, spark=spark, drain=True, progress=None)
    view = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    assert [(r["total"], r["n"]) for r in view] == [(5, 2)]
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    assert sorted(json.loads(r["raw"])["amount"] for r in rejected) == [1.5, 2.7]
    assert {r["reason"] for r in rejected} == {
        "value not exactly a long (amount: a double that does not convert exactly)"
    }
    assert api.verify(pipeline).ok


def test_text_event_times_without_a_zone_are_utc_in_a_session_that_is_not(spark, tmp_path):
    """The caller's own session in America/New_York: 09:00 without a zone landed in the 13:00
    UTC window (the docs say UTC, and verify read it as UTC and failed). Now every path reads
    09:00 as 09:00 UTC: a user's DataFrame (Spark's cast), a landing file (the JSON-lines
    decoder), a timestamp value column; verify agrees."""
    from deltalake import DeltaTable

    from jobs import api
    from jobs.config.load import pipeline_from_dict
    from panes import FixedWindows

    landing = tmp_path / "landing"
    lines = [
        {"user": "u", "ts": "2024-06-01T09:00:00", "seen": "2024-06-01 09:30", "amount": 1.0},
        {"user": "u", "ts": "2024-06-01T09:10:00Z", "seen": "2024-06-01T09:40Z", "amount": 2.0},
        {"user": "v", "ts": "2024-06-01T05:20:00-04:00", "seen": "2024-06-01", "amount": 4.0},
    ]
    put(landing, "a.jsonl", [json.dumps(x) for x in lines])
    schema = "user string, ts string, seen string, amount double"
    types = {"user": "string", "ts": "timestamp", "seen": "timestamp", "amount": "double"}
    aggregates = {"total": "sum(amount)", "last_seen": "max(seen)"}
    was = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        in_code = api.define(
            "zones",
            source=api.dataframe_source(types),
            lake=str(tmp_path / "lake-code"),
            keys="user",
            event_time="ts",
            window=FixedWindows(3_600_000_000),
            aggregates=aggregates,
            state_buckets=4,
        )
        api.run(
            in_code, spark.readStream.schema(schema).json(str(landing)), drain=True, progress=None
        )
        report = api.verify(in_code, spark.read.schema(schema).json(str(landing)))
        assert report.ok, str(report)
        in_files = pipeline_from_dict(
            {
                "name": "zones",
                "lake": str(tmp_path / "lake-files"),
                "keys": ["user"],
                "event_time": "ts",
                "window": "FixedWindows(1h)",
                "source": {"path": str(landing), "schema": types},
                "aggregates": aggregates,
                "state_buckets": 4,
            }
        )
        api.run(in_files, spark=spark, drain=True, progress=None)
        assert api.verify(in_files).ok
    finally:
        spark.conf.set("spark.sql.session.timeZone", was)
    nine = T0 + dt.timedelta(hours=9)
    for p in (in_code, in_files):
        rows = DeltaTable(p.table_path("current")).to_pyarrow_table().to_pylist()
        got = {(r["user"], r["window_start"], r["total"], r["last_seen"]) for r in rows}
        assert got == {
            ("u", nine, 3.0, nine + dt.timedelta(minutes=40)),
            ("v", nine, 4.0, T0),
        }, p.name
