"""The stateful operator: a ``panes`` engine per key bucket, run by Spark tasks over a batch.

The batch sink (:mod:`jobs.driver.batch_sink`) runs the operator over each micro-batch's input in
one Spark job (:class:`OperatorBatch`, a ``mapInArrow`` function over the input repartitioned by
key bucket into the lake's shards). Beside each input row with a clock (the value of the column
Spark's watermark follows), a row of that clock goes to every shard
(:func:`jobs.executor.operator_input.with_clock_rows`), so each shard's task knows the batch's
largest clock once it has read its input. A shard's task loads its buckets' states
(:mod:`jobs.executor.state_store`), visits every bucket with input and every bucket whose timer
the batch's watermark reached (:class:`BucketProcessor`), then, when the batch moved the
watermark (Spark's rule: :func:`watermark_after`), every bucket whose timer the new watermark
reached; it sends on its output, stores the buckets it changed as the batch's version, and
reports the largest clock, from which the sink records the new watermark. Spark's next batch
runs at the same watermark: it computes it from the same rows.

Time mapping (Spark ms -> model µs): the model watermark is ``spark_watermark_ms * 1000``.
Spark reports watermark 0 before it has one: that maps to ``BEGINNING_OF_TIME``. A Spark
watermark at or past ``end_of_time_ms`` (a drain) maps to ``END_OF_TIME``. Processing time is the
batch timestamp Spark records in its offset log (deterministic on replay), in µs.

Per visit and key of a visited bucket:

* data (at the batch's watermark): ``advance(watermark, batch time)`` then ``add_elements(rows)``;
* a due timer (at the batch's watermark, then at the one after it): ``advance(watermark, batch
  time)``;

then the bucket's state is stored (or dropped when empty) with one timer, the earliest of the
engine's next event-time wake-ups of its keys (as the smallest Spark ms watermark that reaches it)
and, if a key has a processing-time wake-up pending, the next watermark advance
(``watermark + 1 ms``): processing-time wake-ups are polled whenever the watermark moves, and are
otherwise honoured the next time the key gets data.
"""

from __future__ import annotations

import cProfile
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from jobs.checkpoint.clocks import Clocks
from jobs.checkpoint.input_clocks import InputsAtBatch, watermark_ms
from jobs.executor import dedup_state, window_store
from jobs.executor.bucket_state import BucketState
from jobs.executor.operator_input import (
    BLOB,
    BUCKET,
    CLOCK,
    LANE,
    REJECTED_BUCKET,
    ROW,
    InputSchema,
    bucket_runs,
    canonical_order,
    carries_only_a_clock,
    clock_lanes,
    elements_by_key,
    input_table,
    rejected_records,
    spark_partition_of_int,
    with_clock_rows,
)
from jobs.executor.output_tables import (
    DATA_FILE,
    INPUT_RECORDS,
    KIND_CLOCK,
    KIND_LATE,
    KIND_PANE,
    KIND_REJECTED,
    PROCESSING_TIME,
    RECORD_KIND,
)
from jobs.executor.state_store import ShardStore, Stored, batch_versions
from jobs.executor.task_files import TaskOutput, TaskWriting
from jobs.startup.python_processes import gc_thresholds
from panes.columnar import Windows, add_bundle
from panes.engines import EngineKind, Engines, build
from panes.inputs import INPUT_COLUMN
from panes.time import BEGINNING_OF_TIME, END_OF_TIME
from panes.weights import Retracted
from sinks.lake import (
    DEFAULT_LAYOUT,
    MAX_TIMESTAMP_MS,
    PaneLogLayout,
    core_schema,
    dropped_record,
    late_core_schema,
    pane_rows,
    panes_as_columns,
)

# Spark timestamps end at 9999-12-31; a drain pushes the Spark watermark to here or beyond.
DEFAULT_END_OF_TIME_MS = MAX_TIMESTAMP_MS
RETRACTION_NOTE = "(a retraction: weight -1, its value stays in the window)"
"""Appended to the late-table reason of a dropped element of weight -1 (weighted input)."""
REJECTED_OUTPUT = (
    "raw",
    "source_file",
    "reason",
)  # (see jobs.executor.operator_input.rejected_records)


def output_arrow_schema(layout: PaneLogLayout = DEFAULT_LAYOUT) -> pa.Schema:
    """Arrow schema of the operator's output (:mod:`jobs.executor.output_tables`): ``record_kind`` +
    pane core + late-only columns + the rejected-only columns (``raw``, ``source_file``; ``reason``
    and ``processing_time_us`` are shared with late records) + ``data_file`` (a file the task wrote,
    :mod:`jobs.executor.task_files`) + ``pst_clock`` and ``pst_records`` (a task's largest input
    clock and its input records: the one row of kind ``clock`` per task)."""
    fields = [pa.field(RECORD_KIND, pa.string(), nullable=False)]
    names = set()
    for f in (*core_schema(layout), *late_core_schema(layout)):
        if f.name not in names:
            fields.append(f.with_nullable(True))
            names.add(f.name)
    fields += [pa.field(n, pa.string()) for n in REJECTED_OUTPUT if n not in names]
    fields.append(pa.field(DATA_FILE, pa.string()))
    fields.append(pa.field(CLOCK, pa.int64()))
    fields.append(pa.field(INPUT_RECORDS, pa.int64()))
    fields.append(pa.field(LANE, pa.int32()))
    return pa.schema(fields)


def output_spark_schema(layout: PaneLogLayout = DEFAULT_LAYOUT):
    """The same as a Spark ``StructType`` (the operator's ``mapInArrow`` schema)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(output_arrow_schema(layout))


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
    ``lift_combiners``, ``columnar_windows``: False keeps the pipeline off the lifted and columnar
    paths (:meth:`engines`, which chooses the path once per pipeline; what the tests and
    benchmarks compare those paths with). ``dedup``: the id columns of a
    deduplicated pipeline, remembered for ``dedup_horizon`` (None: the windows';
    :mod:`jobs.executor.dedup_state`).
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
    columnar_windows: bool = True
    dedup: tuple[str, ...] = ()
    dedup_horizon: int | None = None

    @property
    def input_schema(self) -> InputSchema:
        return InputSchema(
            tuple(self.key_columns),
            tuple(self.value_columns),
            tuple(self.column_types),
            self.weighted,
            bool(self.dedup),
        )

    def engines(self) -> Engines:
        """The pipeline's engine on its path (``docs/semantics.md``, "The operator's path"),
        chosen and built by the model's one factory (:func:`panes.engines.build`) over the
        operator's input, which adds only what that input says: a batch's rows come in no
        fixed order (``unordered``: an aggregate whose value depends on their order, ``to_list``
        or a combiner of your own that says so, takes the per-element path, which sorts each
        key's rows, :func:`jobs.executor.operator_input.canonical_order`), and a pane-log layout
        that maps values itself keeps it off the columnar engine
        (:attr:`sinks.lake.PaneLogLayout.not_columnar`). Nothing at run time changes the path:
        not a key, a window or a value.

        >>> from panes import FixedWindows, Windowing, combiners
        >>> from panes.engine import Engine
        >>> from panes.engines import ORDERED
        >>> columns = (("k", pa.string()), ("n", pa.int64()))
        >>> def config(fn):
        ...     engine = lambda: Engine(Windowing(FixedWindows(10)), fn)
        ...     return OperatorConfig(engine, ("k",), ("n",), columns)
        >>> config(combiners.aggregates(total=combiners.sum("n"))).engines().kind.value
        'columnar'
        >>> engines = config(combiners.to_list("n")).engines()
        >>> engines.kind.value, engines.not_columnar == ORDERED
        ('per element', True)
        """
        return build(
            self.engine_factory(),
            self.input_schema.columns_of_elements(),
            lift=self.lift_combiners,
            columnar=self.columnar_windows,
            unordered=True,  # a batch's rows come in no fixed order
            columnar_off=self.layout.not_columnar,
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


class BucketProcessor:
    """Hosts the engine for the buckets of one task: one visit per bucket and watermark.

    The pipeline's path (:meth:`OperatorConfig.engines`) is chosen once, when the engine is
    built. On the columnar path a bucket's state is a table of its windows, visited column by
    column by the model's columnar engine (:class:`panes.columnar.ColumnarEngine`; stored by
    :mod:`jobs.executor.window_store`). On the others it holds each engine key's state
    bytes and next wake-ups as one compressed Arrow table (:mod:`jobs.executor.bucket_state`);
    a visit decodes only the keys it touches:
    keys with data, and keys whose wake-up is due at the visit's clocks, and keeps the bucket's
    bytes when it changed nothing. Per key, a visit is ``advance(watermark, batch time)`` then
    ``add_elements`` of its rows (if any); a key that is not due would fire nothing on
    ``advance``. Rejected records (bucket ``REJECTED_BUCKET``) are passed through as
    ``record_kind = "rejected"`` rows, stamped with the batch timestamp.
    """

    def __init__(self, config: OperatorConfig, output: TaskOutput) -> None:
        self.config = config
        self.output = output
        schema = config.input_schema
        self._key_fields = tuple(pa.field(k, schema.arrow_type(k)) for k in schema.keys)

    @cached_property
    def engines(self) -> Engines:
        """The pipeline's engine on its path, built on first use
        (:meth:`OperatorConfig.engines`)."""
        return self.config.engines()

    @property
    def path(self) -> EngineKind:
        """The pipeline's path: the engine it runs on (:meth:`OperatorConfig.engines`)."""
        return self.engines.kind

    @cached_property
    def _dedup(self) -> dedup_state.Dedup | None:
        """How the pipeline deduplicates (None: it does not), by its windows' rules."""
        config = self.config
        if not config.dedup:
            return None
        return dedup_state.Dedup(
            tuple(config.dedup),
            self.engines.rules,
            config.dedup_horizon,
            tuple(config.key_columns),
            tuple(config.value_columns),
        )

    def visit(
        self, stored: Stored | None, table: pa.Table | None, clocks: Clocks
    ) -> tuple[list[pa.RecordBatch], Stored | None]:
        """Visit a bucket stored as ``stored`` with its input rows ``table`` (None: a timer's
        visit) -> the output batches, and the bucket's state after (None: empty). A
        deduplicated pipeline's duplicates are taken out of ``table`` first, whatever the path,
        and become rejected rows (:mod:`jobs.executor.dedup_state`)."""
        dedup = self._dedup
        if dedup is None:
            return self._visit_windows(stored, table, clocks)
        ids, inner = dedup_state.unwrap(stored)
        table, duplicates, ids = dedup.split(table, ids, self._clocks(clocks)[0])
        outs = [] if duplicates is None else list(self.rejected(duplicates, clocks))
        more, after = self._visit_windows(inner, table, clocks)
        outs += more
        first = dedup_state.first_forget(ids)
        timer = after.timer_ms if after is not None else None
        if first is not None:
            at = self.config.timer_ms(first)
            timer = at if timer is None else min(timer, at)
        wrapped = dedup_state.wrap(ids, after, timer)
        if wrapped == stored:
            return outs, stored
        return outs, wrapped

    def held(self, stored: Stored | None) -> Held:
        """What a bucket stored as ``stored`` holds, decoded as a visit decodes it, by the
        pipeline's path (what :mod:`jobs.executor.state_summary` reads; nothing is changed)."""
        ids: dict[bytes, int] = {}
        if self._dedup is not None:
            ids, stored = dedup_state.unwrap(stored)
        blob = None if stored is None else stored.blob
        columnar = self.engines.columnar
        if columnar is not None:
            return Held(len(ids), window_store.load(columnar, blob), None)
        return Held(len(ids), None, BucketState.load(blob, self._key_fields))

    def _visit_windows(
        self, stored: Stored | None, table: pa.Table | None, clocks: Clocks
    ) -> tuple[list[pa.RecordBatch], Stored | None]:
        """The visit of the bucket's windows by the pipeline's path."""
        if self.engines.columnar is not None:
            return self._visit_columnar(stored, table, clocks)
        bucket = BucketState.load(None if stored is None else stored.blob, self._key_fields)
        outs = self._visit_keys(bucket, table, clocks)
        return list(self._emit(outs)), self._stored(bucket, stored, clocks)

    def rejected(self, table: pa.Table | None, clocks: Clocks) -> Iterator[pa.RecordBatch]:
        """Rows that could not become elements, passed through as rejected records."""
        records = rejected_records(table)
        n = len(records["raw"])
        records[PROCESSING_TIME] = [clocks.processing_ms * 1000] * n
        yield from self.output.emit(KIND_REJECTED, records, n)

    def close(self) -> None:
        """The end of the task: the files still collecting rows are written."""
        self.output.close()

    # -- a visit --------------------------------------------------------------------------------

    def _visit_keys(self, bucket: BucketState, table: pa.Table | None, clocks: Clocks) -> list:
        """The engine's visit of ``bucket`` (changed in place) with its input rows: per key
        with rows or a wake-up due, ``advance`` then the rows (lifted: parts; else element by
        element) -> the engine's outputs."""
        schema, engines = self.config.input_schema, self.engines
        engine, lifting = engines.per_key, engines.lifting
        wm, pt = self._clocks(clocks)
        by_key: dict[Any, Any]
        add: Callable = engine.add_elements
        if table is None:
            by_key = {}
        elif lifting is not None:
            by_key = lifting.combined_by_key(table, wm)
            add = partial(add_bundle, engine)
        else:
            by_key = elements_by_key(table, schema)
            for elements in by_key.values():
                canonical_order(elements)
        outs = []
        due = [k for k in bucket.due(wm, pt) if k not in by_key]
        for ekey, loaded in zip(due, bucket.states_of(due), strict=True):
            if loaded is None:
                continue
            state = engine.load_state(loaded)
            outs.append(engine.advance(state, ekey, wm, pt))
            self._store(bucket, ekey, state)
        touched = list(by_key)
        for ekey, loaded in zip(touched, bucket.states_of(touched), strict=True):
            state = engine.new_state() if loaded is None else engine.load_state(loaded)
            outs.append(engine.advance(state, ekey, wm, pt))
            outs.append(add(state, ekey, by_key[ekey]))
            self._store(bucket, ekey, state)
        return outs

    def _visit_columnar(
        self, stored: Stored | None, table: pa.Table | None, clocks: Clocks
    ) -> tuple[list[pa.RecordBatch], Stored | None]:
        """A visit of the bucket by the columnar engine."""
        columnar = self.engines.columnar
        assert columnar is not None
        wm, pt = self._clocks(clocks)
        windows = window_store.load(columnar, None if stored is None else stored.blob)
        visit = columnar.visit(windows, table, wm, pt)
        outs: list[pa.RecordBatch] = []
        panes = visit.panes()
        if panes is not None:
            outs.extend(
                self.output.emit(KIND_PANE, pane_rows(panes, self.config.layout), len(panes))
            )
        outs.extend(self._emit_dropped(visit.dropped))
        if not visit.changed:
            return outs, stored
        saved = window_store.save(visit.windows)
        if saved is None:
            return outs, None
        timer = self._timer(visit.windows.next_due(), False, clocks)
        if stored is not None and saved == stored.blob and timer == stored.timer_ms:
            return outs, stored
        return outs, Stored(saved, timer)

    @staticmethod
    def _store(bucket: BucketState, ekey: Any, state) -> None:
        if state.is_empty:
            bucket.remove(ekey)
        else:
            bucket.put(ekey, state.to_bytes(), state.next_event_time, state.next_processing_time)

    def _stored(self, bucket: BucketState, before: Stored | None, clocks: Clocks) -> Stored | None:
        """The bucket's state after a visit (``before`` itself when nothing changed) and its one
        timer: the next event-time wake-up, or the next watermark move for pending
        processing-time wake-ups."""
        saved = bucket.save()
        if saved.blob is None:
            return None
        want = self._timer(saved.next_event_time, saved.polls, clocks)
        if before is not None and saved.blob is before.blob and want == before.timer_ms:
            return before
        return Stored(saved.blob, want)

    def _timer(self, next_event_time: int | None, polls: bool, clocks: Clocks) -> int | None:
        """A bucket's one timer: its next event-time wake-up, or earlier the next watermark move
        when a key polls for processing time (None: neither)."""
        want = None if next_event_time is None else self.config.timer_ms(next_event_time)
        if polls:
            poll = clocks.watermark_ms + 1
            want = poll if want is None else min(want, poll)
        return want

    def _clocks(self, clocks: Clocks) -> tuple[int, int]:
        return self.config.model_watermark(clocks.watermark_ms), clocks.processing_ms * 1000

    def _emit(self, outs) -> Iterator[pa.RecordBatch]:
        """The outputs' panes and late elements (:class:`jobs.executor.task_files.TaskOutput`)."""
        layout = self.config.layout
        panes = [p for out in outs for p in out.panes]
        if panes:
            rows = pane_rows(panes_as_columns(panes, layout), layout)
            yield from self.output.emit(KIND_PANE, rows, len(panes))
        yield from self._emit_dropped([d for out in outs for d in out.dropped])

    def _emit_dropped(self, dropped: Sequence[Any]) -> Iterator[pa.RecordBatch]:
        """Late-table rows of dropped elements."""
        layout = self.config.layout
        if dropped:
            late: dict[str, list[Any]] = {c: [] for c in late_core_schema(layout).names}
            for d in dropped:
                if type(d.value) is Retracted:  # its value as read, the weight in the reason
                    d = d._replace(value=d.value.value, reason=f"{d.reason} {RETRACTION_NOTE}")
                r = dropped_record(d, layout)
                for c, column in late.items():
                    column.append(r.get(c))
            yield from self.output.emit(KIND_LATE, late, len(dropped))


class Held(NamedTuple):
    """A bucket's stored state decoded (:meth:`BucketProcessor.held`): the ids a deduplicated
    pipeline remembers in it (0 for other pipelines), and its windows: on the columnar path a
    table of windows (``keys`` None), on the others its keys' engine states (``windows``
    None)."""

    ids: int
    windows: Windows | None
    keys: BucketState | None


@dataclass(frozen=True)
class OperatorBatch:
    """The operator over a batch's input: a ``mapInArrow`` function over the input and its
    clock rows repartitioned by bucket into the lake's shards (:func:`run_batch`). Picklable.

    The task of shard ``p`` loads the state its buckets had before batch ``batch_id``, then:

    * visits, at the batch's ``clocks``, the buckets with input rows and the buckets whose timer
      the batch's watermark reached;
    * computes the watermark after the batch from the largest
      :data:`~jobs.executor.operator_input.CLOCK` of the whole batch (its clock rows:
      :func:`~jobs.executor.operator_input.with_clock_rows`) by Spark's rule
      (:func:`watermark_after`), and, if it moved, visits at it the buckets whose timer it
      reached (their panes are the batch's own);
    * stores what changed as the batch's state version (:mod:`jobs.executor.state_store`), and
      yields its output and one ``clock`` row: that largest clock (null: none) and the input
      records it took (:data:`~jobs.executor.output_tables.INPUT_RECORDS`: the rows of its
      buckets' elements, rejected records included).

    A bucket that reaches another shard's task (input partitioned otherwise than Spark's hash of
    the bucket into ``shards``) stops the task: its state is in that shard's files. The task
    collects garbage less often while it runs, and gives its worker back with the thresholds it
    had (:func:`~jobs.startup.python_processes.gc_thresholds`).
    """

    config: OperatorConfig
    state_root: str
    clocks: Clocks
    batch_id: int
    shards: int = 1
    delay_ms: int = 0
    #: A pipeline of several inputs: the rule of its watermark (the minimum of the inputs', with
    #: idleness), applied to each input's largest clock of the batch (its clock rows by lane).
    inputs: InputsAtBatch | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with gc_thresholds():  # the task's own: its worker goes back to Spark's pool as it came
            yield from self._task(batches)

    def _task(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        task = TaskContext.get()
        shard = task.partitionId() if task is not None else 0
        store = ShardStore(self.state_root, shard)
        profile = self._profiler()
        reads, writes = batch_versions(self.batch_id)
        states = store.load(reads)
        schema = output_arrow_schema(self.config.layout)
        processor = BucketProcessor(self.config, TaskOutput(schema, self.config.writing))
        changed, visited, records = False, set(), 0
        by_input: dict[int, int] = {}  # several inputs: the records of each (by lane)
        table = _input(batches)
        clock = None if table is None else pc.max(table.column(CLOCK)).as_py()
        lanes = self._lane_clocks(table)
        for bucket, rows in _by_bucket(table):
            if carries_only_a_clock(bucket):
                continue
            elements = input_table(
                [b for b in rows.column(BLOB).to_pylist() if b is not None],
                [r for r in rows.column(ROW).to_pylist() if r is not None],
                self.config.input_schema,
            )
            records += 0 if elements is None else elements.num_rows
            self._count_by_input(elements, by_input)
            if bucket == REJECTED_BUCKET:
                yield from processor.rejected(elements, self.clocks)
                continue
            if spark_partition_of_int(bucket, self.shards) != shard:  # its state is elsewhere
                raise RuntimeError(
                    f"bucket {bucket} reached shard {shard} of {self.shards}, not its own: the "
                    "operator's input must be hash-partitioned by bucket into the lake's shards"
                )
            visited.add(bucket)
            out, after = processor.visit(states.get(bucket), elements, self.clocks)
            changed |= _put(states, bucket, after)
            yield from out
        changed |= yield from _visit_due(processor, states, self.clocks, visited)
        if self.inputs is None:
            fired = watermark_after(self.clocks.watermark_ms, clock, self.delay_ms)
        else:
            fired = watermark_ms(self.inputs.after(lanes).watermark_after)
        if fired > self.clocks.watermark_ms:  # the batch's own watermark advance
            fire = Clocks(fired, self.clocks.processing_ms)
            changed |= yield from _visit_due(processor, states, fire, set())
        processor.close()
        if changed:
            store.save(writes, states)
        if profile is not None:
            profile.disable()
            profile.dump_stats(os.path.join(self.config.profile_dir or ".", _profile_name()))
        clock_row: dict[str, list[Any]] = {c: [None] for c in schema.names}
        clock_row[RECORD_KIND], clock_row[CLOCK] = [KIND_CLOCK], [clock]
        clock_row[INPUT_RECORDS] = [records]
        yield pa.RecordBatch.from_pydict(clock_row, schema=schema)
        # each input's largest clock (every task sees it alike) and the records it took of it
        for lane in sorted({*lanes, *by_input}):
            lane_row: dict[str, list[Any]] = {c: [None] for c in schema.names}
            lane_row[RECORD_KIND], lane_row[LANE] = [KIND_CLOCK], [lane]
            lane_row[CLOCK], lane_row[INPUT_RECORDS] = [lanes.get(lane)], [by_input.get(lane, 0)]
            yield pa.RecordBatch.from_pydict(lane_row, schema=schema)

    def _count_by_input(self, elements: pa.Table | None, counts: dict[int, int]) -> None:
        """With several inputs: add ``elements``' records (their input column names it) to
        ``counts``, by lane."""
        if self.inputs is None or elements is None or not elements.num_rows:
            return
        names = self.inputs.inputs.names
        for item in pc.value_counts(elements.column(INPUT_COLUMN)).to_pylist():
            lane = names.index(item["values"])
            counts[lane] = counts.get(lane, 0) + item["counts"]

    def _lane_clocks(self, table: pa.Table | None) -> dict[int, int]:
        """With several inputs: each input's largest clock of the batch (µs) by lane, from the
        rows of the lanes' clock buckets this task got (:func:`clock_lanes`)."""
        if self.inputs is None or table is None:
            return {}
        lane_of = clock_lanes(self.shards, self.inputs.lanes)
        found: dict[int, int] = {}
        for bucket, clock in zip(
            table.column(BUCKET).to_pylist(), table.column(CLOCK).to_pylist(), strict=True
        ):
            lane = lane_of.get(bucket)
            if lane is not None and clock is not None:
                found[lane] = max(clock, found.get(lane, clock))
        return found

    def _profiler(self) -> cProfile.Profile | None:
        if not self.config.profile_dir:
            return None
        profile = cProfile.Profile()
        profile.enable()
        return profile


def _profile_name() -> str:
    return f"{os.getpid()}-{time.time_ns()}.prof"


def _visit_due(
    processor: BucketProcessor, states: dict[int, Stored], clocks: Clocks, visited: set[int]
) -> Generator[pa.RecordBatch, None, bool]:
    """Visit at ``clocks`` every bucket whose timer they reached, but those already ``visited``
    there: their output; returns whether a bucket's state changed (``states`` is updated)."""
    changed = False
    for bucket, stored in sorted(states.items()):
        if bucket in visited or stored.timer_ms is None or stored.timer_ms > clocks.watermark_ms:
            continue
        out, after = processor.visit(stored, None, clocks)
        changed |= _put(states, bucket, after)
        yield from out
    return changed


def _put(states: dict[int, Stored], bucket: int, after: Stored | None) -> bool:
    """Record a bucket's state after a visit; whether it changed."""
    before = states.get(bucket)
    if after is before:
        return False
    if after is None:
        del states[bucket]
    else:
        states[bucket] = after
    return True


def watermark_after(watermark_ms: int, clock_us: int | None, delay_ms: int) -> int:
    """The watermark after a batch at ``watermark_ms`` whose largest clock was ``clock_us``, as
    Spark computes it: the largest event time in ms (µs divided towards zero) minus the delay,
    if that is later.

    >>> watermark_after(1_000, 9_999_999, 5_000), watermark_after(1_000, None, 0)
    (4999, 1000)
    """
    if clock_us is None:
        return watermark_ms
    ms = clock_us // 1000 if clock_us >= 0 else -(-clock_us // 1000)
    return max(watermark_ms, ms - delay_ms)


def _input(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """A task's input rows as one table (None: none)."""
    chunks = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(chunks) if chunks else None


def _by_bucket(table: pa.Table | None) -> Iterator[tuple[int, pa.Table]]:
    """The input rows of each bucket, in bucket order."""
    if table is None:
        return
    table = table.take(pc.sort_indices(table.column(BUCKET)))
    buckets = table.column(BUCKET).to_numpy()
    for lo, hi in bucket_runs(buckets):
        yield int(buckets[lo]), table.slice(lo, hi - lo)


def run_batch(rows, operator: OperatorBatch):
    """The ``operator`` over ``rows`` (a batch's input frame,
    :data:`jobs.executor.operator_input.OPERATOR_INPUT`): its output frame, one Spark job."""
    return (
        with_clock_rows(
            rows, operator.shards, 1 if operator.inputs is None else operator.inputs.lanes
        )
        .repartition(operator.shards, BUCKET)
        .mapInArrow(operator, output_spark_schema(operator.config.layout))
    )
