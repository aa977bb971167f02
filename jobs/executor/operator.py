"""The stateful operator: the ``panes`` engine per key inside ``transformWithStateInPandas``.

Spark groups the input by key bucket (:mod:`jobs.executor.operator_input`): one ValueState per
bucket (the engine states of its keys, plus the event-time timer currently registered) and at most
one event-time timer per bucket: every state or timer call crosses from the Python worker to the
JVM, so the operator makes as few as it can (one get, one update, and timer calls only when the
wanted timer changes).

Time mapping (Spark ms -> model µs): the model watermark is ``spark_watermark_ms * 1000``.
Spark reports watermark 0 before it has one: that maps to ``BEGINNING_OF_TIME``. A Spark
watermark at or past ``end_of_time_ms`` (a drain) maps to ``END_OF_TIME``. Processing time is the
batch timestamp Spark records in its offset log (deterministic on replay), in µs.

Per batch and key of a visited bucket (TimeMode ``EventTime``; data rows and timers of one batch
see the same watermark, the one in that batch's offset log):

* data: ``advance(watermark, batch time)`` then ``add_elements(rows)``;
* expired timer: ``advance(watermark, batch time)``;

then the state is saved (or cleared when empty) and one timer is set at the earliest of the
engine's next event-time wake-up (as the smallest Spark ms watermark that reaches it) and, if it
has a processing-time wake-up pending, the next watermark advance (``watermark + 1 ms``): Spark
has no processing-time timers in an EventTime query, so those wake-ups are polled whenever the
watermark moves, and are otherwise honoured the next time the key gets data.
"""

from __future__ import annotations

import cProfile
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

try:  # pyspark is optional at import time (the pure test suite runs without it)
    from pyspark.sql.streaming import StatefulProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without pyspark
    _Base = object  # type: ignore[assignment,misc]  # a stand-in so that the module imports

from jobs.executor.bucket_state import BucketState
from jobs.executor.lifting import Lifting, add_bundle
from jobs.executor.operator_input import (
    BLOB,
    BUCKET,
    REJECTED_BUCKET,
    ROW,
    InputSchema,
    canonical_order,
    elements_by_key,
    input_table,
    rejected_records,
)
from jobs.executor.output_tables import (
    DATA_FILE,
    KIND_LATE,
    KIND_PANE,
    KIND_REJECTED,
    PROCESSING_TIME,
    RECORD_KIND,
)
from jobs.executor.task_files import TaskOutput, TaskWriting
from jobs.startup.python_processes import set_gc_thresholds
from panes.time import BEGINNING_OF_TIME, END_OF_TIME
from panes.weights import Retracted
from sinks.lake_format import MAX_TIMESTAMP_MS
from sinks.pane_log import DEFAULT_LAYOUT, PaneLogLayout, core_schema, pane_columns
from sinks.records import dropped_record, late_core_schema

# Spark timestamps end at 9999-12-31; a drain pushes the Spark watermark to here or beyond.
DEFAULT_END_OF_TIME_MS = MAX_TIMESTAMP_MS
RETRACTION_NOTE = "(a retraction: weight -1, its value stays in the window)"
"""Appended to the late-table reason of a dropped element of weight -1 (weighted input)."""
REJECTED_OUTPUT = (
    "raw",
    "source_file",
    "reason",
)  # (see jobs.executor.operator_input.rejected_records)
TIMEMODE = "EventTime"
OUTPUT_MODE = "Append"


def output_arrow_schema(layout: PaneLogLayout = DEFAULT_LAYOUT) -> pa.Schema:
    """Arrow schema of the operator's output (:mod:`jobs.executor.output_tables`): ``record_kind`` +
    pane core + late-only columns + the rejected-only columns (``raw``, ``source_file``; ``reason``
    and ``processing_time_us`` are shared with late records) + ``data_file`` (a file the task wrote,
    :mod:`jobs.executor.task_files`)."""
    fields = [pa.field(RECORD_KIND, pa.string(), nullable=False)]
    names = set()
    for f in (*core_schema(layout), *late_core_schema(layout)):
        if f.name not in names:
            fields.append(f.with_nullable(True))
            names.add(f.name)
    fields += [pa.field(n, pa.string()) for n in REJECTED_OUTPUT if n not in names]
    fields.append(pa.field(DATA_FILE, pa.string()))
    return pa.schema(fields)


def output_spark_schema(layout: PaneLogLayout = DEFAULT_LAYOUT):
    """The same as a Spark ``StructType`` (for ``transformWithStateInPandas``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(output_arrow_schema(layout))


def state_spark_schema():
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    return StructType([StructField("blob", BinaryType()), StructField("timer_ms", LongType())])


@dataclass(frozen=True)
class OperatorConfig:
    """What the operator needs besides its input; picklable (shipped to the Python workers).

    ``engine_factory`` builds the ``panes.engine.Engine`` on the worker (a module-level function or
    a picklable callable object); its element values are dicts of the value columns (what named
    aggregates, ``panes.combiners.aggregates``, read). ``column_types``: the Arrow type of each key
    and value column (:class:`jobs.executor.operator_input.InputSchema`). ``end_of_time_ms``: the
    Spark watermark of a drain. ``writing``: how a task that emits many rows writes them itself
    (:mod:`jobs.executor.task_files`; None: every row leaves the task as a row). ``profile_dir``: a
    developer aid, each task's processor is profiled (cProfile) into a file there.
    ``lift_combiners``: combine a bucket's elements per key and window in Arrow where the
    pipeline allows it (:mod:`jobs.executor.lifting`; False: always element by element, what
    the tests compare it with).
    """

    engine_factory: Callable[[], Any]
    key_columns: Sequence[str] = ("key",)
    value_columns: Sequence[str] = ("value",)
    column_types: tuple[tuple[str, pa.DataType], ...] = ()
    layout: PaneLogLayout = DEFAULT_LAYOUT
    end_of_time_ms: int = DEFAULT_END_OF_TIME_MS
    profile_dir: str | None = None
    weighted: bool = False
    writing: TaskWriting | None = None
    lift_combiners: bool = True

    @property
    def input_schema(self) -> InputSchema:
        return InputSchema(
            tuple(self.key_columns),
            tuple(self.value_columns),
            tuple(self.column_types),
            self.weighted,
        )

    # -- time mapping ---------------------------------------------------------------------------

    def model_watermark(self, spark_watermark_ms: int) -> int:
        if spark_watermark_ms <= 0:
            return BEGINNING_OF_TIME
        if spark_watermark_ms >= self.end_of_time_ms:
            return END_OF_TIME
        return spark_watermark_ms * 1000

    def timer_ms(self, model_time_us: int) -> int:
        """Smallest Spark watermark (ms) whose model watermark reaches ``model_time_us``."""
        if model_time_us >= END_OF_TIME:
            return self.end_of_time_ms
        ms = -((-model_time_us) // 1000)  # ceil
        return max(1, min(ms, self.end_of_time_ms))


class BucketProcessor(_Base):
    """``StatefulProcessor`` hosting the engine for every key of a key bucket.

    Every state or timer call is a round trip from the Python worker to the JVM, and PySpark's
    per-group overhead (a pandas frame in, a pandas frame out, converted to Arrow) is paid per
    group; grouping by a bucket of keys pays both per bucket instead of per key. The bucket's
    state holds each engine key's state bytes and next wake-ups as one compressed Arrow table
    (:mod:`jobs.executor.bucket_state`); a visit decodes only the keys it touches: keys with
    data, and keys whose wake-up is due at the batch's clocks, and stores the bucket only when
    it changed. Per key, a visit is ``advance(watermark, batch
    time)`` then ``add_elements`` of its rows (if any); a key that is not due would fire nothing
    on ``advance``.

    The bucket timer is the earliest event-time wake-up of its keys (as a Spark watermark), or
    the next watermark advance when a key waits for processing time. Rejected records (bucket
    ``REJECTED_BUCKET``) are passed through as ``record_kind = "rejected"`` rows, stamped with
    the batch timestamp.
    """

    STATE_NAME = "bucket_state"

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._engine = None
        self._lifting: Lifting | None = None

    # -- Spark callbacks ------------------------------------------------------------------------

    def init(self, handle) -> None:
        self.attach(handle, handle.getValueState(self.STATE_NAME, state_spark_schema()))

    def attach(self, handle, state) -> None:
        """What ``init`` does, given the bucket's ValueState (made by ``init`` of the
        :class:`jobs.executor.processor_shell.ProcessorShell` Spark runs)."""
        set_gc_thresholds()
        self.handle = handle
        self.state = state
        self._columns = output_arrow_schema(self.config.layout).names
        schema = self.config.input_schema
        self._key_fields = tuple(pa.field(k, schema.arrow_type(k)) for k in schema.keys)
        self.output = TaskOutput(self._columns, self.config.writing)
        self._profile = None
        if self.config.profile_dir:
            self._profile = cProfile.Profile()
            name = f"{os.getpid()}-{time.time_ns()}.prof"
            self._profile_path = os.path.join(self.config.profile_dir, name)
            self._profile.enable()

    @property
    def engine(self):
        if self._engine is None:
            self._engine = self.config.engine_factory()
            lifting = None
            if self.config.lift_combiners:
                lifting = Lifting.of(self._engine, self.config.input_schema)
            self._lifting = lifting
        return self._engine

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        blobs: list[bytes] = []
        plain: list[bytes] = []
        for pdf in rows:  # each input row holds a blob or a row (jobs.executor.operator_input)
            blobs += [b for b in pdf[BLOB].tolist() if isinstance(b, bytes)]
            plain += [r for r in pdf[ROW].tolist() if isinstance(r, bytes)]
        table = input_table(blobs, plain, self.config.input_schema)
        if key[0] == REJECTED_BUCKET:
            yield from self._rejected(table, timerValues)
            return
        schema, engine = self.config.input_schema, self.engine
        by_key: dict[Any, Any] | None = None
        if self._lifting is not None and table is not None:
            watermark = self._clocks(timerValues)[0]
            cutoff = engine.droppable_before(watermark)
            by_key = self._lifting.combined_by_key(table, watermark, cutoff)
        if by_key is None:
            by_key = elements_by_key(table, schema)
            for elements in by_key.values():
                canonical_order(elements)
            yield from self._visit(by_key, timerValues, None, engine.add_elements)
        else:
            yield from self._visit(by_key, timerValues, None, partial(add_bundle, engine))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        expired = expiredTimerInfo.getExpiryTimeInMs()
        yield from self._visit({}, timerValues, expired, self.engine.add_elements)

    def close(self) -> None:
        """The end of the task: the files still collecting rows are written."""
        self.output.close()
        if self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(self._profile_path)

    # -- a visit --------------------------------------------------------------------------------

    def _visit(self, by_key: dict, tv, expired: int | None, add: Callable) -> Iterator:
        """Visit the bucket: advance its due keys and the keys of ``by_key``, then ``add``
        (:meth:`panes.engine.Engine.add_elements` of elements in canonical order, or
        :func:`jobs.executor.lifting.add_bundle` of lifted bundles) each key's bundle."""
        engine = self.engine
        wm, pt = self._clocks(tv)
        got = self.state.get()
        blob, timer = (None, None) if got is None else got
        bucket = BucketState.load(blob, self._key_fields)
        if expired is not None and timer == expired:
            timer = None  # Spark deletes the expired timer itself
        outs = []
        due = [k for k in bucket.due(wm, pt) if k not in by_key]
        for ekey, loaded in zip(due, bucket.states_of(due), strict=True):
            state = engine.load_state(loaded)
            outs.append(engine.advance(state, ekey, wm, pt))
            self._store(bucket, ekey, state)
        touched = list(by_key)
        for ekey, loaded in zip(touched, bucket.states_of(touched), strict=True):
            state = engine.new_state() if loaded is None else engine.load_state(loaded)
            outs.append(engine.advance(state, ekey, wm, pt))
            outs.append(add(state, ekey, by_key[ekey]))
            self._store(bucket, ekey, state)
        self._save_bucket(bucket, blob, timer, tv)
        yield from self._emit(outs)

    def _rejected(self, table: pa.Table | None, tv) -> Iterator:
        """Rows that could not become elements, passed through as rejected records."""
        records = rejected_records(table)
        n = len(records["raw"])
        records[PROCESSING_TIME] = [tv.getCurrentProcessingTimeInMs() * 1000] * n
        yield from self.output.emit(KIND_REJECTED, records, n)

    @staticmethod
    def _store(bucket: BucketState, ekey: Any, state) -> None:
        if state.is_empty:
            bucket.remove(ekey)
        else:
            bucket.put(ekey, state.to_bytes(), state.next_event_time, state.next_processing_time)

    def _save_bucket(self, bucket: BucketState, loaded: bytes | None, timer: int | None, tv):
        """Store the bucket (unless the visit changed nothing) and keep its one timer."""
        saved = bucket.save()
        if saved.blob is None:
            if loaded is not None:
                self.state.clear()
            if timer is not None:
                self.handle.deleteTimer(timer)
            return
        want = self._retime(timer, saved.next_event_time, saved.polls, tv)
        if saved.blob is not loaded or want != timer:
            self.state.update((saved.blob, want))

    def _clocks(self, tv) -> tuple[int, int]:
        return (
            self.config.model_watermark(tv.getCurrentWatermarkInMs()),
            tv.getCurrentProcessingTimeInMs() * 1000,
        )

    def _retime(
        self, timer: int | None, next_event_time: int | None, polls: bool, tv
    ) -> int | None:
        """Keep the one timer at the next event-time wake-up (or the next watermark move, for
        pending processing-time wake-ups); returns the timer now registered."""
        want = None if next_event_time is None else self.config.timer_ms(next_event_time)
        if polls:
            poll = tv.getCurrentWatermarkInMs() + 1
            want = poll if want is None else min(want, poll)
        if want != timer:
            if timer is not None:
                self.handle.deleteTimer(timer)
            if want is not None:
                self.handle.registerTimer(want)
        return want

    def _emit(self, outs) -> Iterator:
        """The outputs' panes and late elements (:class:`jobs.executor.task_files.TaskOutput`)."""
        layout = self.config.layout
        panes = [p for out in outs for p in out.panes]
        if panes:
            yield from self.output.emit(KIND_PANE, pane_columns(panes, layout), len(panes))
        dropped = [d for out in outs for d in out.dropped]
        if dropped:
            late: dict[str, list[Any]] = {c: [] for c in late_core_schema(layout).names}
            for d in dropped:
                if type(d.value) is Retracted:  # its value as read, the weight in the reason
                    d = d._replace(value=d.value.value, reason=f"{d.reason} {RETRACTION_NOTE}")
                r = dropped_record(d, layout)
                for c, column in late.items():
                    column.append(r.get(c))
            yield from self.output.emit(KIND_LATE, late, len(dropped))


def apply_operator(rows, config: OperatorConfig):
    """``rows`` (streaming, with a watermark; :data:`jobs.executor.operator_input.OPERATOR_INPUT`)
    grouped by bucket through :class:`BucketProcessor` (shipped in a
    :class:`jobs.executor.processor_shell.ProcessorShell`)."""
    from jobs.executor.processor_shell import ProcessorShell  # needs pyspark

    shell = ProcessorShell(
        BucketProcessor(config), BucketProcessor.STATE_NAME, state_spark_schema()
    )
    return rows.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=shell,
        outputStructType=output_spark_schema(config.layout),
        outputMode=OUTPUT_MODE,
        timeMode=TIMEMODE,
    )
