"""A record's rules, stated once: why it is rejected (in order), its values in their types, its
dedup id and its key bucket; rendered in Spark SQL (Column expressions) and in Arrow
(``pyarrow.compute``), the way :mod:`panes.conditions` states a condition once and renders it.

The statement is a typed AST over one record:

* expressions (:data:`Expr`): :class:`Raw` (a column as the record carries it), :class:`Typed`
  (the column in its declared type, null where it does not convert exactly), :class:`EventTimeUs`
  (the event time in µs since 1970, null where unreadable: :data:`jobs.config.event_time.FORMS`);
* tests (:data:`Test`): :class:`IsNull`, :class:`NotConverted` (present, but no typed value),
  :class:`Blank` (text of spaces only), :class:`NotFinite`, :class:`OutOfRange`, and the line's
  own tests :class:`NotUtf8` and :class:`Unparsed` (its parser's reason);
* :class:`Rule`: a test and the reason a record it holds for is rejected
  (:mod:`jobs.executor.rejection_reasons`); :func:`rules` lists a record's rules in their order,
  the first that holds being the reason: the line (UTF-8, parsed), the event time (missing,
  unreadable, out of range), each key (missing, not converted, empty), each value (not converted,
  not finite);
* :class:`DedupId` (``<length>:<text>`` of each id column, joined by ``|``) and
  :class:`KeyBucket` (Spark's ``pmod(xxhash64(keys), buckets)``).

Renderings: :class:`SparkRecords` (over a records frame's columns, of whatever Spark types they
arrive in) and :class:`ArrowRecords` (over a table Arrow's JSON reader read strictly, the
JSON-lines decoder's: :mod:`jobs.executor.jsonl_decoder`, which applies the line's rules as
it reads its lines). A record is judged by one of them, chosen per pipeline;
``tests/spark/test_record_rules.py`` checks that both judge random records alike.

A key's bucket in Python (:class:`KeyBuckets`): Spark's ``xxhash64`` is XXH64 with seed 42,
chained over the columns: each non-null column is hashed with the previous result as the seed;
strings as their UTF-8 bytes, ``int`` as 4 and ``bigint`` as 8 little-endian bytes; ``pmod`` is
Python's ``%`` with a positive divisor.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from jobs.config.event_time import (
    MAX_EVENT_TIME_US,
    MIN_EVENT_TIME_US,
    EventTimeColumn,
    event_time_us,
    flat,
    spark_event_time,
    spark_timestamp,
)
from jobs.executor import rejection_reasons as why
from panes.columnar.conditions import arrow_flag
from panes.conditions import Condition, Rename
from sinks.lake import column_type

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

TEXT = "string"
"""How a column that arrives as text is named among arriving types (Spark's ``string``)."""


# -- the statement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordShape:
    """What a record of a pipeline holds: ``columns`` (name, declared type), the ``keys``, the
    ``event_time`` column and its unit in µs when it is an integer epoch (``epoch_us``; None: a
    timestamp), or ``ingestion_time`` (the batch's time is the event time: no event-time rules),
    the source columns its values are made of (``values``: the aggregates' columns, their
    conditions' included), the filtered aggregates' ``conditions``, the ``dedup`` id columns
    (the event-time column's part: the event time) and the number of key ``buckets``."""

    columns: tuple[tuple[str, str], ...]
    keys: tuple[str, ...]
    event_time: str | None
    values: tuple[str, ...]
    epoch_us: int | None = None
    ingestion_time: bool = False
    conditions: tuple[Condition, ...] = ()
    dedup: tuple[str, ...] = ()
    buckets: int = 1

    @cached_property
    def types(self) -> dict[str, str]:
        """Declared type of each column."""
        return dict(self.columns)

    @cached_property
    def flags(self) -> dict[str, Condition]:
        """Each condition by the name of its flag (a carried value column)."""
        return {c.flag: c for c in self.conditions}


@dataclass(frozen=True)
class Raw:
    """``column`` as the record carries it."""

    column: str


@dataclass(frozen=True)
class Typed:
    """``column`` in its declared type, null where its value does not convert exactly."""

    column: str


@dataclass(frozen=True)
class EventTimeUs:
    """The record's event time in µs since 1970 UTC, null where unreadable."""


Expr = Raw | Typed | EventTimeUs


@dataclass(frozen=True)
class NotUtf8:
    """The record's line is not UTF-8 text."""


@dataclass(frozen=True)
class Unparsed:
    """The record's parser could not read its line (the reason is the parser's)."""


@dataclass(frozen=True)
class IsNull:
    of: Expr


@dataclass(frozen=True)
class NotConverted:
    """``column`` has a value, which does not convert exactly to its declared type."""

    column: str


@dataclass(frozen=True)
class Blank:
    """Text of spaces only (or empty)."""

    of: Expr


@dataclass(frozen=True)
class NotFinite:
    """A NaN or infinite number (null is finite: no value)."""

    of: Expr


@dataclass(frozen=True)
class OutOfRange:
    """A value outside ``[low, high]``."""

    of: Expr
    low: int
    high: int


Test = NotUtf8 | Unparsed | IsNull | NotConverted | Blank | NotFinite | OutOfRange
LINE_TESTS = (NotUtf8, Unparsed)
"""Tests of the line a record was read from: the JSON-lines decoder applies them as it reads its
lines (in this order), before a record has columns."""


@dataclass(frozen=True)
class NotConvertedReason:
    """Why a ``what`` (key, value) is refused when it does not convert: by the type it arrives
    in (:func:`jobs.executor.rejection_reasons.not_converted`)."""

    what: str
    column: str
    declared: str


Reason = str | NotConvertedReason | None
"""A rule's reason: a text, one by the arriving type, or None: the parser's own reason."""


@dataclass(frozen=True)
class Rule:
    """A record for which ``test`` holds is rejected with ``reason`` (unless an earlier rule
    holds)."""

    test: Test
    reason: Reason


def rules(shape: RecordShape) -> tuple[Rule, ...]:
    """A record's rejection rules, in order: the first that holds is its reason."""
    out = [Rule(NotUtf8(), why.NOT_UTF8), Rule(Unparsed(), None)]
    et = shape.event_time
    if et is not None and not shape.ingestion_time:
        out += [
            Rule(IsNull(Raw(et)), why.missing_event_time(et)),
            Rule(IsNull(EventTimeUs()), why.unparseable_event_time(et)),
            Rule(
                OutOfRange(EventTimeUs(), MIN_EVENT_TIME_US, MAX_EVENT_TIME_US),
                why.event_time_out_of_range(et),
            ),
        ]
    types = shape.types
    for k in shape.keys:
        out += [
            Rule(IsNull(Raw(k)), why.missing_key(k)),
            Rule(IsNull(Typed(k)), NotConvertedReason("key", k, types[k])),
        ]
        if types[k] == "string":
            out.append(Rule(Blank(Typed(k)), why.empty_key(k)))
    for v in shape.values:
        out.append(Rule(NotConverted(v), NotConvertedReason("value", v, types[v])))
        if types[v] in ("double", "float"):
            out.append(Rule(NotFinite(Typed(v)), why.not_finite(v)))
    return tuple(out)


@dataclass(frozen=True)
class DedupId:
    """The record's id (:data:`jobs.executor.operator_input.DEDUP_ID`): each of ``parts`` (the
    event time and timestamps as µs, a double or float as :func:`double_text`) as
    ``<length>:<text>``, joined by ``|``; null when one is null."""

    parts: tuple[Expr, ...]


def dedup_id(shape: RecordShape) -> DedupId:
    return DedupId(tuple(EventTimeUs() if c == shape.event_time else Typed(c) for c in shape.dedup))


def input_id(name: str) -> str:
    """What the :class:`DedupId` of a record of input ``name`` of several begins with: an id is
    its input's, and two inputs' equal ids are not copies (each renderer prepends it)."""
    return f"{name}:"


@dataclass(frozen=True)
class KeyBucket:
    """The key's bucket: Spark's ``pmod(xxhash64(keys...), buckets)`` of the typed keys."""

    keys: tuple[str, ...]
    buckets: int


def key_bucket(shape: RecordShape) -> KeyBucket:
    return KeyBucket(shape.keys, shape.buckets)


# -- Spark SQL ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparkRecords:
    """The statement rendered in Spark SQL over a records frame whose columns arrive as
    ``arriving`` (column -> Spark type, ``dict(df.dtypes)``); ``line`` and ``error``: the
    columns of the record's raw line and its parser's reason (None: there are none).

    A value of another type than its column's converts by one rule for every source (text read
    as text, a user's DataFrame, a Delta table): text is read by its form (``"1.5"`` is no
    ``long``; a timestamp by :func:`jobs.config.event_time.spark_timestamp`, UTC where it has
    no zone, whatever the session's time zone; a decimal or a date only in its exact form,
    :attr:`sinks.lake.column_types.ColumnType.text_form`: ``1.234`` is no ``decimal(18,2)``, never
    rounded); a value of another type converts only if it converts back to itself (a double
    1.5 is no ``long``, truncated to 1; 2.0 is 2; a ``decimal(20,4)`` 1.2345 is no
    ``decimal(18,2)``)."""

    shape: RecordShape
    arriving: Mapping[str, str]
    line: str | None = None
    error: str | None = None
    event_time_us: Column | None = None
    """The event time in µs, when computed once beside the records (else computed here)."""

    def event_time(self, records: DataFrame) -> tuple[Column, Column | None]:
        """(the event time of ``records`` as a timestamp, the raw column or None for ingestion
        time)."""
        et, shape = self.shape.event_time, self.shape
        column = None
        if et is not None and not shape.ingestion_time:
            column = EventTimeColumn(et, shape.epoch_us)
        return spark_event_time(column, records)

    def expr(self, e: Expr) -> Column:
        from pyspark.sql import functions as F

        if isinstance(e, Raw):
            return F.col(e.column)
        if isinstance(e, Typed):
            return self.typed(e.column)
        if self.event_time_us is None:
            raise ValueError("the event time in µs is computed beside the records: give it")
        return self.event_time_us

    def typed(self, column: str) -> Column:
        """``column`` in its declared type, null where it does not convert exactly."""
        from pyspark.sql import functions as F

        wanted = column_type(self.shape.types[column])
        sql_type = wanted.spark
        dtype = self.arriving[column]
        value = F.col(column)
        if dtype == sql_type:
            return value
        if sql_type == "timestamp":
            return spark_timestamp(value, dtype)
        if dtype == TEXT and wanted.text_form is not None:
            text = F.trim(value)
            return F.when(text.rlike(f"^(?:{wanted.text_form})$"), text.try_cast(sql_type))
        converted = value.try_cast(sql_type)
        if dtype == TEXT:
            return converted  # try_cast reads text by its form: "1.5" is not a long
        return F.when(converted.try_cast(dtype).eqNullSafe(value), converted)

    def holds(self, test: Test) -> Column | None:
        """Where ``test`` holds (None: it cannot, for these records)."""
        from pyspark.sql import functions as F

        if isinstance(test, NotUtf8):
            if self.line is None:
                return None
            raw = F.col(self.line)
            return raw.isNotNull() & ~F.is_valid_utf8(raw)
        if isinstance(test, Unparsed):
            return None if self.error is None else F.col(self.error).isNotNull()
        if isinstance(test, IsNull):
            return self.expr(test.of).isNull()
        if isinstance(test, NotConverted):
            return F.col(test.column).isNotNull() & self.typed(test.column).isNull()
        if isinstance(test, Blank):
            return F.trim(self.expr(test.of)) == ""
        if isinstance(test, NotFinite):
            value = self.expr(test.of)
            return ~(value.isNull() | ~(F.isnan(value) | F.abs(value).eqNullSafe(float("inf"))))
        value = self.expr(test.of)
        return (value < test.low) | (value > test.high)

    def reason_text(self, reason: Reason) -> Column:
        from pyspark.sql import functions as F

        if reason is None:
            assert self.error is not None
            return F.col(self.error)
        if isinstance(reason, NotConvertedReason):
            arrived = self.arriving[reason.column]
            return F.lit(why.not_converted(reason.what, reason.column, reason.declared, arrived))
        return F.lit(reason)

    def reason(self) -> Column:
        """Why each record is rejected (null: it is not): the first of :func:`rules` that
        holds."""
        from pyspark.sql import functions as F

        found = [(self.holds(r.test), r.reason) for r in rules(self.shape)]
        stated = [(holds, reason) for holds, reason in found if holds is not None]
        if not stated:
            return F.lit(None).cast("string")
        (holds, reason), *rest = stated
        out = F.when(holds, self.reason_text(reason))
        for holds, reason in rest:
            out = out.when(holds, self.reason_text(reason))
        return out

    def carried(self, column: str, rename: Rename | None = None) -> Column:
        """A carried value column: a source column in its type, or a condition's flag (over
        the typed columns, named by ``rename``)."""
        from pyspark.sql import functions as F

        condition = self.shape.flags.get(column)
        if condition is None:
            return self.typed(column)
        return F.expr(condition.sql("spark", rename))

    def dedup_id(self) -> Column:
        """:class:`DedupId` of the records (null when an id column is)."""
        from pyspark.sql import functions as F

        pieces: list[Column] = []
        for i, part in enumerate(dedup_id(self.shape).parts):
            if i:
                pieces.append(F.lit("|"))
            value = self.expr(part)
            kind = self.shape.types[part.column] if isinstance(part, Typed) else None
            if kind == "timestamp":
                value = F.unix_micros(value)
            if kind in ("double", "float"):
                # double_text: Java's Double.toHexString, of +0.0 for -0.0
                value = value.cast("double")
                zero = F.when(value == 0, F.lit(0.0)).otherwise(value)
                hexadecimal = F.reflect(F.lit("java.lang.Double"), F.lit("toHexString"), zero)
                text = F.when(value.isNotNull(), hexadecimal)  # reflect refuses a null
            else:
                text = value.cast("string")
            pieces += [F.char_length(text).cast("string"), F.lit(":"), text]
        return F.concat(*pieces)  # null when any piece is

    def bucket(self, columns: Sequence[str] | None = None) -> Column:
        """:class:`KeyBucket` of the typed keys (held in ``columns``: default the keys' names)."""
        return bucket_expression(columns or key_bucket(self.shape).keys, self.shape.buckets)


def bucket_expression(keys: Sequence[str], buckets: int) -> Any:
    """The bucket of a row's key as a Spark column: ``pmod(xxhash64(keys), buckets)``."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(*keys), F.lit(buckets))


# -- Arrow --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArrowRecords:
    """The statement rendered in Arrow over a table that Arrow's JSON reader read strictly (the
    JSON-lines decoder's, :meth:`jobs.executor.jsonl_decoder.JsonlDecoder.read_schema`):
    every column arrived as JSON text, read in its declared type (an ``int`` key as an int64,
    converted only within an int's range; the event time as text or an integer epoch). The
    line's tests (:data:`LINE_TESTS`) were applied as the lines were read."""

    shape: RecordShape

    def event_time_us(self, table: pa.Table) -> pa.Array:
        et = self.shape.event_time
        assert et is not None, "the decoder reads no ingestion-time pipeline"
        return event_time_us(table.column(et), epoch_us=self.shape.epoch_us)

    def typed(self, table: pa.Table, column: str) -> pa.Array:
        """``column`` in its declared Arrow type, null where it does not convert exactly."""
        values = flat(table.column(column))
        wanted = column_type(self.shape.types[column]).arrow
        if values.type == wanted:
            return values
        if pa.types.is_integer(values.type) and pa.types.is_integer(wanted):
            info = np.iinfo(wanted.to_pandas_dtype())
            inside = pc.and_(
                pc.greater_equal(values, int(info.min)), pc.less_equal(values, int(info.max))
            )
            kept = pc.if_else(inside, values, pa.scalar(None, values.type))
            return pc.cast(kept, wanted)
        raise TypeError(f"{column}: the decoder reads no {values.type} as {wanted}")

    def expr(self, e: Expr, table: pa.Table, us: pa.Array) -> pa.Array:
        if isinstance(e, Raw):
            return flat(table.column(e.column))
        if isinstance(e, Typed):
            return self.typed(table, e.column)
        return us

    def holds(self, test: Test, table: pa.Table, us: pa.Array) -> pa.Array | None:
        """Where ``test`` holds (None: the line's tests, applied as the lines were read)."""
        if isinstance(test, NotUtf8 | Unparsed):
            return None
        if isinstance(test, IsNull):
            return pc.is_null(self.expr(test.of, table, us))
        if isinstance(test, NotConverted):
            raw = flat(table.column(test.column))
            return pc.and_(pc.is_valid(raw), pc.is_null(self.typed(table, test.column)))
        if isinstance(test, Blank):
            return pc.equal(pc.utf8_trim(self.expr(test.of, table, us), " "), "")
        if isinstance(test, NotFinite):
            value = self.expr(test.of, table, us)
            if not pa.types.is_floating(value.type):
                return None
            return pc.invert(pc.is_finite(value))
        value = self.expr(test.of, table, us)
        return pc.invert(
            pc.and_(pc.greater_equal(value, test.low), pc.less_equal(value, test.high))
        )

    @staticmethod
    def reason_text(reason: Reason) -> str:
        """A rule's reason as text: its parser's own (None) is the strict JSON reader's
        (:data:`jobs.executor.rejection_reasons.NOT_STRICT_JSON`); a value not converted arrived
        as JSON text."""
        if reason is None:
            return why.NOT_STRICT_JSON
        if isinstance(reason, NotConvertedReason):
            return why.not_converted(reason.what, reason.column, reason.declared, TEXT)
        return reason

    def reason_of(self, test: Test) -> str:
        """The reason of the first of :func:`rules` whose test is ``test``: how the JSON-lines
        decoder names what it finds of a line as it reads it (not UTF-8, not read, its event
        time missing or unreadable), so that it states no reason of its own.

        >>> shape = RecordShape((("k", "string"), ("ts", "timestamp")), ("k",), "ts", ())
        >>> ArrowRecords(shape).reason_of(IsNull(Raw("ts")))
        'missing event time (ts)'
        """
        for rule in rules(self.shape):
            if rule.test == test:
                return self.reason_text(rule.reason)
        raise ValueError(f"no rule of a record of {self.shape.columns} tests {test}")

    def judged(self, table: pa.Table) -> tuple[pa.Array, pa.Array]:
        """(why each record of ``table`` is rejected, null where it is not: the first of
        :func:`rules` that holds; its event time in µs (int64; garbage where rejected))."""
        reason = pa.nulls(table.num_rows, pa.string())
        us = self.event_time_us(table)
        for rule in rules(self.shape):
            holds = self.holds(rule.test, table, us)
            if holds is None:
                continue
            text = self.reason_text(rule.reason)
            holds = pc.and_(pc.is_null(reason), pc.fill_null(holds, False))
            reason = pc.if_else(holds, pa.scalar(text, pa.string()), reason)
        return flat(reason), pc.fill_null(us, 0)

    def carried(self, table: pa.Table, column: str) -> pa.Array:
        """A carried value column: a source column in its type, or a condition's flag."""
        condition = self.shape.flags.get(column)
        if condition is None:
            return self.typed(table, column)
        return arrow_flag(condition, table)

    def dedup_id(self, table: pa.Table, us: pa.Array) -> pa.Array:
        """:class:`DedupId` of the records of ``table`` whose event times are ``us``."""
        parts = []
        for part in dedup_id(self.shape).parts:
            value = self.expr(part, table, us)
            if pa.types.is_timestamp(value.type):
                value = pc.cast(pc.cast(value, pa.timestamp("us", value.type.tz)), pa.int64())
            if pa.types.is_floating(value.type):
                value = pa.array(
                    [None if v is None else double_text(v) for v in value.to_pylist()], pa.string()
                )
            parts.append(value)
        return id_text(parts)

    @cached_property
    def key_buckets(self) -> KeyBuckets:
        bucket = key_bucket(self.shape)
        return KeyBuckets(tuple(self.shape.types[k] for k in bucket.keys), bucket.buckets)

    def buckets(self, keys: Sequence[pa.Array]) -> np.ndarray:
        """:class:`KeyBucket` of each row of the typed key columns ``keys`` (int32)."""
        hasher = self.key_buckets
        if len(keys) == 1:
            enc = pc.dictionary_encode(keys[0])
            per_key = np.array(hasher.buckets_of(enc.dictionary.to_pylist()), np.int32)
            return per_key[enc.indices.to_numpy(zero_copy_only=False)]
        cols = [k.to_pylist() for k in keys]
        return np.array(hasher.buckets_of(zip(*cols, strict=True)), np.int32)


def double_text(value: float) -> str:
    """A double's text in a record's id: exact and the same from every rendering, which a
    decimal text is not (Spark writes ``1.0E20`` where Arrow writes ``1e+20``, and Java's
    shortest digits are not Python's on every JDK): the value in hexadecimal as Java's
    ``Double.toHexString`` writes it (what Spark's rendering calls), ``-0.0`` as ``0.0``.

    >>> [double_text(v) for v in (1.0, 0.1, -2.5, -0.0, 0.0)]
    ['0x1.0p0', '0x1.999999999999ap-4', '-0x1.4p1', '0x0.0p0', '0x0.0p0']
    >>> [double_text(v) for v in (1e20, 5e-324, float("-inf"))]
    ['0x1.5af1d78b58c4p66', '0x0.0000000000001p-1022', '-Infinity']
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    mantissa, exponent = (value + 0.0).hex().split("p")  # + 0.0: -0.0 is 0.0
    whole, fraction = mantissa.split(".")
    return f"{whole}.{fraction.rstrip('0') or '0'}p{int(exponent)}"


def id_text(columns: Sequence[pa.Array]) -> pa.Array:
    """:class:`DedupId` of each row of the id ``columns`` (typed: timestamps as µs integers).

    >>> id_text([pa.array(["a|b", None]), pa.array([7, 7])]).to_pylist()
    ['3:a|b|1:7', None]
    """
    pieces = []
    for column in columns:
        text = pc.cast(column, pa.string())
        length = pc.cast(pc.utf8_length(text), pa.string())
        pieces.append(pc.binary_join_element_wise(length, text, ":"))
    return pc.binary_join_element_wise(*pieces, "|")


SPARK_SEED = 42
HASHED_AS = {"string": "utf8", "int": "int32", "long": "int64", "bigint": "int64"}
"""Declared column type -> how Spark's ``xxhash64`` hashes a value of it."""
_PACK = {"int32": struct.Struct("<i").pack, "int64": struct.Struct("<q").pack}


def _signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


@dataclass
class KeyBuckets:
    """``bucket(key)`` == Spark's ``pmod(xxhash64(key columns), buckets)``, memoized per key.

    ``types`` are the key columns' declared types (each in :data:`HASHED_AS`); a key is the
    column's value for one key column, else a tuple of them; no value may be null (a valid key
    never is).

    >>> KeyBuckets(("string",), 64).bucket("key-0776") in range(64)
    True
    """

    types: Sequence[str]
    buckets: int
    _memo: dict[Any, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        unknown = [t for t in self.types if t not in HASHED_AS]
        if unknown:
            raise ValueError(f"key types {unknown} have no Python bucket function")
        if self.buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {self.buckets}")
        self._kinds = [HASHED_AS[t] for t in self.types]

    def xxhash64(self, key: Any) -> int:
        """Spark's ``xxhash64`` of the key columns (a signed 64-bit integer)."""
        values = (key,) if len(self._kinds) == 1 else key
        seed = SPARK_SEED
        for kind, value in zip(self._kinds, values, strict=True):
            data = value.encode("utf-8") if kind == "utf8" else _PACK[kind](value)
            seed = xxhash.xxh64_intdigest(data, seed)
        return _signed(seed)

    def bucket(self, key: Any) -> int:
        got = self._memo.get(key)
        if got is None:
            if len(self._memo) >= 1_000_000:  # a bounded memo: keys repeat, but not forever
                self._memo.clear()
            got = self._memo[key] = self.xxhash64(key) % self.buckets
        return got

    def buckets_of(self, keys: Iterable[Any]) -> list[int]:
        """The bucket of each key, in order."""
        bucket = self.bucket
        return [bucket(k) for k in keys]
