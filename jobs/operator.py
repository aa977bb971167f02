"""The stateful operator: the ``panes`` engine per key inside ``transformWithStateInPandas``.

One ValueState per key (the engine's ``KeyState`` as bytes, plus the event-time timer currently
registered) and at most one event-time timer per key: every state or timer call crosses from the
Python worker to the JVM, so the operator makes as few as it can (one get, one update, and timer
calls only when the wanted timer changes).

Time mapping (Spark ms -> model µs). Spark's watermark may be *widened* by the job (delay +
allowed lateness + longest window span) so Spark never filters a row the engine would accept;
the model watermark is then ``spark_watermark_ms * 1000 + watermark_offset_us``. Spark reports
watermark 0 before it has one: that maps to ``BEGINNING_OF_TIME``. A Spark watermark at or past
``end_of_time_ms`` (a drain) maps to ``END_OF_TIME``. Processing time is the batch timestamp
Spark records in its offset log (deterministic on replay), in µs.

Per batch and key (TimeMode ``EventTime``; data rows and timers of one batch see the same
watermark, the one in that batch's offset log):

* data: ``advance(watermark, batch time)`` then ``add_elements(rows)``;
* expired timer: ``advance(watermark, batch time)``;

then the state is saved (or cleared when empty) and one timer is set at the earliest of the
engine's next event-time wake-up (as the smallest Spark ms watermark that reaches it) and, if it
has a processing-time wake-up pending, the next watermark advance (``watermark + 1 ms``): Spark
has no processing-time timers in an EventTime query, so those wake-ups are polled whenever the
watermark moves, and are otherwise honoured the next time the key gets data.

This module imports ``panes`` and ``pyspark`` lazily: it imports without either.
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

try:  # pyspark is optional at import time (the pure test suite runs without it)
    from pyspark.sql.streaming import StatefulProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without pyspark
    _Base = object  # type: ignore[assignment,misc]

from sinks.lake_format import MAX_TIMESTAMP_US, MIN_TIMESTAMP_US
from sinks.pane_log import DEFAULT_LAYOUT, PaneLogLayout, core_schema, pane_columns
from sinks.records import dropped_record, late_core_schema

BEGINNING_OF_TIME = -(2**63)  # == panes.time.BEGINNING_OF_TIME (kept here: lazy import)
END_OF_TIME = 2**63 - 1  # == panes.time.END_OF_TIME
# Spark timestamps end at 9999-12-31; a drain pushes the Spark watermark to here or beyond.
DEFAULT_END_OF_TIME_MS = MAX_TIMESTAMP_US // 1000
# Event times the job takes: Spark's timestamp range, ending before the drain sentinel (an event
# at or after it would move the watermark to the end of time and close every window).
MIN_EVENT_TIME_US = MIN_TIMESTAMP_US
MAX_EVENT_TIME_US = DEFAULT_END_OF_TIME_MS * 1000 - 1

# BucketProcessor input: the grouping column (REJECTED_BUCKET for rejected records) and the
# column of packed element rows (see OperatorConfig.buckets)
BUCKET, BLOB = "pst_bucket", "pst_blob"
REJECTED_BUCKET = -1
KIND_PANE = "pane"
KIND_LATE = "late"
KIND_REJECTED = "rejected"
REJECTED_OUTPUT = ("raw", "source_file")  # + "reason" and "processing_time_us", shared
TIMEMODE = "EventTime"
OUTPUT_MODE = "Append"


def output_arrow_schema(layout: PaneLogLayout = DEFAULT_LAYOUT, rejected: bool = False):
    """Arrow schema of the operator's output: ``record_kind`` + pane core + late-only columns
    (+ the rejected-only columns)."""
    import pyarrow as pa

    fields = [pa.field("record_kind", pa.string(), nullable=False)]
    names = set()
    for f in core_schema(layout):
        fields.append(f.with_nullable(True))
        names.add(f.name)
    for f in late_core_schema(layout):
        if f.name not in names:
            fields.append(f.with_nullable(True))
    if rejected:
        fields += [pa.field(n, pa.string()) for n in REJECTED_OUTPUT]
    return pa.schema(fields)


def output_spark_schema(layout: PaneLogLayout = DEFAULT_LAYOUT, rejected: bool = False):
    """The same as a Spark ``StructType`` (for ``transformWithStateInPandas``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(output_arrow_schema(layout, rejected))


def state_spark_schema():
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    return StructType([StructField("blob", BinaryType()), StructField("timer_ms", LongType())])


@dataclass(frozen=True)
class OperatorConfig:
    """What the operator needs besides the engine; picklable (shipped to the Python workers).

    ``engine_factory`` builds the ``panes.engine.Engine`` on the worker (a module-level function
    or a picklable callable object). Input rows carry the key column(s), ``timestamp_column``
    (event time as int64 µs) and the value column(s); ``value_of`` maps one input row
    (a dict) to the element value (default: the single value column, or a dict of them).
    """

    engine_factory: Callable[[], Any]
    key_columns: Sequence[str] = ("key",)
    timestamp_column: str = "ts_us"
    value_columns: Sequence[str] = ("value",)
    layout: PaneLogLayout = DEFAULT_LAYOUT
    watermark_offset_us: int = 0
    end_of_time_ms: int = DEFAULT_END_OF_TIME_MS
    poll_processing_time: bool = True
    # Element values are dicts of the value columns (nulls as None), even for 0 or 1 column:
    # what named aggregates (``panes.combiners.aggregates``) read.
    values_as_records: bool = False
    # (raw, source file, reason) input columns, the last three of the input: rows whose key
    # columns are all null are not elements but rejected records, passed through as
    # ``record_kind = "rejected"`` rows.
    rejected_columns: tuple[str, str, str] | None = None
    # Key buckets: with ``buckets = B`` the input carries ``bucket_column`` (the grouping value
    # of a hash of the key; REJECTED_BUCKET for rejected records) and Spark groups by it: one
    # state value and at most one timer per *bucket*, holding the engine states of all its keys
    # (:class:`BucketProcessor`). None: group by the key columns (:class:`PaneProcessor`).
    # BucketProcessor input: ``(bucket, blob, keys..., timestamp, values..., raw, file,
    # reason)``. A row is either *plain* (blob null: one element or rejected record) or a *blob*
    # (the rest null): an Arrow IPC stream of many element rows of that bucket, packed before the
    # shuffle (:func:`pack_by_bucket`, :mod:`jobs.jsonl_decoder`). PySpark converts each input
    # row of a transformWithStateInPandas to a Python tuple; blobs make that a few thousand rows
    # per batch instead of one per element.
    buckets: int | None = None
    bucket_column: str = BUCKET
    # Input columns that arrive as UTF-8 *binary* and are decoded here (BucketProcessor): with
    # pandas 3, PySpark turns string columns into Arrow-backed pandas columns, and it iterates
    # every input row of them in Python, several times slower than plain objects.
    decode_columns: frozenset[str] = frozenset()
    # Integer key and value columns that arrive as UTF-8 decimal text (binary) and are read back
    # as ints: pandas turns an integer column with a null (a missing value, or a blob row's
    # empty columns) into float64, which is inexact beyond 2**53.
    integer_columns: frozenset[str] = frozenset()
    value_of: Callable[[dict], Any] | None = field(default=None, compare=False)

    # -- time mapping ---------------------------------------------------------------------------

    def model_watermark(self, spark_watermark_ms: int) -> int:
        if spark_watermark_ms <= 0:
            return BEGINNING_OF_TIME
        if spark_watermark_ms >= self.end_of_time_ms:
            return END_OF_TIME
        return spark_watermark_ms * 1000 + self.watermark_offset_us

    def timer_ms(self, model_time_us: int) -> int:
        """Smallest Spark watermark (ms) whose model watermark reaches ``model_time_us``."""
        if model_time_us >= END_OF_TIME:
            return self.end_of_time_ms
        spark_us = model_time_us - self.watermark_offset_us
        ms = -((-spark_us) // 1000)  # ceil
        return max(1, min(ms, self.end_of_time_ms))


class PaneProcessor(_Base):
    """``StatefulProcessor`` hosting the engine; see the module doc for the protocol."""

    STATE_NAME = "pane_state"

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._engine = None

    # -- Spark callbacks ------------------------------------------------------------------------

    def init(self, handle) -> None:
        self.handle = handle
        self.state = handle.getValueState(self.STATE_NAME, state_spark_schema())
        cfg = self.config
        self._columns = output_arrow_schema(cfg.layout, cfg.rejected_columns is not None).names
        self._single_key = len(cfg.key_columns) == 1
        self._profile = None
        prof_dir = os.environ.get("PANESTORE_PROFILE_DIR")
        if prof_dir:  # developer aid: cProfile each task's processor into this directory
            import cProfile

            self._profile = cProfile.Profile()
            self._profile_path = os.path.join(prof_dir, f"{os.getpid()}-{time.time_ns()}.prof")
            self._profile.enable()

    @property
    def engine(self):
        if self._engine is None:
            self._engine = self.config.engine_factory()
        return self._engine

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        cfg = self.config
        if cfg.rejected_columns is not None and all(k is None or k != k for k in key):
            yield from self._rejected(rows, timerValues)
            return
        elements: list[tuple[Any, int]] = []
        vcols = list(cfg.value_columns)
        for pdf in rows:
            ts = pdf[cfg.timestamp_column].tolist()
            if cfg.value_of is not None:
                vals = [cfg.value_of(r) for r in pdf.to_dict("records")]
            elif cfg.values_as_records:
                vals = _records(pdf, vcols)
            elif len(vcols) == 1:
                vals = pdf[vcols[0]].tolist()
            else:
                vals = pdf[vcols].to_dict("records")
            elements.extend(zip(vals, map(int, ts), strict=True))
        # Spark does not order rows within a key: sort so panes are a function of the input set
        # (by timestamp; by value too only where timestamps tie).
        canonical_order(elements)
        ekey = self._engine_key(key)
        wm, pt = self._clocks(timerValues)
        state, timer = self._load()
        out1 = self.engine.advance(state, ekey, wm, pt)
        out2 = self.engine.add_elements(state, ekey, elements)
        self._save(state, timer, out2, timerValues)
        yield from self._emit([out1, out2])

    def _rejected(self, rows, tv) -> Iterator:
        """Rows that could not become elements (null key): passed through as rejected records,
        stamped with the batch timestamp."""
        import pandas as pd

        # Spark hands ``_``-prefixed columns over renamed (``_3``...): the rejected columns are
        # the input's last three, in ``rejected_columns`` order.
        pt = tv.getCurrentProcessingTimeInMs() * 1000
        cols = self._columns
        for pdf in rows:
            n = len(pdf)
            data = {c: [None] * n for c in cols}
            data["record_kind"] = [KIND_REJECTED] * n
            data["raw"] = [_decode(v) for v in pdf.iloc[:, -3].tolist()]
            data["source_file"] = [_decode(v) for v in pdf.iloc[:, -2].tolist()]
            data["reason"] = [_decode(v) for v in pdf.iloc[:, -1].tolist()]
            data["processing_time_us"] = [pt] * n
            yield pd.DataFrame(data, columns=cols, dtype=object)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        ekey = self._engine_key(key)
        wm, pt = self._clocks(timerValues)
        state, timer = self._load()
        if state is None:
            return
        out = self.engine.advance(state, ekey, wm, pt)
        # Spark deletes the expired timer itself after this call.
        expired = expiredTimerInfo.getExpiryTimeInMs()
        self._save(state, None if timer == expired else timer, out, timerValues)
        yield from self._emit([out])

    def close(self) -> None:
        if self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(self._profile_path)

    # -- helpers --------------------------------------------------------------------------------

    def _engine_key(self, key: tuple) -> Any:
        return key[0] if self._single_key else tuple(key)

    def _clocks(self, tv) -> tuple[int, int]:
        return (
            self.config.model_watermark(tv.getCurrentWatermarkInMs()),
            tv.getCurrentProcessingTimeInMs() * 1000,
        )

    def _load(self):
        got = self.state.get()
        if got is None:
            return self.engine.new_state(), None
        blob, timer = got
        return self.engine.load_state(bytes(blob)), timer

    def _save(self, state, timer: int | None, out, tv) -> None:
        if state is None or state.is_empty:
            self._clear(timer)
            return
        want = self._retime(timer, out.next_event_time, out.next_processing_time is not None, tv)
        self.state.update((state.to_bytes(), want))

    def _clear(self, timer: int | None) -> None:
        """Nothing left for this grouping key: drop its state and timer."""
        self.state.clear()
        if timer is not None:
            self.handle.deleteTimer(timer)

    def _retime(
        self, timer: int | None, next_event_time: int | None, polls: bool, tv
    ) -> int | None:
        """Keep the one timer at the next event-time wake-up (or the next watermark move, for
        pending processing-time wake-ups); returns the timer now registered."""
        cfg = self.config
        want = None if next_event_time is None else cfg.timer_ms(next_event_time)
        if polls and cfg.poll_processing_time:
            poll = tv.getCurrentWatermarkInMs() + 1
            want = poll if want is None else min(want, poll)
        if want != timer:
            if timer is not None:
                self.handle.deleteTimer(timer)
            if want is not None:
                self.handle.registerTimer(want)
        return want

    def _emit(self, outs) -> Iterator:
        """One pandas frame of the outputs' panes and late elements (in the output schema)."""
        import pandas as pd

        cfg = self.config
        panes = [p for out in outs for p in out.panes]
        dropped = [d for out in outs for d in out.dropped]
        if not panes and not dropped:
            return
        n = len(panes)
        got = pane_columns(panes, cfg.layout) if panes else {}
        data = {c: list(got[c]) if c in got else [None] * n for c in self._columns}
        data["record_kind"] = [KIND_PANE] * n
        for d in dropped:
            r = dropped_record(d, cfg.layout)
            r["record_kind"] = KIND_LATE
            for c, column in data.items():
                column.append(r.get(c))
        # object columns: int64 µs (and the int64 extremes) must not round-trip via float64
        yield pd.DataFrame(data, columns=self._columns, dtype=object)


_NO_VALUES: dict = {}


def _group_by_key(tables: list, kcols: list[str], vcols: list[str], ts_col: str) -> dict:
    """Arrow tables of element rows -> {engine key: [(value, timestamp µs), ...]}, each key's
    elements ordered by timestamp (ties in arrival order; :func:`canonical_order` settles them).

    The value of an element is a dict of the value columns.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tables:
        return {}
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    order = [(c, "ascending") for c in (*kcols, ts_col)]
    table = table.take(pc.sort_indices(table, sort_keys=order))
    n = table.num_rows
    if not vcols:
        vals: list = [_NO_VALUES] * n
    elif len(vcols) == 1:
        name = vcols[0]
        vals = [{name: v} for v in table.column(name).to_pylist()]
    else:
        columns = [table.column(c).to_pylist() for c in vcols]
        vals = [dict(zip(vcols, row, strict=True)) for row in zip(*columns, strict=True)]
    elements = list(zip(vals, table.column(ts_col).to_pylist(), strict=True))
    if len(kcols) == 1:  # sorted by key: one slice per distinct key
        counts = pc.value_counts(table.column(kcols[0])).flatten()
        out, lo = {}, 0
        for key, count in zip(counts[0].to_pylist(), counts[1].to_pylist(), strict=True):
            out[key] = elements[lo : lo + count]
            lo += count
        return out
    keys = zip(*[table.column(c).to_pylist() for c in kcols], strict=True)
    by_key: dict[Any, list[tuple[Any, int]]] = {}
    _group_into(by_key, keys, elements)
    return by_key


def _group_into(by_key: dict[Any, list], keys: Iterable[Any], elements: Iterable[Any]) -> None:
    """Append each element to its key's list in ``by_key`` (keys and elements pairwise)."""
    for k, e in zip(keys, elements, strict=True):
        got = by_key.get(k)
        if got is None:
            by_key[k] = [e]
        else:
            got.append(e)


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


def _decode(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    return value


def _integer(value: Any) -> int:
    return int(_decode(value))


def _reader(config: OperatorConfig, name: str) -> Callable[[Any], Any] | None:
    """How a plain input column's non-null values become element values (None: as they are)."""
    if name in config.integer_columns:
        return _integer
    if name in config.decode_columns:
        return _decode
    return None


def _column(pdf, name: str, read: Callable[[Any], Any] | None = None) -> list:
    """A column as a list, pandas' NaN/NaT nulls as None (and each value ``read``)."""
    col = pdf[name]
    values = col.tolist()
    if read is not None:
        return [None if v is None or v != v else read(v) for v in values]
    if col.hasnans:
        return [None if v != v or v is None else v for v in values]  # NaN != NaN
    return values


def _records(pdf, vcols: list[str], readers: dict[str, Any] | None = None) -> list[dict]:
    """Rows of ``pdf[vcols]`` as dicts (nulls as None), without per-row pandas work."""
    readers = readers or {}
    if not vcols:
        return [_NO_VALUES] * len(pdf)
    if len(vcols) == 1:
        name = vcols[0]
        return [{name: v} for v in _column(pdf, name, readers.get(name))]
    columns = [_column(pdf, c, readers.get(c)) for c in vcols]
    return [dict(zip(vcols, row, strict=True)) for row in zip(*columns, strict=True)]


class BucketProcessor(PaneProcessor):
    """The engine for every key of a key bucket: one Spark state value and one timer per bucket.

    Every state or timer call is a round trip from the Python worker to the JVM, and PySpark's
    per-group overhead (a pandas frame in, a pandas frame out, converted to Arrow) is paid per
    group; grouping by a bucket of keys pays both per bucket instead of per key. The bucket's
    state maps each engine key to ``(KeyState bytes, next event-time wake-up, next
    processing-time wake-up)``; a visit loads only the keys it touches: keys with data, and keys
    whose wake-up is due at the batch's clocks. The model is unchanged: per key, a visit is
    ``advance(watermark, batch time)`` then ``add_elements`` of its rows (if any), exactly as
    :class:`PaneProcessor` does; a key that is not due would fire nothing on ``advance``.

    The bucket timer is the earliest event-time wake-up of its keys (as a Spark watermark), or
    the next watermark advance when a key waits for processing time.
    """

    STATE_NAME = "bucket_state"

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        import pandas as pd
        import pyarrow as pa

        bucket = key[0]
        blobs, plain = [], []
        for pdf in rows:
            has_blob = pdf.iloc[:, 1].notna()
            if has_blob.any():
                blobs.extend(pdf.iloc[:, 1][has_blob].tolist())
                pdf = pdf[~has_blob]
            if len(pdf):
                plain.append(pdf)
        tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
        if bucket == REJECTED_BUCKET:
            yield from self._rejected(
                [pd.DataFrame({c: t.column(c).to_pylist() for c in t.column_names})
                 for t in tables] + plain, timerValues)  # fmt: skip
            return
        cfg = self.config
        kcols, vcols = list(cfg.key_columns), list(cfg.value_columns)
        by_key = _group_by_key(tables, kcols, vcols, cfg.timestamp_column)
        self._add_plain_elements(plain, by_key)
        yield from self._visit(by_key, timerValues, None)

    def _add_plain_elements(self, frames: list, by_key: dict) -> None:
        """Plain element rows -> appended to ``by_key`` ({engine key: [(value, timestamp µs)]})."""
        cfg = self.config
        kcols, vcols = list(cfg.key_columns), list(cfg.value_columns)
        readers = {c: _reader(cfg, c) for c in (*kcols, *vcols)}
        for pdf in frames:
            ts = map(int, pdf[cfg.timestamp_column].tolist())
            vals = _records(pdf, vcols, readers)
            if self._single_key:
                keys = _column(pdf, kcols[0], readers[kcols[0]])
            else:
                keys = list(zip(*[_column(pdf, c, readers[c]) for c in kcols], strict=True))
            _group_into(by_key, keys, zip(vals, ts, strict=True))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        yield from self._visit({}, timerValues, expiredTimerInfo.getExpiryTimeInMs())

    def _visit(self, by_key: dict, tv, expired: int | None) -> Iterator:
        import pickle

        engine = self.engine
        wm, pt = self._clocks(tv)
        got = self.state.get()
        if got is None:
            keys, timer = {}, None
        else:
            keys, timer = pickle.loads(got[0]), got[1]
        if expired is not None and timer == expired:
            timer = None  # Spark deletes the expired timer itself
        outs = []
        for ekey, (blob, ne, npt) in list(keys.items()):
            if ekey in by_key:
                continue
            if (ne is not None and ne <= wm) or (npt is not None and npt <= pt):
                state = engine.load_state(blob)
                outs.append(engine.advance(state, ekey, wm, pt))
                self._store(keys, ekey, state)
        for ekey, elements in by_key.items():
            canonical_order(elements)
            entry = keys.get(ekey)
            state = engine.new_state() if entry is None else engine.load_state(entry[0])
            outs.append(engine.advance(state, ekey, wm, pt))
            outs.append(engine.add_elements(state, ekey, elements))
            self._store(keys, ekey, state)
        self._save_bucket(keys, timer, tv)
        yield from self._emit(outs)

    @staticmethod
    def _store(keys: dict, ekey: Any, state) -> None:
        if state.is_empty:
            keys.pop(ekey, None)
        else:
            keys[ekey] = (state.to_bytes(), state.next_event_time, state.next_processing_time)

    def _save_bucket(self, keys: dict, timer: int | None, tv) -> None:
        import pickle

        if not keys:
            self._clear(timer)
            return
        ne = min((e[1] for e in keys.values() if e[1] is not None), default=None)
        polls = any(e[2] is not None for e in keys.values())
        want = self._retime(timer, ne, polls, tv)
        self.state.update((pickle.dumps(keys, protocol=pickle.HIGHEST_PROTOCOL), want))


PACKED_SCHEMA = f"{BUCKET} int, {BLOB} binary"


def blobs_by_bucket(buckets, payload) -> tuple[list[int], Any, list[bytes]]:
    """Rows of ``payload`` (an Arrow record batch) sorted by ``buckets`` (a numpy array, one
    bucket per row) -> (the distinct buckets, the first row of each, one Arrow IPC stream blob
    of each bucket's rows)."""
    import numpy as np
    import pyarrow as pa

    cuts = np.flatnonzero(np.diff(buckets)) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64) if len(buckets) else cuts
    ends = [*cuts.tolist(), len(buckets)]
    blobs = []
    for lo, hi in zip(starts.tolist(), ends, strict=True):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, payload.schema) as writer:
            writer.write_batch(payload.slice(lo, hi - lo))
        blobs.append(sink.getvalue().to_pybytes())
    return buckets[starts].tolist(), starts, blobs


def pack_by_bucket(batches):
    """``mapInArrow`` function: rows ``(pst_bucket, columns...)`` -> one row per bucket and
    Arrow batch, ``(pst_bucket, pst_blob)``, the blob an Arrow IPC stream of those rows'
    other columns (column names as in the input)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        if batch.num_rows == 0:
            continue
        batch = batch.take(pc.sort_indices(batch.column(0)))
        buckets = batch.column(0).to_numpy(zero_copy_only=False)
        payload = pa.RecordBatch.from_arrays(batch.columns[1:], names=batch.schema.names[1:])
        ids, _, blobs = blobs_by_bucket(buckets, payload)
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int32()), pa.array(blobs, pa.binary())],
            names=[BUCKET, BLOB],
        )


def apply_operator(df, config: OperatorConfig):
    """``df`` (streaming, with a watermark) grouped by key (or key bucket) through
    :class:`PaneProcessor` (or :class:`BucketProcessor`)."""
    if config.buckets is not None:
        return df.groupBy(config.bucket_column).transformWithStateInPandas(
            statefulProcessor=BucketProcessor(config),
            outputStructType=output_spark_schema(config.layout,
                                                 config.rejected_columns is not None),
            outputMode=OUTPUT_MODE,
            timeMode=TIMEMODE,
        )  # fmt: skip
    return df.groupBy(*config.key_columns).transformWithStateInPandas(
        statefulProcessor=PaneProcessor(config),
        outputStructType=output_spark_schema(config.layout, config.rejected_columns is not None),
        outputMode=OUTPUT_MODE,
        timeMode=TIMEMODE,
    )


def split_output(table):
    """Operator output (Arrow) -> (pane core records, late core records)."""
    import pyarrow.compute as pc

    kind = table.column("record_kind")
    return (
        table.filter(pc.equal(kind, KIND_PANE)),
        table.filter(pc.equal(kind, KIND_LATE)),
    )
