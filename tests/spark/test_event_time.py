"""Spark reads event times as the Arrow reading does: the corpus of ``tests/jobs/test_event_time``
through :func:`jobs.config.event_time.spark_event_time` gives every entry the same µs or
rejection."""

from __future__ import annotations

import pytest

from tests.jobs.test_event_time import (
    EPOCH_MS,
    OUT_OF_RANGE,
    TEXT,
    UNREADABLE,
    as_text,
    outcome,
    pipeline,
)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_spark_reads_the_corpus_as_arrow_does(spark, tmp_path, zone):
    """In the job's UTC session and in a caller's session of another time zone alike: text
    without a zone is UTC (docs/sources.md), never the session's."""
    from pyspark.sql import functions as F

    from jobs.config.event_time import spark_event_time

    was = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        _corpus_outcomes(spark, tmp_path, spark_event_time, F)
    finally:
        spark.conf.set("spark.sql.session.timeZone", was)


def _corpus_outcomes(spark, tmp_path, spark_event_time, F) -> None:
    for kind, corpus in (("text", TEXT), ("epoch", EPOCH_MS)):
        # the job's parsers hand the event time over as text
        # (jobs.sources.files.landing.read_schema_ddl)
        df = spark.createDataFrame([(as_text(raw),) for raw, _ in corpus], "ts string")
        ts, _ = spark_event_time(pipeline(tmp_path, kind).event_time_column, df)
        got = [r[0] for r in df.select(F.unix_micros(ts)).collect()]
        outcomes = [outcome(us) for us in got]
        expected = [e for _, e in corpus]
        assert outcomes == expected, [
            (raw, o, e) for (raw, e), o in zip(corpus, outcomes, strict=True) if o != e
        ]
        assert UNREADABLE in outcomes and OUT_OF_RANGE in outcomes
