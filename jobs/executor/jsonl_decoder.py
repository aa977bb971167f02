"""Decoding and tagging JSON lines in the read stage: Arrow's JSON reader, strict JSON.

:class:`JsonlDecoder` is a ``mapInArrow`` function over the raw lines (``_raw``,
``_source_file``) of a pipeline it serves (:func:`jobs.sources.files.landing.jsonl_decoder`). It
is the only judge of those lines: it parses them with Arrow's JSON reader, packs every valid
record straight into its key bucket's Arrow blob, the operator's packed input
(:mod:`jobs.executor.operator`), and rejects every other line with its reason
(:mod:`jobs.executor.rejection_reasons`). Output rows are of two kinds:

* a blob: ``(pst_bucket, pst_ts, pst_blob)``; ``pst_ts`` is the latest event time in the blob
  (Spark's watermark takes the maximum, so it sees what it would see row by row);
* a rejected line: ``(_raw, _source_file, _error)``, ``_error`` its reason, the other columns null.

A blank line (empty, or spaces only) is neither: it is not a record (Spark's text source hands
the decoder every line of a file).

The contract is strict JSON (``docs/sources.md``): a line is one JSON object whose fields of the
source schema have their column's JSON type (a string for a ``string`` column or an ISO-8601 event
time, a number for a numeric one, ``true``/``false``, or null); fields outside the schema are
ignored; a leading byte-order mark is skipped. ``NaN`` and ``Infinity`` read as numbers, and are
rejected as not finite in a value column. A line Arrow cannot read so (single quotes, two objects,
a number for a string column or text for a number, a duplicate field, text that is not UTF-8) is
rejected, never passed on or dropped. One exception: an epoch event time may also be its digits as
text (:data:`jobs.config.event_time.FORMS`). The event time is read by
:func:`jobs.config.event_time.event_time_us` (a form of :data:`jobs.config.event_time.FORMS`, in
range). Keys are hashed to Spark's own ``pmod(xxhash64(keys), B)``
(:class:`jobs.executor.record_rules.KeyBuckets`), the bucket every other source's rows get in
Spark SQL: the record's rules, its typed values, its id and its bucket are stated once, in
:mod:`jobs.executor.record_rules`, and rendered here in Arrow (``ArrowRecords``).

Pipelines the decoder cannot serve (:func:`jobs.sources.files.landing.jsonl_decoder` returns None)
are read by Spark alone (``from_json``, tagged in Spark SQL): ingestion time, keys of other types
than string and integer, ``float``, ``timestamp``, ``decimal(p,s)`` and ``date`` value columns
(Arrow's reader takes ``1e2`` for a decimal, and ``2024-1-2``-like text is Spark's to refuse: one
judge, Spark's tagging, reads them), and value columns that are also the key or event-time
column.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from jobs.config.event_time import epoch_text_units, flat
from jobs.executor.operator_input import (
    BLOB,
    BUCKET,
    DEDUP_ID,
    REJECTED_COLUMNS,
    TS_US,
    WEIGHT,
    blobs_by_bucket,
    lane_marker,
)
from jobs.executor.record_rules import (
    ArrowRecords,
    EventTimeUs,
    IsNull,
    NotUtf8,
    Raw,
    RecordShape,
    Test,
    Unparsed,
    input_id,
)
from sinks.lake import column_type

LATEST_EVENT_TIME = "pst_ts"
# the lines' columns, in and out, and a rejected line's reason
# (jobs.sources.files.landing.RAW, SOURCE_FILE, ERROR)
LINE, FILE, REASON = "_raw", "_source_file", "_error"
DECODER_OUTPUT = (
    f"{BUCKET} int, {LATEST_EVENT_TIME} timestamp, {BLOB} binary, {LINE} string, {FILE} string, "
    f"{REASON} string"
)
# A failed chunk is split in two until it is this small; then its lines are read one by one.
SMALLEST_SPLIT = 16
CHUNK_ROWS = 100_000
"""Lines decoded together (Spark hands ``mapInArrow`` 10,000 at a time): each chunk makes one
blob per bucket it holds, which the operator opens one by one, and hashes its distinct keys."""
CHUNK_BYTES = 32 << 20
"""... unless their text reaches this size first."""


def chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` joined into chunks of :data:`CHUNK_ROWS` lines or :data:`CHUNK_BYTES` of
    text (the last one smaller), empty batches dropped."""
    held: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        held.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= CHUNK_ROWS or size >= CHUNK_BYTES:
            yield _joined(held)
            held, rows, size = [], 0, 0
    if held:
        yield _joined(held)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


_ERROR_ROW = re.compile(r" in row (\d+)$")
"""Where Arrow's JSON reader names the row (of the buffer) it failed on."""


def _line_bytes(lines: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(where each line of ``lines`` starts in their text, and where the last ends: from 0; the
    text's bytes), without a copy of the text."""
    wide = pa.types.is_large_string(lines.type) or pa.types.is_large_binary(lines.type)
    offsets = np.frombuffer(lines.buffers()[1], np.int64 if wide else np.int32)
    offsets = offsets[lines.offset : lines.offset + len(lines) + 1].astype(np.int64)
    data = np.frombuffer(lines.buffers()[2], np.uint8) if len(lines) else np.empty(0, np.uint8)
    return offsets - offsets[0], data[offsets[0] : offsets[-1]]


def _records_only(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without its blank lines (empty, or spaces only), which are not records: Spark's
    ``trim`` tells them so for the lines of the other text formats."""
    offsets, data = _line_bytes(batch.column(0))
    starts, lengths = offsets[:-1], np.diff(offsets)
    blank = lengths == 0
    # only a line that begins with a space can be blank besides an empty one: the text's bytes
    # are counted only when there is such a line
    first = data[np.minimum(starts, len(data) - 1)] if len(data) else np.zeros_like(starts)
    spaced = np.flatnonzero(~blank & (first == 32))
    if len(spaced):
        others = np.concatenate([[0], np.cumsum(data != 32)])  # bytes other than a space, so far
        blank[spaced] = others[offsets[spaced + 1]] == others[offsets[spaced]]
    return batch.filter(pa.array(~blank)) if blank.any() else batch


class _Lines:
    """A batch's lines as one buffer, a line break after each: ``text(lo, hi)`` is lines
    ``lo..hi``'s text without a copy."""

    def __init__(self, lines: pa.Array) -> None:
        self.lines = lines
        offsets, data = _line_bytes(lines)
        self._text = np.insert(data, offsets[1:], 10)  # "\n" after each line
        self._starts = offsets + np.arange(len(offsets))  # where each line starts

    def __len__(self) -> int:
        return len(self.lines)

    def text(self, lo: int, hi: int) -> pa.Buffer:
        return pa.py_buffer(self._text[self._starts[lo] : self._starts[hi]])

    def not_utf8(self) -> np.ndarray:
        """Mask of the lines that are not UTF-8 text."""
        bad = np.zeros(len(self.lines), bool)
        try:
            self.lines.validate(full=True)
        except pa.ArrowInvalid:
            for i, raw in enumerate(self.lines.cast(pa.binary()).to_pylist()):
                try:
                    (raw or b"").decode("utf-8")
                except UnicodeDecodeError:
                    bad[i] = True
        return bad


@dataclass(frozen=True)
class AsInput:
    """What the decoder of one of a pipeline's several inputs adds to the one-input decoder.

    The records it decodes are tagged as input ``name`` of the pipeline (the tag view,
    ``Pipeline.tag_as``): its lines hold only the columns ``read`` (the input's own schema); the
    record shape's other columns (another input's) are null in its records, whatever a line
    holds, and ``column`` holds ``name``. Its records' ids (a deduplicating input's) begin with
    :func:`jobs.executor.record_rules.input_id` (two inputs' equal ids are not copies);
    ``ids``: the pipeline deduplicates (an input without dedup columns packs null ids);
    ``weighted``: the pipeline's elements carry a weight (beside a pane-log input's), each
    record +1. Its blobs carry no clock: the batch's
    latest event time of the input goes on one row of the input's marker bucket
    (:func:`jobs.executor.operator_input.lane_marker` of ``lane``, the input's index)."""

    column: str
    name: str
    lane: int
    read: tuple[str, ...]
    ids: bool = False
    weighted: bool = False


@dataclass(frozen=True)
class JsonlDecoder:
    """The decoder of one pipeline (picklable: shipped to the Python workers).

    ``shape``: what a record of the pipeline holds, the one statement's
    (:class:`jobs.executor.record_rules.RecordShape`, built for a pipeline by
    :func:`jobs.sources.shape.record_shape`, as the plan's Spark SQL builds it): the source
    schema, the keys, the event time (``epoch_us``: its unit in µs when it is an integer; None:
    a timestamp string), the conditions of the filtered aggregates (computed here once per
    record in Arrow, :func:`panes.columnar.conditions.arrow_flag`), the id columns of a
    deduplicated pipeline (``dedup``: its records are packed with their id,
    :class:`jobs.executor.record_rules.DedupId`, the event time as µs, their line and their
    file) and the number of key buckets. ``values``: the element's value columns, source
    columns and each condition's flag (the operator's, ``Pipeline.carried_columns``).
    """

    shape: RecordShape
    values: tuple[str, ...]
    as_input: AsInput | None = None

    def __post_init__(self) -> None:
        if self.shape.event_time is None or self.shape.ingestion_time:
            raise ValueError("the JSON-lines decoder reads no ingestion-time pipeline")

    @property
    def event_time(self) -> str:
        """The event-time column."""
        assert self.shape.event_time is not None  # __post_init__
        return self.shape.event_time

    # -- the mapInArrow function ------------------------------------------------------------------

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in chunks(batches):
            yield self.decode(chunk)

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One batch of ``(_raw, _source_file)`` lines -> blobs and rejected lines (a blank line
        is neither)."""
        batch = _records_only(batch)
        lines = _Lines(batch.column(0))
        parsed: list[tuple[int, pa.Table]] = []
        reasons = np.full(len(lines), None, dtype=object)  # None: not rejected
        self._parse_chunks(lines, parsed, reasons)
        decoded, ts_us = None, None
        if parsed:
            table = self._completed(pa.concat_tables([t for _, t in parsed]))
            rows = np.concatenate([np.arange(lo, lo + t.num_rows) for lo, t in parsed])
            if self.shape.dedup:  # each record's line and file travel with it
                at = pa.array(rows, pa.int64())
                table = table.append_column(LINE, pc.cast(batch.column(0).take(at), pa.string()))
                table = table.append_column(FILE, pc.cast(batch.column(1).take(at), pa.string()))
            reason, us = self.judged(table)
            ok = pc.is_null(reason)
            bad = np.flatnonzero(~ok.to_numpy(zero_copy_only=False))
            reasons[rows[bad]] = reason.take(pa.array(bad, pa.int64())).to_pylist()
            decoded, ts_us = table.filter(ok), us.filter(ok)
        rejected = np.flatnonzero(reasons != None)  # noqa: E711 (elementwise)
        ids, latest, blobs = self._pack(decoded, ts_us)
        return self._output(
            batch.take(pa.array(rejected, pa.int64())),
            pa.array(reasons[rejected].tolist(), pa.string()),
            ids,
            latest,
            blobs,
        )

    def _output(
        self, rejected: pa.RecordBatch, reasons: pa.Array, ids: list, latest: list, blobs: list
    ) -> pa.RecordBatch:
        """Blob rows, then the ``rejected`` lines with their ``reasons`` (see the module doc);
        one of several inputs: the blobs without a clock and a row of its marker bucket with
        their latest event time (:class:`AsInput`)."""
        if self.as_input is not None and blobs:
            ids = [*ids, lane_marker(self.as_input.lane)]
            latest = [*[None] * len(blobs), max(latest)]
            blobs = [*blobs, None]
        nb, nr = len(blobs), rejected.num_rows

        def column(blob_part: pa.Array, type_: pa.DataType, line_part: pa.Array | None = None):
            tail = pa.nulls(nr, type_) if line_part is None else pc.cast(line_part, type_)
            return pa.concat_arrays([blob_part, tail])

        utc = pa.timestamp("us", "UTC")
        return pa.RecordBatch.from_arrays(
            [
                column(pa.array(ids, pa.int32()), pa.int32()),
                column(pa.array(latest, pa.int64()).cast(utc), utc),
                column(pa.array(blobs, pa.binary()), pa.binary()),
                column(pa.nulls(nb, pa.string()), pa.string(), rejected.column(0)),
                column(pa.nulls(nb, pa.string()), pa.string(), rejected.column(1)),
                column(pa.nulls(nb, pa.string()), pa.string(), reasons),
            ],
            names=[BUCKET, LATEST_EVENT_TIME, BLOB, LINE, FILE, REASON],
        )

    # -- parsing --------------------------------------------------------------------------------

    @cached_property
    def read_schema(self) -> pa.Schema:
        """What Arrow's JSON reader reads: the source schema, with the event time and integer
        keys as int64 from JSON numbers only, and timestamp strings as strings."""
        fields = []
        for name, declared in self.shape.columns:
            if name in self._not_read:
                continue
            if name == self.event_time:
                t = "int64" if self.shape.epoch_us is not None else "string"
            elif name in self.shape.keys:
                t = "string" if declared == "string" else "int64"
            else:
                t = column_type(declared).arrow_json or "string"
            fields.append(pa.field(name, pa.type_for_alias(t)))
        return pa.schema(fields)

    @cached_property
    def _not_read(self) -> frozenset[str]:
        """The record shape's columns no line of the input holds (:class:`AsInput`)."""
        one = self.as_input
        if one is None:
            return frozenset()
        return frozenset(c for c, _ in self.shape.columns if c not in one.read)

    def _completed(self, table: pa.Table) -> pa.Table:
        """``table`` as read, with the columns its lines do not hold: another input's null (in
        its declared type), the input's name (:class:`AsInput`)."""
        one = self.as_input
        if one is None:
            return table
        n = table.num_rows
        for name in sorted(self._not_read):
            if name == one.column:
                table = table.append_column(name, pa.array([one.name] * n, pa.string()))
            else:
                wanted = column_type(self.shape.types[name]).arrow
                table = table.append_column(name, pa.nulls(n, wanted))
        return table

    @cached_property
    def _loose_schema(self) -> pa.Schema:
        """:attr:`read_schema` without the event time, whose type Arrow infers (one line)."""
        return pa.schema([f for f in self.read_schema if f.name != self.event_time])

    def _parse(
        self, lines: _Lines, lo: int, hi: int, schema: pa.Schema | None = None
    ) -> tuple[pa.Table | None, int | None]:
        """Lines ``lo..hi`` parsed as one JSON-lines buffer: (the table, None) if every line is
        exactly one object of the read schema (``schema``: of that schema, other fields
        inferred), else (None, the line Arrow's error names, counted from ``lo``, or None)."""
        text = lines.text(lo, hi)
        try:
            table = pj.read_json(
                pa.BufferReader(text),
                read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(text))),
                parse_options=pj.ParseOptions(
                    explicit_schema=self.read_schema if schema is None else schema,
                    unexpected_field_behavior="ignore" if schema is None else "infer",
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            named = _ERROR_ROW.search(str(error))
            return None, int(named.group(1)) if named else None
        if table.num_rows != hi - lo:  # blank lines, several objects on a line
            return None, None
        return table, None

    def _parse_chunks(self, lines: _Lines, out: list[tuple[int, pa.Table]], reasons: Any) -> None:
        """Parse every line into ``out`` (``(first line, table)``), or its reason into
        ``reasons``: a range Arrow fails on is cut around the line its error names (that line
        and the one before it, where text after an object shows as an error of the next row,
        are read alone: :meth:`_parse_line`), or halved when the error names none; a line that
        is not UTF-8 is rejected before Arrow (which takes such bytes in a string as they are)."""
        todo, start = [], 0
        for i in np.flatnonzero(lines.not_utf8()):
            reasons[i] = self.rules.reason_of(NotUtf8())
            todo.append((start, int(i)))
            start = int(i) + 1
        todo.append((start, len(lines)))
        while todo:
            lo, hi = todo.pop()
            if lo >= hi:
                continue
            table, row = self._parse(lines, lo, hi)
            if table is None and hi - lo == 1:
                line = self._parse_line(lines, lo)
                if isinstance(line, pa.Table):
                    out.append((lo, line))
                else:
                    reasons[lo] = self.rules.reason_of(line)
            elif table is not None:
                out.append((lo, table))
            elif row is not None and 0 <= row < hi - lo:
                first, last = lo + max(row - 1, 0), lo + row + 1
                todo += [(lo, first), *((i, i + 1) for i in range(first, last)), (last, hi)]
            elif hi - lo > SMALLEST_SPLIT:
                mid = (lo + hi) // 2
                todo += [(lo, mid), (mid, hi)]
            else:
                todo += [(i, i + 1) for i in range(lo, hi)]

    def _parse_line(self, lines: _Lines, i: int) -> pa.Table | Test:
        """Line ``i``, which Arrow cannot read with :attr:`read_schema`: its table if it is an
        epoch event time as digits in text, else the record rule's test that holds of it (not
        read, its event time missing or unreadable), whose reason the rules name
        (:meth:`jobs.executor.record_rules.ArrowRecords.reason_of`)."""
        loose, _ = self._parse(lines, i, i + 1, self._loose_schema)  # the event time inferred
        if loose is None:
            return Unparsed()
        et = self.event_time
        if et not in loose.column_names or pa.types.is_null(loose.column(et).type):
            return IsNull(Raw(et))
        value = loose.column(et)
        if self.shape.epoch_us is None or not pa.types.is_string(value.type):
            return IsNull(EventTimeUs())  # (a strictly read line never comes here)
        units = epoch_text_units(pc.utf8_trim(flat(value), " "))
        if not units.is_valid().to_pylist()[0]:
            return IsNull(EventTimeUs())
        columns = {f.name: loose.column(f.name) for f in self._loose_schema}
        columns[et] = pa.chunked_array([units])
        return pa.table([columns[f.name] for f in self.read_schema], schema=self.read_schema)

    # -- judging: the record rules (jobs.executor.record_rules) rendered in Arrow -------------

    @cached_property
    def rules(self) -> ArrowRecords:
        return ArrowRecords(self.shape)

    def judged(self, table: pa.Table) -> tuple[pa.Array, pa.Array]:
        """(why each record of ``table`` (as read by :meth:`_parse`) is rejected, null where it
        is not; its event time in µs (int64; garbage where rejected)): the record rules
        (:func:`jobs.executor.record_rules.rules`) in Arrow."""
        return self.rules.judged(table)

    # -- packing --------------------------------------------------------------------------------

    def _pack(self, decoded: pa.Table | None, ts_us: pa.Array | None) -> tuple[list, list, list]:
        """Decoded records -> (bucket, latest event time, Arrow IPC blob) per bucket, the blob
        holding the records' ``keys..., ts_us, values...`` (the operator's element columns)."""
        if decoded is None or decoded.num_rows == 0:
            return [], [], []
        rules = self.rules
        keys = self.shape.keys
        arrays: list[pa.Array | pa.ChunkedArray] = [rules.typed(decoded, k) for k in keys]
        names = [*keys, TS_US, *self.values]
        arrays.append(ts_us)
        arrays += [rules.carried(decoded, v) for v in self.values]
        one = self.as_input
        if self.shape.dedup:
            ids = rules.dedup_id(decoded, ts_us)
            if one is not None:  # an id is its input's
                ids = pc.binary_join_element_wise(input_id(one.name), ids, "")
            arrays += [ids, decoded.column(LINE), decoded.column(FILE)]
            names += [DEDUP_ID, *REJECTED_COLUMNS[:2]]
        elif one is not None and one.ids:  # none of this input's records is a copy
            arrays.append(pa.nulls(decoded.num_rows, pa.string()))
            names.append(DEDUP_ID)
        if one is not None and one.weighted:
            arrays.append(pa.array(np.ones(decoded.num_rows, np.int32)))
            names.append(WEIGHT)
        payload = pa.Table.from_arrays(arrays, names=names).combine_chunks().to_batches()[0]
        buckets = self.rules.buckets([payload.column(k) for k in keys])
        order = np.argsort(buckets, kind="stable")
        payload = payload.take(pa.array(order))
        buckets = buckets[order]
        ids, starts, blobs = blobs_by_bucket(buckets, payload)
        ts_sorted = payload.column(TS_US).to_numpy()
        latest = np.maximum.reduceat(ts_sorted, starts) if len(starts) else ()
        return ids, list(latest), blobs
