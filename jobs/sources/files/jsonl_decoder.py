"""Decoding JSON-lines in the packing step: Arrow's JSON parser, with Spark's as the judge.

Parsing JSON in the JVM (``from_json``) and tagging every row with Spark SQL expressions was most of
a scheduled run's read stage. :class:`JsonlDecoder` is a ``mapInArrow`` function over the raw lines
(``_raw``, ``_source_file``) that parses them with Arrow's JSON reader and packs every *unambiguous*
valid record straight into its key bucket's Arrow blob, the operator's packed input
(:mod:`jobs.executor.operator`). Every other line is passed through untouched for the JVM to parse,
tag and, if need be, reject, exactly as without the decoder. Output rows are of two kinds:

* a blob: ``(pst_bucket, pst_ts, pst_blob)``; ``pst_ts`` is the latest event time in the blob
  (Spark's watermark takes the maximum, so it sees what it would see row by row);
* a passed-through line: ``(_raw, _source_file)``, the other columns null.

Invariant: the decoder changes no outcome. A record is decoded here only when Arrow's reading of it
provably equals Spark's: Arrow's parser is stricter than Spark's (no single quotes, duplicate
fields, several objects on a line, numbers in string columns) and fails where it is unsure (a
leading byte-order mark is made to fail), a failing line goes to Spark, and so does any non-finite
double (the two parsers spell NaN and infinities differently). Decoded records are valid by
construction: their keys are non-null strings or integers in range, and their event time is read by
the job's own :func:`jobs.config.event_time.event_time_us` and accepted (a form of
:data:`jobs.config.event_time.FORMS`, in range; text without a zone only when Spark's session time
zone is UTC); anything else, including every record Spark would reject, takes Spark's path. Buckets
are Spark's own ``pmod(xxhash64(keys), B)`` (:class:`jobs.executor.operator_input.KeyBuckets`), so a
key's state is found whichever path its rows take. Should decoding a batch fail unexpectedly, all
its lines go to Spark (:meth:`JsonlDecoder.decode_or_pass`): the decoder can make a run slower,
never stop it.

Pipelines the decoder cannot serve (:func:`jobs.driver.landing_source.jsonl_decoder` returns None)
are read by Spark alone: other formats, ingestion time, keys of other types than string and integer,
columns of types Arrow might read differently (timestamps, floats), and value columns that are also
the key or event-time column (Spark hands those over as the text it read).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from jobs.config.event_time import accepted, event_time_us, flat
from jobs.executor.operator_input import BLOB, BUCKET, TS_US, KeyBuckets, blobs_by_bucket
from sinks.column_types import ARROW_JSON_TYPES

LATEST_EVENT_TIME = "pst_ts"
DECODED_COLUMNS = (BUCKET, LATEST_EVENT_TIME, BLOB)
# the lines' columns, in and out (jobs.driver.landing_source.RAW, SOURCE_FILE)
LINE, FILE = "_raw", "_source_file"
DECODER_OUTPUT = (
    f"{BUCKET} int, {LATEST_EVENT_TIME} timestamp, {BLOB} binary, {LINE} string, {FILE} string"
)
# declared type -> Arrow type Arrow's JSON reader must produce for it to equal Spark's reading
_ARROW_TYPE = ARROW_JSON_TYPES
# A failed chunk is split in two until it is this small; then its lines go to Spark.
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


@dataclass(frozen=True)
class JsonlDecoder:
    """The decoder of one pipeline (picklable: shipped to the Python workers).

    ``columns`` is the source schema as ``(name, declared type)``; ``keys`` and ``event_time``
    name columns in it; ``epoch_us`` is the event time's unit in µs when it is an integer
    (None: a timestamp string).
    """

    columns: tuple[tuple[str, str], ...]
    keys: tuple[str, ...]
    event_time: str
    values: tuple[str, ...]
    buckets: int
    epoch_us: int | None = None

    # -- the mapInArrow function ------------------------------------------------------------------

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in chunks(batches):
            yield self.decode_or_pass(chunk)

    def decode_or_pass(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """:meth:`decode`; should it fail unexpectedly, every line of the batch is passed to
        Spark instead (the outcome is the same, only slower), with a warning on stderr."""
        try:
            return self.decode(batch)
        except Exception as error:  # the decoder is an optimization: it must not stop the job
            print(
                f"panestore: JSON-lines decoder failed ({error!r}); "
                f"{batch.num_rows} lines left to Spark",
                file=sys.stderr,
            )
            return self._output(batch, [], [], [])

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One batch of ``(_raw, _source_file)`` lines -> blobs and passed-through lines."""
        lines = batch.column(0)
        parsed: list[tuple[int, pa.Table]] = []
        self._parse_chunks(lines, 0, len(lines), parsed)
        if parsed:
            table = pa.concat_tables([t for _, t in parsed])
            rows = np.concatenate([np.arange(lo, lo + t.num_rows) for lo, t in parsed])
            ok, ts_us = self._valid(table)
            decoded = table.filter(ok)
            rows_ok = rows[ok.to_numpy(zero_copy_only=False)]
            ts_us = ts_us.filter(ok)
        else:
            decoded, rows_ok, ts_us = None, np.empty(0, np.int64), None
        passed = np.ones(len(lines), bool)
        passed[rows_ok] = False
        slow = batch.filter(pa.array(passed))
        ids, latest, blobs = self._pack(decoded, ts_us)
        return self._output(slow, ids, latest, blobs)

    @staticmethod
    def _output(slow: pa.RecordBatch, ids: list, latest: list, blobs: list) -> pa.RecordBatch:
        """Blob rows, then the ``slow`` lines passed through (see the module doc)."""
        nb, ns = len(blobs), slow.num_rows

        def column(blob_part: pa.Array, type_: pa.DataType, slow_part: pa.Array | None = None):
            tail = pa.nulls(ns, type_) if slow_part is None else pc.cast(slow_part, type_)
            return pa.concat_arrays([blob_part, tail])

        utc = pa.timestamp("us", "UTC")
        return pa.RecordBatch.from_arrays(
            [
                column(pa.array(ids, pa.int32()), pa.int32()),
                column(pa.array(latest, pa.int64()).cast(utc), utc),
                column(pa.array(blobs, pa.binary()), pa.binary()),
                column(pa.nulls(nb, pa.string()), pa.string(), slow.column(0)),
                column(pa.nulls(nb, pa.string()), pa.string(), slow.column(1)),
            ],
            names=[BUCKET, LATEST_EVENT_TIME, BLOB, LINE, FILE],
        )

    # -- parsing --------------------------------------------------------------------------------

    @cached_property
    def types(self) -> dict[str, str]:
        """Declared type of each source column."""
        return dict(self.columns)

    @cached_property
    def read_schema(self) -> pa.Schema:
        """What Arrow's JSON reader reads: the source schema, with the event time and integer
        keys as int64 from JSON numbers only, and timestamp strings as strings."""
        fields = []
        for name, declared in self.columns:
            if name == self.event_time:
                t = "int64" if self.epoch_us is not None else "string"
            elif name in self.keys:
                t = "string" if declared == "string" else "int64"
            else:
                t = _ARROW_TYPE[declared]
            fields.append(pa.field(name, pa.type_for_alias(t)))
        return pa.schema(fields)

    def _parse(self, lines: pa.Array, lo: int, hi: int) -> pa.Table | None:
        """Lines ``lo..hi`` parsed as one JSON-lines buffer; None unless every line is exactly
        one object of the read schema."""
        chunk = lines.slice(lo, hi - lo)
        if chunk.null_count or pc.any(pc.starts_with(chunk, "\ufeff")).as_py():
            return None  # Arrow skips a byte-order mark: whether Spark does is Spark's call
        wide = pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type)
        offsets = np.frombuffer(chunk.buffers()[1], np.int64 if wide else np.int32)
        offsets = offsets[chunk.offset : chunk.offset + len(chunk) + 1]
        data = np.frombuffer(chunk.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
        text = np.insert(data, (offsets[1:] - offsets[0]).astype(np.int64), 10)  # "\n" after each
        try:
            table = pj.read_json(
                pa.BufferReader(pa.py_buffer(text)),
                read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(text))),
                parse_options=pj.ParseOptions(
                    explicit_schema=self.read_schema, unexpected_field_behavior="ignore"
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
            return None
        return table if table.num_rows == hi - lo else None  # blank lines, several objects

    def _parse_chunks(
        self, lines: pa.Array, lo: int, hi: int, out: list[tuple[int, pa.Table]]
    ) -> None:
        """Parse ``lo..hi``, halving chunks that fail down to :data:`SMALLEST_SPLIT` lines
        (whose lines are then left to Spark)."""
        table = self._parse(lines, lo, hi)
        if table is not None:
            out.append((lo, table))
        elif hi - lo > SMALLEST_SPLIT:
            mid = (lo + hi) // 2
            self._parse_chunks(lines, lo, mid, out)
            self._parse_chunks(lines, mid, hi, out)

    # -- validity and event time ----------------------------------------------------------------

    def _valid(self, table: pa.Table) -> tuple[pa.Array, pa.Array]:
        """(mask of the records decoded here, their event time in µs (int64; garbage where the
        mask is false))."""
        types = self.types
        ok = pa.array([True] * table.num_rows)
        for k in self.keys:
            col = table.column(k)
            ok = pc.and_kleene(ok, pc.is_valid(col))
            if types[k] == "string":  # an empty key is Spark's to reject
                ok = pc.and_kleene(ok, pc.not_equal(pc.utf8_trim(col, " "), ""))
            if types[k] == "int":
                inside = pc.and_(pc.greater_equal(col, -(2**31)), pc.less(col, 2**31))
                ok = pc.and_kleene(ok, pc.fill_null(inside, False))
        for name, declared in self.columns:
            if _ARROW_TYPE.get(declared) == "float64":  # NaN and infinities: Spark's call
                col = table.column(name)
                ok = pc.and_kleene(ok, pc.or_kleene(pc.is_null(col), pc.is_finite(col)))
        us = event_time_us(table.column(self.event_time), epoch_us=self.epoch_us)
        return flat(pc.and_kleene(ok, accepted(us))), pc.fill_null(us, 0)

    # -- packing --------------------------------------------------------------------------------

    @cached_property
    def key_buckets(self) -> KeyBuckets:
        return KeyBuckets(tuple(self.types[k] for k in self.keys), self.buckets)

    def _pack(self, decoded: pa.Table | None, ts_us: pa.Array | None) -> tuple[list, list, list]:
        """Decoded records -> (bucket, latest event time, Arrow IPC blob) per bucket, the blob
        holding the records' ``keys..., ts_us, values...`` (the operator's element columns)."""
        if decoded is None or decoded.num_rows == 0:
            return [], [], []
        arrays, names = [], []
        for k in self.keys:
            col = decoded.column(k)
            if self.types[k] == "int":
                col = pc.cast(col, pa.int32())
            arrays.append(col)
            names.append(k)
        arrays.append(pa.chunked_array([ts_us]))
        names.append(TS_US)
        for v in self.values:
            arrays.append(decoded.column(v))
            names.append(v)
        payload = pa.Table.from_arrays(arrays, names=names).combine_chunks().to_batches()[0]
        buckets = self._bucket_column(payload)
        order = np.argsort(buckets, kind="stable")
        payload = payload.take(pa.array(order))
        buckets = buckets[order]
        ids, starts, blobs = blobs_by_bucket(buckets, payload)
        ts_sorted = payload.column(TS_US).to_numpy()
        latest = np.maximum.reduceat(ts_sorted, starts) if len(starts) else ()
        return ids, list(latest), blobs

    def _bucket_column(self, payload: pa.RecordBatch) -> Any:
        """The key bucket of each row of ``payload`` (its key columns first)."""
        hasher = self.key_buckets
        if len(self.keys) == 1:
            enc = pc.dictionary_encode(payload.column(0))
            per_key = np.array(hasher.buckets_of(enc.dictionary.to_pylist()), np.int32)
            return per_key[enc.indices.to_numpy(zero_copy_only=False)]
        cols = [payload.column(i).to_pylist() for i in range(len(self.keys))]
        return np.array(hasher.buckets_of(zip(*cols, strict=True)), np.int32)
