"""The stateful operator's input encoding: key buckets of element rows, packed or one by one.

The operator's input is partitioned by *key bucket*, not by key: one state value and at most one
timer per bucket (:class:`jobs.executor.operator.BucketProcessor`). Every input row of the operator
is ``(pst_bucket, pst_blob, pst_row, pst_clock)`` (:data:`OPERATOR_INPUT`): the bucket's grouping
value, exactly one of two encodings of rows whose columns are named and typed by
:class:`InputSchema`, and the rows' largest clock (what Spark's watermark saw of them):

* **packed** (``pst_blob``): an Arrow IPC stream of many rows of the bucket;
* **row** (``pst_row``): one row as a JSON object (UTF-8 bytes) written by Spark's ``to_json``
  (:func:`row_expression`), timestamps as µs integers and floats as doubles, so JSON holds
  every value exactly; read back with Arrow's JSON reader (:func:`read_rows`). Only the
  JSON-lines decoder's source uses it, whose columns are plain; a binary value (an upstream's
  sketch, ``struct<..., sketch: binary>``, read by a pane-log source) travels packed only, in
  Arrow, byte for byte (:func:`row_expression` refuses it).

A row of either encoding is an element (the key columns, :data:`TS_US` (event time, int64 µs),
the value columns and, for weighted input (a pane-log source),
:data:`WEIGHT` (int32: +1, or -1 for an element that withdraws its value:
:class:`panes.weights.Retracted`)) or, in bucket :data:`REJECTED_BUCKET`, a rejected record
(:data:`REJECTED_COLUMNS`: the raw record, its file and why it was rejected; the other columns
null). A deduplicated pipeline's elements also carry :data:`DEDUP_ID`, their raw record and
its file (a duplicate becomes a rejected row in the operator). A row of bucket
:data:`CONTROL_BUCKET` is a control row, only its clock counts. Both encodings read into
one Arrow table of :meth:`InputSchema.arrow_schema`
(:func:`input_table`), whatever mix a group holds.

Packing makes the rows crossing into the operator's Python tasks a few thousand per batch
instead of one per element, and both encodings avoid pandas for the values (it would hold an
integer column with nulls as float64). Who packs:

* the JSON-lines decoder (:mod:`jobs.executor.jsonl_decoder`) packs the records it decodes
  in its own Python stage (with :func:`blobs_by_bucket`); the lines it rejects reach the operator
  in the row encoding, so no second Python stage runs before the shuffle;
* every other source's rows are packed by :func:`pack_by_bucket`, a ``mapInArrow`` function.

A key's bucket is Spark's ``pmod(xxhash64(key columns), state_buckets)``, stated with the
record's other rules in :mod:`jobs.executor.record_rules` (``KeyBucket``: ``bucket_expression``
in Spark, ``KeyBuckets`` in Python), so a key's state is found whichever side packed its rows. A
lake maps bucket numbers to grouping values that Spark spreads
evenly over its shuffle partitions (:func:`balanced_bucket_ids`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from jobs.executor.record_rules import SPARK_SEED
from panes.columnar import TIMESTAMP, ElementColumns
from panes.weights import Retracted

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

BUCKET, BLOB, ROW, CLOCK = "pst_bucket", "pst_blob", "pst_row", "pst_clock"
LANE = "pst_lane"
"""The index of an element's input among a pipeline's several inputs, beside its clock before
packing (:func:`pack_by_bucket`)."""
OPERATOR_INPUT = f"{BUCKET} int, {BLOB} binary, {ROW} binary, {CLOCK} bigint"
"""The operator's input rows (Spark DDL): a bucket, one of the two encodings, and the largest
value (µs) of the column Spark's watermark follows among the rows (null: none)."""
OPERATOR_INPUT_ARROW = pa.schema(
    [(BUCKET, pa.int32()), (BLOB, pa.binary()), (ROW, pa.binary()), (CLOCK, pa.int64())]
)
"""The same as an Arrow schema (what a ``mapInArrow`` function yields for it)."""
REJECTED_BUCKET = -1
CONTROL_BUCKET = -2
"""The bucket of control rows: they carry only a clock (:mod:`jobs.driver.control`). Every
bucket at or below it carries only a clock (:func:`clock_buckets`)."""
TS_US = TIMESTAMP
WEIGHT = "pst_weight"
DEDUP_ID = "pst_dedup_id"
"""A deduplicated pipeline's element column: the record's id as text, each id column's value
(typed; a timestamp or the event time as µs since 1970) as ``<length>:<text>``, joined by ``|``
(null when an id column is null: never deduplicated). Written by the record's one tagger, by
the one statement of it (:class:`jobs.executor.record_rules.DedupId`,
rendered in Arrow or Spark SQL); :mod:`panes.dedup` hashes it."""
REJECTED_COLUMNS = ("pst_raw", "pst_source_file", "pst_reason")
"""A rejected record's raw text, its file and why it was rejected (``pst_``: source columns may
not start with ``_``, and Spark renames ``_`` columns of a stateful operator's input)."""


@dataclass(frozen=True)
class InputSchema:
    """The named, typed columns of the operator's input rows (see the module doc).

    ``types`` gives the Arrow type of each key and value column (``ts_us`` is int64, the rejected
    columns strings); a column without one is read as a string.
    """

    keys: tuple[str, ...]
    values: tuple[str, ...]
    types: tuple[tuple[str, pa.DataType], ...] = ()
    weighted: bool = False
    dedup: bool = False

    @property
    def element_columns(self) -> tuple[str, ...]:
        extra = (*((WEIGHT,) if self.weighted else ()), *((DEDUP_ID,) if self.dedup else ()))
        return (*self.keys, TS_US, *self.values, *extra)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column of an input row: an element's, then a rejected record's."""
        return (*self.element_columns, *REJECTED_COLUMNS)

    def arrow_type(self, name: str) -> pa.DataType:
        if name == TS_US:
            return pa.int64()
        if name == WEIGHT:
            return pa.int32()
        return dict(self.types).get(name, pa.string())

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of :attr:`columns`."""
        return pa.schema([(c, self.arrow_type(c)) for c in self.columns])

    def columns_of_elements(self) -> ElementColumns:
        """The elements' columns as the model's engines read a bundle's table (dropped elements
        decoded as :func:`elements_by_key` does, each key's in canonical order)."""
        types = tuple((c, self.arrow_type(c)) for c in (*self.keys, *self.values))
        return ElementColumns(self.keys, self.values, types, decode=_Decoder(self))


@dataclass(frozen=True)
class _Decoder:
    """Rows as each key's elements, in canonical order (picklable)."""

    schema: InputSchema

    def __call__(self, table: pa.Table) -> dict[Any, list]:
        by_key = elements_by_key(table, self.schema)
        for elements in by_key.values():
            canonical_order(elements)
        return by_key


# -- packing ------------------------------------------------------------------------------------


def blob_of(rows: pa.RecordBatch | pa.Table) -> bytes:
    """``rows`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write(rows)
    return sink.getvalue().to_pybytes()


def bucket_runs(buckets: np.ndarray) -> list[tuple[int, int]]:
    """The ``(start, end)`` row ranges of each bucket in ``buckets`` (sorted: one run each).

    >>> bucket_runs(np.array([1, 1, 4, 7, 7]))
    [(0, 2), (2, 3), (3, 5)]
    """
    if not len(buckets):
        return []
    cuts = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist(), len(buckets)]
    return list(itertools.pairwise(cuts))


def blobs_by_bucket(buckets: np.ndarray, payload: pa.RecordBatch) -> tuple[list[int], Any, list]:
    """Rows of ``payload`` sorted by ``buckets`` (one bucket per row) -> (the distinct buckets,
    the first row of each, one blob of each bucket's rows)."""
    runs = bucket_runs(buckets)
    starts = np.array([lo for lo, _ in runs], dtype=np.int64)
    blobs = [blob_of(payload.slice(lo, hi - lo)) for lo, hi in runs]
    return buckets[starts].tolist(), starts, blobs


def pack_by_bucket(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: rows ``(pst_bucket, pst_clock, columns...)`` -> the operator's
    input rows in the packed encoding (:data:`OPERATOR_INPUT`), one blob per bucket and Arrow
    batch, with the largest clock of its rows.

    Rows of several inputs carry their input's lane (:data:`LANE`, the input's index): a blob
    then mixes inputs and carries no clock; instead each lane's largest clock goes on one row
    of the lane's marker bucket (:func:`lane_marker`), so that every shard learns each input's
    (:func:`with_clock_rows`)."""
    for rows in batches:
        if rows.num_rows == 0:
            continue
        rows = rows.take(pc.sort_indices(rows.column(BUCKET)))
        buckets = rows.column(BUCKET).to_numpy(zero_copy_only=False)
        names = [n for n in rows.schema.names if n not in (BUCKET, CLOCK, LANE)]
        payload = pa.RecordBatch.from_arrays([rows.column(n) for n in names], names=names)
        ids, _, blobs = blobs_by_bucket(buckets, payload)
        clocks = rows.column(CLOCK)
        lanes = rows.column(LANE) if LANE in rows.schema.names else None
        if lanes is not None:  # a blob's clock: its control rows' (they have no lane)
            clocks = pc.if_else(pc.is_null(lanes), clocks, pa.scalar(None, pa.int64()))
        clock = [pc.max(clocks.slice(lo, hi - lo)).as_py() for lo, hi in bucket_runs(buckets)]
        markers: list[int] = []
        tops: list[int] = []
        if lanes is not None:
            by_lane = pa.table({LANE: lanes, CLOCK: rows.column(CLOCK)}).filter(pc.is_valid(lanes))
            found = by_lane.group_by(LANE).aggregate([(CLOCK, "max")])
            found = found.filter(pc.is_valid(found.column(f"{CLOCK}_max")))
            markers = [lane_marker(lane) for lane in found.column(LANE).to_pylist()]
            tops = found.column(f"{CLOCK}_max").to_pylist()
        yield pa.RecordBatch.from_pydict(
            {
                BUCKET: [*ids, *markers],
                BLOB: [*blobs, *[None] * len(markers)],
                ROW: [None] * (len(ids) + len(markers)),
                CLOCK: [*clock, *tops],
            },
            schema=OPERATOR_INPUT_ARROW,
        )


def carries_only_a_clock(bucket: int) -> bool:
    """Whether rows of ``bucket`` are control or clock rows (only their clock counts)."""
    return bucket <= CONTROL_BUCKET


def lane_marker(lane: int) -> int:
    """The bucket of the rows holding the largest clock of input ``lane`` (its index among a
    pipeline's several inputs) in a packed batch (:func:`pack_by_bucket`): below
    :data:`CONTROL_BUCKET`, above every clock bucket (:func:`clock_buckets`)."""
    return CONTROL_BUCKET - 1 - lane


def noted_lane(lane: int, lanes: int) -> int:
    """The clock lane of the writers' marks of input ``lane`` (of ``lanes`` inputs): a writers'
    control row's time (``watermark.policy = "writer_noted"``), after the inputs' own lanes and
    the control rows' (lane ``lanes``)."""
    return lanes + 1 + lane


def lane_count(lanes: int) -> int:
    """The clock lanes of a pipeline of ``lanes`` inputs: one (no lanes) for one input; else one
    per input for its elements, the control rows', and one per input for its writers' marks
    (:func:`noted_lane`)."""
    return 1 if lanes == 1 else 2 * lanes + 1


def clock_buckets(shards: int, lane: int = 0, lanes: int = 1) -> tuple[int, ...]:
    """For each of ``shards`` shuffle partitions, a bucket value below :data:`CONTROL_BUCKET`
    that Spark's hash partitioning sends there: the buckets of clock rows
    (:func:`with_clock_rows`). A pipeline of several inputs (``lanes`` of them) has a set per
    clock lane (``lane``, :func:`lane_count`: each input's, the control rows' (lane ``lanes``),
    each input's writers' marks), distinct from each other and from the lanes' markers
    (:func:`lane_marker`), so that a task tells which clock is which (:func:`clock_lanes`).

    >>> buckets = clock_buckets(3)
    >>> [spark_partition_of_int(b, 3) for b in buckets], all(b < CONTROL_BUCKET for b in buckets)
    ([0, 1, 2], True)
    >>> clock_buckets(2, 0, 2), clock_buckets(2, 2, 2), clock_buckets(2, 4, 2), lane_marker(4)
    ((-9, -8), (-11, -13), (-18, -15), -7)
    """
    sets = lane_count(lanes)
    found: list[dict[int, int]] = [{} for _ in range(sets)]
    value = CONTROL_BUCKET - (0 if lanes == 1 else sets)
    while any(len(table) < shards for table in found):
        value -= 1
        partition = spark_partition_of_int(value, shards)
        for table in found:
            if partition not in table:
                table[partition] = value
                break
    return tuple(found[lane][p] for p in range(shards))


def clock_lanes(shards: int, lanes: int) -> dict[int, int]:
    """Clock bucket -> its lane, over every lane's :func:`clock_buckets` (lane ``lanes``: the
    control rows'; then the writers' marks', :func:`noted_lane`)."""
    return {
        b: lane for lane in range(lane_count(lanes)) for b in clock_buckets(shards, lane, lanes)
    }


def with_clock_rows(rows: DataFrame, shards: int, lanes: int = 1) -> DataFrame:
    """The operator's input ``rows`` (:data:`OPERATOR_INPUT`) with, beside each row that has a
    clock, one row of each of the ``shards`` clock buckets (:func:`clock_buckets`) holding only
    that clock. Whatever shard a row's bucket goes to, every shard's task reads the largest
    clock of the whole batch (what Spark's watermark saw), so each computes the watermark after
    the batch by Spark's rule and fires it itself (:class:`jobs.executor.operator.OperatorBatch`).
    With several inputs (``lanes``), a lane marker's clock (:func:`lane_marker`) goes to its
    lane's clock buckets and a control row's (the drain) to the control rows' own: each task
    reads every input's largest clock, and the run's.

    A row's bucket numbers are exploded, not the row: its blob is kept only on the row of its
    own bucket. The rows are blobs of many elements, control rows and the few lines the
    JSON-lines decoder rejected, so the clock rows are few."""
    from pyspark.sql import functions as F

    own = F.col(BUCKET)

    def to(buckets: Iterable[int]) -> Column:
        return F.array(*[F.lit(b) for b in buckets])

    sent = to(clock_buckets(shards))
    if lanes > 1:
        sent = F.when(own == CONTROL_BUCKET, to(clock_buckets(shards, lanes, lanes)))
        for lane in (n for n in range(lane_count(lanes)) if n != lanes):
            sent = sent.when(own == lane_marker(lane), to(clock_buckets(shards, lane, lanes)))
        sent = sent.otherwise(F.array().cast("array<int>"))
    buckets = F.when(F.col(CLOCK).isNull(), F.array(own)).otherwise(F.concat(F.array(own), sent))
    to_col = "pst_to"
    exploded = rows.select(F.explode(buckets).alias(to_col), BUCKET, BLOB, ROW, CLOCK)
    mine = F.col(to_col) == own
    return exploded.select(
        F.col(to_col).alias(BUCKET),
        F.when(mine, F.col(BLOB)).alias(BLOB),
        F.when(mine, F.col(ROW)).alias(ROW),
        CLOCK,
    )


def row_expression(columns: dict[str, Column], spark_types: dict[str, str]) -> Column:
    """The row encoding of ``columns`` (name -> the Spark column holding it, an input schema's
    columns in order; ``spark_types``: their Spark SQL types): a JSON object as UTF-8 bytes,
    null fields left out, timestamps as µs integers, dates as days since 1970 and floats widened
    to doubles (all exact in JSON; a decimal is its digits, which Arrow's reader takes exactly)."""
    from pyspark.sql import functions as F

    binary = [n for n in columns if "binary" in spark_types[n]]
    if binary:  # to_json writes bytes as base64 text, which Arrow's reader takes as a string
        raise ValueError(f"the row encoding cannot carry binary column {binary[0]!r}: pack it")

    def exact(name: str, col: Column) -> Column:
        if spark_types[name] == "timestamp":
            col = F.unix_micros(col)
        elif spark_types[name] == "date":
            col = F.unix_date(col)  # days since 1970 (Arrow's reader takes no date text)
        elif spark_types[name] == "float":
            col = col.cast("double")
        return col.alias(name)

    return F.to_json(F.struct(*[exact(n, c) for n, c in columns.items()])).cast("binary")


# -- unpacking ----------------------------------------------------------------------------------


def unpack(blobs: Iterable[bytes]) -> pa.Table | None:
    """The rows of ``blobs`` as one table (None for no blobs)."""
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


def _json_type(arrow_type: pa.DataType) -> pa.DataType:
    """What the row encoding writes a column of ``arrow_type`` as (see :func:`row_expression`)."""
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_float32(arrow_type):
        return pa.float64()
    if pa.types.is_date32(arrow_type):
        return pa.int32()
    return arrow_type


def read_rows(rows: Sequence[bytes], schema: InputSchema) -> pa.Table | None:
    """Rows in the row encoding -> one table of ``schema.arrow_schema()`` (None for no rows)."""
    if not rows:
        return None
    text = b"\n".join(rows)
    target = schema.arrow_schema()
    table = pj.read_json(
        pa.BufferReader(text),
        read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(text) + 1)),
        parse_options=pj.ParseOptions(
            explicit_schema=pa.schema([(f.name, _json_type(f.type)) for f in target]),
            unexpected_field_behavior="error",
        ),
    )
    return table.select(target.names).cast(target)


def input_table(
    blobs: Sequence[bytes], rows: Sequence[bytes], schema: InputSchema
) -> pa.Table | None:
    """A group's input rows of both encodings as one table (None for none)."""
    tables = [t for t in (unpack(blobs), read_rows(rows, schema)) if t is not None]
    if len(tables) > 1:
        return pa.concat_tables(tables, promote_options="permissive")
    return tables[0] if tables else None


_NO_VALUES: dict = {}


def elements_by_key(table: pa.Table | None, schema: InputSchema) -> dict[Any, list]:
    """Element rows -> {engine key: [(value, timestamp µs), ...]}, each key's elements ordered
    by timestamp (ties in arrival order). The engine key is the key column's value, or a tuple
    of them; the value of an element is a dict of the value columns, wrapped in
    :class:`~panes.weights.Retracted` when its weight is -1 (weighted input)."""
    if table is None or table.num_rows == 0:
        return {}
    kcols, vcols = list(schema.keys), list(schema.values)
    order = [(c, "ascending") for c in (*kcols, TS_US)]
    table = table.take(pc.sort_indices(table, sort_keys=order))
    columns = [table.column(c).to_pylist() for c in vcols]
    if len(columns) == 1:
        name = vcols[0]
        vals: Iterable = [{name: v} for v in columns[0]]
    elif columns:
        vals = [dict(zip(vcols, row, strict=True)) for row in zip(*columns, strict=True)]
    else:
        vals = [_NO_VALUES] * table.num_rows
    if schema.weighted:
        weights = table.column(WEIGHT).to_pylist()
        vals = [v if w > 0 else Retracted(v) for v, w in zip(vals, weights, strict=True)]
    elements = list(zip(vals, table.column(TS_US).to_pylist(), strict=True))
    if len(kcols) == 1:  # sorted by key: one slice per distinct key
        counts = pc.value_counts(table.column(kcols[0])).flatten()
        out, lo = {}, 0
        for key, count in zip(counts[0].to_pylist(), counts[1].to_pylist(), strict=True):
            out[key] = elements[lo : lo + count]
            lo += count
        return out
    keys = zip(*[table.column(c).to_pylist() for c in kcols], strict=True)
    by_key: dict[Any, list] = {}
    for k, e in zip(keys, elements, strict=True):
        got = by_key.get(k)
        if got is None:
            by_key[k] = [e]
        else:
            got.append(e)
    return by_key


_timestamp = operator.itemgetter(1)  # of a (value, timestamp) element


def canonical_order(elements: list[tuple[Any, int]]) -> None:
    """Sort one key's ``(value, timestamp)`` elements in place by timestamp, and only runs of
    equal timestamps also by value (its ``repr``), so a replayed batch feeds the engine the
    same sequence whatever order Spark delivered the rows in."""
    elements.sort(key=_timestamp)
    if len(set(map(_timestamp, elements))) == len(elements):
        return  # no equal timestamps
    i, n = 0, len(elements)
    while i < n:
        j = i + 1
        ts = elements[i][1]
        while j < n and elements[j][1] == ts:
            j += 1
        if j - i > 1:
            elements[i:j] = sorted(elements[i:j], key=lambda e: repr(e[0]))
        i = j


def rejected_records(table: pa.Table | None) -> dict[str, list]:
    """Rejected rows -> ``{"raw": [...], "source_file": [...], "reason": [...]}``."""
    names = [c.removeprefix("pst_") for c in REJECTED_COLUMNS]
    if table is None:
        return {n: [] for n in names}
    return {n: table.column(c).to_pylist() for n, c in zip(names, REJECTED_COLUMNS, strict=True)}


# -- key buckets --------------------------------------------------------------------------------

# -- spreading buckets over Spark's shuffle partitions ------------------------------------------

_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def spark_partition_of_int(value: int, partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives an ``int`` grouping value:
    ``pmod(murmur3_32(value, seed 42), partitions)`` (Spark's ``hash()``)."""
    k1 = (value & _M32) * 0xCC9E2D51 & _M32
    k1 = _rotl32(k1, 15) * 0x1B873593 & _M32
    h1 = SPARK_SEED ^ k1
    h1 = (_rotl32(h1, 13) * 5 + 0xE6546B64) & _M32
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    signed = h1 - (1 << 32) if h1 >= 1 << 31 else h1
    return signed % partitions


def balanced_bucket_ids(buckets: int, partitions: int) -> tuple[int, ...]:
    """Grouping values for buckets ``0..buckets-1`` that Spark spreads evenly over
    ``partitions`` shuffle partitions: bucket ``b`` gets the smallest unused non-negative int
    whose partition is ``b % partitions``.

    The values 0..63 themselves land 27/37 on two partitions (Murmur3 of small ints is skewed),
    and the busier task sets the pace of every operator stage.

    >>> ids = balanced_bucket_ids(64, 2)
    >>> sorted(spark_partition_of_int(i, 2) for i in ids).count(0)
    32
    """
    ids: list[int] = []
    candidate = [0] * partitions  # next int to try, per partition
    for b in range(buckets):
        p = b % partitions
        i = candidate[p]
        while spark_partition_of_int(i, partitions) != p:
            i += 1
        ids.append(i)
        candidate[p] = i + 1
    return tuple(ids)
