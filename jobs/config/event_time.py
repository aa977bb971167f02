"""Event time: how a record's event-time column becomes a timestamp, in µs since 1970 UTC.

The accepted forms are one table, :data:`FORMS`:

=================  ==========================================================================
a timestamp        a ``timestamp`` column (Parquet): taken as it is
an epoch           an integer (or, in text, ``[+-]digits``) counting ``source.epoch_unit``
                   (:data:`EPOCH_UNITS`) since 1970-01-01 UTC; too large for µs: unreadable
ISO-8601 text      ``YYYY-MM-DD`` (4 or 5 year digits), optionally ``T`` or a space and
                   ``HH:MM``, ``HH:MM:SS`` or ``HH:MM:SS.f`` (up to 6 fraction digits), then
                   optionally a zone: ``Z``, ``+HH:MM``, ``+HHMM`` or ``+HH`` (or ``-``; hours
                   00-17); a date alone is its midnight; a real date (not 2023-02-29);
                   without a zone, UTC: whatever the Spark session's time zone is
=================  ==========================================================================

Text is trimmed of spaces first. Anything else is unreadable, and the record is rejected
(``unparseable event time``), never dropped silently; a readable time outside
:data:`EVENT_TIME_RANGE` is rejected as out of range. With ``watermark.policy = "ingestion_time"``
the batch's timestamp is the event time.

The job's readers derive from :data:`FORMS`, one per record: :func:`event_time_us` reads them
with Arrow in the JSON-lines decoder; :func:`spark_event_time` reads them in Spark for the records
Spark parses and tags: the same patterns gate Spark's own ``CAST`` (so Spark accepts no other
form), and ``tests/spark/test_event_time.py`` checks on a corpus that both give the same value or
the same rejection. ``panestore verify`` reads them with none of this code
(:func:`jobs.inspection.source_elements.event_time_sql`, DuckDB), so it checks the job's reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sinks.lake import MAX_TIMESTAMP_US, MIN_TIMESTAMP_US

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

EPOCH_UNITS = {"s": 1_000_000, "ms": 1_000, "us": 1}
"""``source.epoch_unit`` -> its length in µs."""

# The event times the job takes: Spark's timestamp range, ending before the drain sentinel (the
# last millisecond: an event at or after it would move the watermark to the end of time and
# close every window). Outside, a record is rejected.
MIN_EVENT_TIME_US = MIN_TIMESTAMP_US
MAX_EVENT_TIME_US = MAX_TIMESTAMP_US // 1000 * 1000 - 1
EVENT_TIME_RANGE = "accepted from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.998999Z"


@dataclass(frozen=True)
class Form:
    """One accepted text form: ``pattern`` with ``{name}`` for each named part of ``PARTS``."""

    name: str
    pattern: str


PARTS = {
    "year": r"\d{4,5}",
    "month": r"0[1-9]|1[0-2]",
    "day": r"0[1-9]|[12]\d|3[01]",
    "hour": r"[01]\d|2[0-3]",
    "minute": r"[0-5]\d",
    "second": r"[0-5]\d",
    "fraction": r"\d{1,6}",
    "sign": r"[+-]",
    "zone_hour": r"0\d|1[0-7]",
    "zone_minute": r"[0-5]\d",
    "utc": r"Z",
    "digits": r"[+-]?\d{1,19}",
}
"""The parts of the text forms (regular expressions both Java's and RE2's syntax read)."""
_TIME = "{hour}:{minute}(?::{second}(?:\\.{fraction})?)?"
_ZONE = "(?:{utc}|{sign}{zone_hour}(?::?{zone_minute})?)"
FORMS = (
    Form("ISO-8601", "^{year}-{month}-{day}(?:[T ]" + _TIME + _ZONE + "?)?\\z"),
    Form("epoch in text", "^{digits}\\z"),
)
"""The text forms: an ISO-8601 date-time, and (for an epoch column) an integer. (``\\z``: the
end of the text; Java's ``$`` would also match before a final line break.)"""
ISO, EPOCH_TEXT = FORMS


def form_regex(form: Form, named: bool = False) -> str:
    """``form``'s regular expression, its parts as ``(?P<name>...)`` groups if ``named`` (RE2)
    or as plain groups (Java's and RE2's syntax)."""
    return form.pattern.format(
        **{k: f"(?P<{k}>{v})" if named else f"(?:{v})" for k, v in PARTS.items()}
    )


# -- Arrow ------------------------------------------------------------------------------------


def event_time_us(values: pa.Array | pa.ChunkedArray, *, epoch_us: int | None) -> pa.Array:
    """Raw event times -> µs since 1970 UTC (int64), null where unreadable (see :data:`FORMS`).

    ``values``: a timestamp array (one without a zone: UTC wall time), integers or text counting
    ``epoch_us`` µs (an epoch column), or (``epoch_us`` None) ISO-8601 text.
    """
    values = flat(values)
    if pa.types.is_timestamp(values.type):
        return pc.cast(pc.cast(values, pa.timestamp("us", values.type.tz)), pa.int64())
    if epoch_us is not None:
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = epoch_text_units(pc.utf8_trim(values, " "))
        ints = pc.cast(values, pa.int64())
        numbers = pc.fill_null(ints, 0).to_numpy(zero_copy_only=False)
        # as Spark's try_multiply: the product must be an int64
        lo, hi = -(2**63 // epoch_us), (2**63 - 1) // epoch_us
        ok = pc.is_valid(ints).to_numpy(zero_copy_only=False) & (numbers >= lo) & (numbers <= hi)
        return pa.array(np.where(ok, numbers, 0) * epoch_us, pa.int64(), mask=~ok)
    return _iso_us(pc.utf8_trim(values, " "))


def epoch_text_units(text: pa.Array) -> pa.Array:
    """Text epochs -> int64, null unless :data:`EPOCH_TEXT` and within int64."""
    ok = pc.fill_null(pc.match_substring_regex(text, form_regex(EPOCH_TEXT)), False)
    signed = pc.replace_substring_regex(pc.if_else(ok, text, "0"), r"^\+", "")
    negative = pc.starts_with(signed, "-")
    digits = pc.utf8_ltrim(signed, "-")
    # 19 digits may exceed int64: compare as text with the largest magnitude
    largest = pc.if_else(negative, "9223372036854775808", "9223372036854775807")
    big = pc.and_(pc.equal(pc.utf8_length(digits), 19), pc.greater(digits, largest))
    ok = pc.and_(ok, pc.invert(big))
    return pc.if_else(ok, pc.cast(pc.if_else(ok, signed, "0"), pa.int64()), None)


def _iso_us(text: pa.Array) -> pa.Array:
    """ISO-8601 text -> µs (null where not :data:`ISO` or not a real date; no zone: UTC)."""
    zoned = _zoned_iso_us(text)
    return zoned if zoned is not None else _iso_parts_us(text)


def _zoned_iso_us(text: pa.Array) -> pa.Array | None:
    """The common case, fast: every text is :data:`ISO` with a zone and Arrow's own ISO-8601
    reading takes every one (it refuses dates that do not exist, and text without a zone);
    None otherwise, for :func:`_iso_parts_us` to read part by part."""
    if text.null_count or not pc.all(pc.match_substring_regex(text, form_regex(ISO))).as_py():
        return None
    try:
        return pc.cast(pc.cast(text, pa.timestamp("us", "UTC")), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _iso_parts_us(text: pa.Array) -> pa.Array:
    """:func:`_iso_us` from the parts of :data:`ISO`'s match."""
    parts = pc.extract_regex(text, form_regex(ISO, named=True))  # null where no match

    def number(name: str) -> np.ndarray:
        part = pc.struct_field(parts, name)
        part = pc.if_else(pc.equal(pc.fill_null(part, ""), ""), "0", part)
        return pc.cast(part, pa.int64()).to_numpy(zero_copy_only=False)

    matched = pc.is_valid(parts).to_numpy(zero_copy_only=False)
    year, month, day = number("year"), number("month"), number("day")
    fraction = pc.utf8_rpad(pc.fill_null(pc.struct_field(parts, "fraction"), ""), 6, "0")
    seconds = (
        _days_from_civil(year, np.where(matched, month, 1), day) * 86_400
        + number("hour") * 3600
        + number("minute") * 60
        + number("second")
    )
    us = seconds * 1_000_000 + pc.cast(fraction, pa.int64()).to_numpy(zero_copy_only=False)
    sign = pc.fill_null(pc.struct_field(parts, "sign"), "").to_numpy(zero_copy_only=False)
    offset = (number("zone_hour") * 3600 + number("zone_minute") * 60) * 1_000_000
    us -= np.where(sign == "-", -offset, offset)
    ok = matched & (day <= _days_in_month(year, np.where(matched, month, 1)))
    return pa.array(us, pa.int64(), mask=~ok)


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _days_in_month(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[month]
    return days + ((month == 2) & leap)


def accepted(us: pa.Array) -> pa.Array:
    """Mask of the event times (µs, null: unreadable) the job takes: readable and in range."""
    inside = pc.and_(pc.greater_equal(us, MIN_EVENT_TIME_US), pc.less_equal(us, MAX_EVENT_TIME_US))
    return pc.fill_null(inside, False)


def flat(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array."""
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


# -- Spark --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventTimeColumn:
    """Where a pipeline's records hold their event time: the column ``name``, declared a
    ``timestamp`` (``epoch_us`` None) or an integral epoch of ``epoch_us`` µs per unit."""

    name: str
    epoch_us: int | None = None


def spark_event_time(column: EventTimeColumn | None, df: DataFrame) -> tuple[Column, Column | None]:
    """(the event time of ``df``'s rows as a Spark timestamp column, the raw column or None
    for ingestion time: ``column`` None); the converted column is null where the raw one is
    unreadable: text not in :data:`FORMS`, an epoch too large for µs. The same instant whatever
    the session's time zone (:func:`spark_timestamp`)."""
    from pyspark.sql import functions as F

    if column is None:
        return F.current_timestamp(), None
    col = column.name
    raw = F.col(col)
    dtype = dict(df.dtypes)[col]
    if column.epoch_us is None or dtype.startswith("timestamp"):
        return spark_timestamp(raw, dtype), raw
    if dtype == "string":  # an integral epoch
        text = F.trim(raw)
        num = F.when(text.rlike(form_regex(EPOCH_TEXT)), text.try_cast("bigint"))
    else:
        num = raw.cast("bigint")
    # try_multiply: an epoch too large for µs is unreadable, not a failed batch
    micros = F.try_multiply(num, F.lit(column.epoch_us))
    return F.timestamp_micros(micros), raw


_WALL_AND_ZONE = (
    r"^(.+[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)(?:Z|([+-])(\d{2})(?::?(\d{2}))?)?\z"
)
"""An :data:`ISO` text with a time: its wall time (group 1), then its zone's sign, hours and
minutes (groups 2-4; empty for ``Z`` or no zone)."""
_NAIVE_EPOCH = "1970-01-01 00:00:00"


def spark_timestamp(column: Column, dtype: str) -> Column:
    """``column``, of Spark type ``dtype``, as a timestamp: the same instant in every session,
    whatever its ``spark.sql.session.timeZone``. A ``timestamp`` is taken as it is; a
    ``timestamp_ntz`` and text without a zone are UTC wall time (Spark's own cast would read
    them in the session's zone); text is read only in the :data:`ISO` form (trimmed), with its
    zone where it has one; anything else is null."""
    from pyspark.sql import functions as F

    if dtype == "timestamp":
        return column
    if dtype == "timestamp_ntz":
        return _utc_wall_time(column)
    text = F.trim(column.cast("string"))

    def part(group: int) -> Column:
        return F.regexp_extract(text, _WALL_AND_ZONE, group)

    wall = F.when(part(1) != "", part(1)).otherwise(text)
    offset_minutes = part(3).try_cast("bigint") * 60 + F.coalesce(
        part(4).try_cast("bigint"), F.lit(0)
    )
    offset_us = F.coalesce(offset_minutes * 60_000_000, F.lit(0))
    signed = F.when(part(2) == "-", -offset_us).otherwise(offset_us)
    instant = F.timestamp_micros(
        F.timestamp_diff(
            "MICROSECOND", F.lit(_NAIVE_EPOCH).cast("timestamp_ntz"), wall.try_cast("timestamp_ntz")
        )
        - signed
    )
    return F.when(text.rlike(form_regex(ISO)), instant)


def _utc_wall_time(column: Column) -> Column:
    """A ``timestamp_ntz`` column as the instant of its wall time in UTC."""
    from pyspark.sql import functions as F

    since = F.timestamp_diff("MICROSECOND", F.lit(_NAIVE_EPOCH).cast("timestamp_ntz"), column)
    return F.timestamp_micros(since)
