"""Event time: how a record's event-time column becomes a timestamp, in µs since 1970 UTC.

The rule: a ``timestamp`` column is taken as it is; an integral column counts
``source.epoch_unit`` (:data:`EPOCH_UNITS`) since 1970-01-01 UTC; text is trimmed and read as
Spark's ``CAST(text AS TIMESTAMP)`` reads it (a time without a zone in the session time zone).
A record whose event time is missing or unreadable is rejected, never dropped silently. With
``watermark.policy = "ingestion_time"`` the batch's timestamp is the event time.

The job applies the rule in Spark (:func:`spark_event_time`: the reference). The JSON-lines
decoder of :mod:`jobs.jsonl_decoder` applies it in Arrow (:func:`event_time_us`) to the forms
where Arrow's reading provably equals Spark's, and leaves every other record to Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sinks.lake_format import MAX_TIMESTAMP_US, MIN_TIMESTAMP_US

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from jobs.pipeline import Pipeline

EPOCH_UNITS = {"s": 1_000_000, "ms": 1_000, "us": 1}
"""``source.epoch_unit`` -> its length in µs."""

# The event times the job takes: Spark's timestamp range, ending before the drain sentinel (the
# last millisecond: an event at or after it would move the watermark to the end of time and
# close every window). Outside, a record is rejected.
MIN_EVENT_TIME_US = MIN_TIMESTAMP_US
MAX_EVENT_TIME_US = MAX_TIMESTAMP_US // 1000 * 1000 - 1
EVENT_TIME_RANGE = "accepted from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.998999Z"

# Event times read in Arrow lie in years 1000..9999 and in the accepted range; the others are
# Spark's call.
MIN_US, MAX_US = -30_610_224_000_000_000, MAX_EVENT_TIME_US
_DATE = (
    r"[1-9]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"[T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
)
ISO_TIMESTAMP = rf"^{_DATE}(Z|[+-](0\d|1[0-7]):[0-5]\d)?$"
"""The text forms read in Arrow: ``YYYY-MM-DD``, ``T`` or space, ``HH:MM:SS``, up to 6 fraction
digits, then ``Z``, ``+HH:MM`` / ``-HH:MM`` or (only where the session is UTC) no zone."""


def spark_event_time(pipeline: Pipeline, df: DataFrame) -> tuple[Column, Column | None]:
    """(the event time of ``df``'s rows as a Spark timestamp column, the raw column or None
    for ingestion time); the converted column is null where the raw one is unreadable."""
    from pyspark.sql import functions as F

    if pipeline.ingestion_time:
        return F.current_timestamp(), None
    col = pipeline.event_time
    raw = F.col(col)
    dtype = dict(df.dtypes)[col]
    if dtype == "timestamp":
        return raw, raw
    if pipeline.source.types[col] != "timestamp":  # an integral epoch (Pipeline checks it)
        num = raw.try_cast("bigint") if dtype == "string" else raw.cast("bigint")
        # try_multiply: an epoch too large for µs is unreadable, not a failed batch
        micros = F.try_multiply(num, F.lit(EPOCH_UNITS[pipeline.source.epoch_unit]))
        return F.timestamp_micros(micros), raw
    text = F.trim(raw.cast("string"))
    return text.try_cast("timestamp"), raw


def event_time_us(
    values: pa.Array | pa.ChunkedArray, *, epoch_us: int | None, naive_is_utc: bool
) -> tuple[pa.Array, pa.Array]:
    """Raw event times in Arrow -> (mask of those read here, the event time in µs: int64,
    garbage where the mask is false).

    ``values`` are epoch integers in units of ``epoch_us`` µs, or (``epoch_us`` None) text in
    an :data:`ISO_TIMESTAMP` form of a real date; ``naive_is_utc``: Spark's session time zone is
    UTC, so text without a zone may be read here. The mask is false for everything else.
    """
    if epoch_us is not None:
        lo, hi = -(-MIN_US // epoch_us), MAX_US // epoch_us
        inside = pc.and_(pc.greater_equal(values, lo), pc.less_equal(values, hi))
        us = pc.multiply(pc.fill_null(values, 0), epoch_us)
        return flat(pc.fill_null(inside, False)), flat(us)
    n = len(values)
    ts = pa.array([0] * n, pa.int64())
    iso = pc.fill_null(pc.match_substring_regex(values, ISO_TIMESTAMP), False)
    # where ``iso`` holds, the string ends in Z or a +HH:MM / -HH:MM zone, or has no zone
    text = pc.if_else(iso, values, "2000-01-01T00:00:00")
    sign = pc.utf8_slice_codeunits(text, -6, -5)
    zoned = pc.or_(pc.ends_with(text, "Z"), pc.is_in(sign, pa.array(["+", "-"])))
    real = pc.and_(iso, _real_dates(text))
    forms = [(pc.and_(real, zoned), pa.timestamp("us", "UTC"), "2000-01-01T00:00:00Z")]
    if naive_is_utc:
        forms.append((pc.and_(real, pc.invert(zoned)), pa.timestamp("us"), "2000-01-01T00:00:00"))
    matched = pa.array([False] * n)
    for mask, arrow_type, dummy in forms:
        try:  # should not fail (dates are real); if it does, Spark reads these values
            cast = pc.cast(pc.if_else(mask, text, dummy), arrow_type)
        except (pa.ArrowInvalid, ValueError):
            continue
        ts = pc.if_else(mask, pc.cast(cast, pa.int64()), ts)
        matched = pc.or_(matched, mask)
    matched = pc.and_(matched, pc.less_equal(ts, MAX_US))  # beyond: Spark rejects it
    return flat(matched), flat(ts)


def _real_dates(text: Any) -> pa.Array:
    """Mask of the strings whose first 10 characters, ``YYYY-MM-DD`` digits by precondition,
    are a real date (not 2023-02-29, 2024-04-31)."""

    def part(lo: int, hi: int) -> Any:
        return pc.utf8_slice_codeunits(text, lo, hi).cast(pa.int64()).to_numpy()

    year, month, day = part(0, 4), part(5, 7), part(8, 10)
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[month] + (
        (month == 2) & leap
    )
    return pa.array((day >= 1) & (day <= days))


def flat(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array."""
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
