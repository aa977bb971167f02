"""The job core: a records frame -> the panes engine in Spark -> one output stream per batch.

:func:`build_job` takes any streaming *records* frame (see :mod:`jobs.source`) and returns one
streaming frame whose rows are of three kinds (``record_kind``):

* ``pane``: a pane the engine emitted (pane-log core record);
* ``late``: an element the engine dropped for lateness (late-table core record);
* ``rejected``: an input record that could not become an element (raw record, file, reason).

:class:`BatchSink` (``foreachBatch``) has the executors write each kind as data files into its
Delta table (:mod:`jobs.batch_output`) and commits them with an application transaction
(version = batch id), so one micro-batch is committed at most once per table.

Plan (all rows of one batch)::

    records: one row per record, whatever the source (:mod:`jobs.source`)
      -> tag: keys, event time _ts, values; or the reason to reject the record
         (rejected rows keep the raw record and its file)
      -- union -- control rows (drain sentinel)
      -> withWatermark(_ts, delay) (writer_noted: of the control rows' time only);
         drop control rows; ts_us = micros(_ts); drop _ts
      -> bucket = pmod(xxhash64(keys), state_buckets) as the lake's grouping value
         (rejected rows: REJECTED_BUCKET)
      -> the operator's input (:mod:`jobs.operator_input`): the rows of each Arrow batch
         packed into one blob per bucket (mapInArrow)
      -> groupBy(bucket).transformWithStateInPandas(BucketProcessor)

* Event time: the configured column (a timestamp, or an epoch number in ``source.epoch_unit``),
  or with ``watermark.policy = "ingestion_time"`` the batch's timestamp (``current_timestamp()``,
  fixed in the offset log, so replays see the same value).
* Spark filters rows behind its watermark before a stateful operator only when the watermarked
  column reaches the operator; it does not (``_ts`` is dropped after ``withWatermark``), so the
  engine sees every row and applies the model's droppable rule itself, recording what it drops.
  The model watermark is Spark's (largest event time seen minus the delay), per batch.
* ``watermark.policy = "writer_noted"``: Spark's watermark follows the control rows only (a
  column null on data rows, which Spark's maximum leaves out); the driver writes the writers'
  watermark as control rows (:mod:`jobs.writers_watermark`), delay 0.
* Drain: a control row at the end of Spark's time range moves Spark's watermark to the end of
  time (``end_of_time_ms``), which the operator maps to ``END_OF_TIME``: every window closes.
  Control rows are removed after the watermark has seen them (the filter references ``_ts`` so
  Spark cannot push it below the watermark).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.batch_output import (
    write_batch_files,
)
from jobs.checkpoint import batch_input, local_path
from jobs.control import SENTINEL_MS
from jobs.event_time import (
    EVENT_TIME_RANGE,
    MAX_EVENT_TIME_US,
    MIN_EVENT_TIME_US,
    spark_event_time,
)
from jobs.landing_changes import CHANGED, ChangedFile, bind_changes
from jobs.operator import OperatorConfig, apply_operator
from jobs.operator_input import (
    BUCKET,
    OPERATOR_INPUT,
    REJECTED_BUCKET,
    REJECTED_COLUMNS,
    TS_US,
    WEIGHT,
    bucket_expression,
    pack_by_bucket,
)
from jobs.output_tables import KIND_LATE, KIND_PANE, KIND_REJECTED, KINDS, OutputTables
from jobs.pane_log_source import tagged as pane_log_tagged
from jobs.pipeline import Pipeline
from jobs.source import ERROR, RAW, SOURCE_FILE
from jobs.task_files import ROWS_PER_FILE, TaskWriting, attempt_id
from jobs.view_spec import view_spec
from sinks import tables
from sinks.column_types import COLUMN_TYPES, arrow_type
from sinks.data_files import DataFile, write_data_files
from sinks.pane_log import PaneLog, PaneLogLayout
from sinks.records import REJECTED_CORE, LateLog, RejectedLog, finish_rejected

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

EVENT_TIME = "_ts"
"""The records' event time as a Spark timestamp, the column Spark's watermark follows."""
CONTROL = "_control"
WRITERS_TIME = "_writers_ts"
"""``writer_noted``: the column Spark's watermark follows, the control rows' time (null on data)."""
RAW_TEXT, FROM_FILE, REASON = REJECTED_COLUMNS
KILL_POINTS = ("before_commit", "between_tables", "after_commit")
NOT_UTF8 = "not valid UTF-8 text (a binary file?)"
VANISHED = (
    "file vanished: listed for this batch but gone when it was read (deleted or moved after "
    "it landed); its records are not in this batch: land it again under a new name"
)


# -- layout and operator config ---------------------------------------------------------------


def layout(pipeline: Pipeline) -> PaneLogLayout:
    """Pane-log columns of the pipeline: its key columns and one column per aggregate."""
    types = pipeline.source.types
    return PaneLogLayout(
        key_fields=tuple((k, arrow_type(types[k])) for k in pipeline.keys),
        value_fields=tuple((n, arrow_type(t)) for n, t in pipeline.aggregate_types.items()),
        accumulators=not pipeline.combine_fn().value_is_accumulator,
    )


@dataclass(frozen=True)
class EngineFactory:
    """Builds the pipeline's engine on a Python worker (picklable)."""

    pipeline: Pipeline

    def __call__(self):
        return self.pipeline.engine()


def watermark_delay_ms(pipeline: Pipeline) -> int:
    return 0 if pipeline.ingestion_time else -(-pipeline.watermark.delay // 1000)


def operator_config(
    pipeline: Pipeline, profile_dir: str | None = None, writing: TaskWriting | None = None
) -> OperatorConfig:
    return OperatorConfig(
        engine_factory=EngineFactory(pipeline),
        key_columns=tuple(pipeline.keys),
        value_columns=pipeline.value_columns,
        column_types=tuple(
            (c, arrow_type(pipeline.source.types[c]))
            for c in (*pipeline.keys, *pipeline.value_columns)
        ),
        layout=layout(pipeline),
        # The sentinel at SENTINEL_MS moves Spark's watermark to SENTINEL_MS - delay.
        end_of_time_ms=SENTINEL_MS - watermark_delay_ms(pipeline),
        profile_dir=profile_dir,
        weighted=pipeline.weighted,
        writing=writing,
    )


# -- the plan ---------------------------------------------------------------------------------


def _key(pipeline: Pipeline, df: DataFrame, k: str) -> Column:
    from pyspark.sql import functions as F

    sql_type = COLUMN_TYPES[pipeline.source.types[k]][0]
    dtype = dict(df.dtypes)[k]
    if dtype == sql_type:
        return F.col(k)
    return F.col(k).try_cast(sql_type)


def _complete_records(pipeline: Pipeline, records: DataFrame) -> DataFrame:
    """``records`` with every column the plan reads: the optional bookkeeping columns of
    :mod:`jobs.source` are added (null) when missing."""
    from pyspark.sql import functions as F

    cols = set(records.columns)
    missing = [c for c in (*pipeline.keys, *pipeline.value_columns) if c not in cols]
    if pipeline.event_time and pipeline.event_time not in cols and not pipeline.ingestion_time:
        missing.append(pipeline.event_time)
    if missing:
        raise ValueError(f"the records frame lacks columns {missing}")
    if RAW not in cols:
        names = [c for c, _ in pipeline.source.schema if c in cols]
        records = records.withColumn(RAW, F.to_json(F.struct(*names)))
    for c in (SOURCE_FILE, ERROR):
        if c not in cols:
            records = records.withColumn(c, F.lit(None).cast("string"))
    return records


def _rejection_reason(
    pipeline: Pipeline, records: DataFrame, ts: Column, raw_ts: Column | None
) -> Column:
    """Why a record cannot become an element (null: it can), given its converted and raw event
    time (:func:`jobs.event_time.spark_event_time`)."""
    from pyspark.sql import functions as F

    raw = F.col(RAW)
    reason = F.when(raw.isNotNull() & ~F.is_valid_utf8(raw), F.lit(NOT_UTF8))
    reason = reason.when(F.col(ERROR).isNotNull(), F.col(ERROR))
    if raw_ts is not None:
        et = pipeline.event_time
        reason = reason.when(raw_ts.isNull(), F.lit(f"missing event time ({et})"))
        reason = reason.when(ts.isNull(), F.lit(f"unparseable event time ({et})"))
        micros = F.unix_micros(ts)
        reason = reason.when(
            (micros < MIN_EVENT_TIME_US) | (micros > MAX_EVENT_TIME_US),
            F.lit(f"event time out of range ({et}): {EVENT_TIME_RANGE}"),
        )
    types = pipeline.source.types
    for k in pipeline.keys:
        key = _key(pipeline, records, k)
        reason = reason.when(F.col(k).isNull(), F.lit(f"missing key ({k})"))
        reason = reason.when(key.isNull(), F.lit(f"unparseable key ({k})"))
        if types[k] == "string":
            reason = reason.when(F.trim(key) == "", F.lit(f"empty key ({k})"))
    for v in pipeline.value_columns:
        if types[v] in ("double", "float"):
            finite = F.col(v).isNull() | ~(F.isnan(v) | F.abs(v).eqNullSafe(float("inf")))
            reason = reason.when(~finite, F.lit(f"not a finite number ({v})"))
    return reason


def _tagged(pipeline: Pipeline, records: DataFrame) -> DataFrame:
    """One row per record: keys, event time, values, and for a rejected record (its
    keys and values null: a valid key never is) the raw record, its file and the reason."""
    from pyspark.sql import functions as F

    ts, raw_ts = spark_event_time(pipeline.event_time_column, records)
    reason = _rejection_reason(pipeline, records, ts, raw_ts)
    return records.select(
        *[F.when(reason.isNull(), _key(pipeline, records, k)).alias(k) for k in pipeline.keys],
        F.when(reason.isNull(), ts).alias(EVENT_TIME),
        *[F.when(reason.isNull(), F.col(v)).alias(v) for v in pipeline.value_columns],
        F.when(reason.isNotNull(), F.make_valid_utf8(RAW)).alias(RAW_TEXT),  # kept as text
        F.when(reason.isNotNull(), F.col(SOURCE_FILE)).alias(FROM_FILE),
        reason.alias(REASON),
        F.lit(False).alias(CONTROL),
    )


def _control_rows(pipeline: Pipeline, control: DataFrame, tagged: DataFrame) -> DataFrame:
    """Control rows in the shape of ``tagged`` (only their event time is set)."""
    from pyspark.sql import functions as F

    types = dict(tagged.dtypes)
    weighted = [F.lit(None).cast("bigint").alias(TS_US), F.lit(None).cast("int").alias(WEIGHT)]
    return control.select(
        *[F.lit(None).cast(types[k]).alias(k) for k in pipeline.keys],
        F.col("ts").alias(EVENT_TIME),
        *[F.lit(None).cast(types[v]).alias(v) for v in pipeline.value_columns],
        *[F.lit(None).cast("string").alias(c) for c in REJECTED_COLUMNS],
        F.lit(True).alias(CONTROL),
        *(weighted if TS_US in types else []),
    )


def _operator_input(
    pipeline: Pipeline, tagged: DataFrame, bucket_ids: Sequence[int] | None
) -> DataFrame:
    """The operator's input (:mod:`jobs.operator_input`): watermarked, control rows dropped, each
    row in its key bucket, packed per bucket."""
    from pyspark.sql import functions as F

    delay = watermark_delay_ms(pipeline)
    bucket = bucket_expression(pipeline.keys, pipeline.state_buckets)
    # a pane-log source carries the event time in TS_US (EVENT_TIME is the upstream watermark)
    given = TS_US in tagged.columns
    event_time_us = F.col(TS_US) if given else F.unix_micros(F.col(EVENT_TIME))
    watermarked = EVENT_TIME
    if pipeline.writer_noted:  # only control rows move Spark's watermark (null is not counted)
        watermarked = WRITERS_TIME
        tagged = tagged.withColumn(WRITERS_TIME, F.when(F.col(CONTROL), F.col(EVENT_TIME)))
    rows = (
        tagged.withWatermark(watermarked, f"{delay} milliseconds")
        # references the watermarked column: Spark must not push this filter below the watermark
        .where(~(F.col(CONTROL) & F.col(watermarked).isNotNull()))
        .withColumn(TS_US, event_time_us)
        .withColumn(
            BUCKET, F.when(F.col(REASON).isNull(), bucket).otherwise(REJECTED_BUCKET).cast("int")
        )
    )
    if bucket_ids is not None and tuple(bucket_ids) != tuple(range(pipeline.state_buckets)):
        # bucket number -> the lake's grouping value for it (jobs.run.check_state_layout)
        ids = F.array(*[F.lit(int(i)) for i in bucket_ids])
        grouping = F.when(F.col(BUCKET) == REJECTED_BUCKET, F.col(BUCKET))
        rows = rows.withColumn(
            BUCKET, grouping.otherwise(F.element_at(ids, F.col(BUCKET) + 1)).cast("int")
        )
    schema = operator_config(pipeline).input_schema
    return rows.select(BUCKET, *schema.columns).mapInArrow(pack_by_bucket, OPERATOR_INPUT)


def build_job(
    spark: SparkSession,
    pipeline: Pipeline,
    records: DataFrame,
    control: DataFrame | None = None,
    *,
    bucket_ids: Sequence[int] | None = None,
    writing: TaskWriting | None = None,
    profile_dir: str | None = None,
) -> DataFrame:
    """The job's output stream (``record_kind`` pane / late / rejected) for ``records``.

    A key's bucket is ``pmod(xxhash64(keys), state_buckets)``; Spark groups by
    ``bucket_ids[bucket]`` (default: the bucket number itself), values chosen per lake so its
    shuffle partitions get equal shares of buckets (:func:`jobs.run.check_state_layout`).
    ``writing``: how tasks write many rows themselves (:attr:`BatchSink.task_writing`; None:
    every row is sent on). ``profile_dir``: profile the operator's tasks there
    (:class:`jobs.operator.OperatorConfig`).
    """
    if pipeline.source.is_pane_log:
        tagged = pane_log_tagged(pipeline, records, EVENT_TIME, REJECTED_COLUMNS, CONTROL)
    else:
        tagged = _tagged(pipeline, _complete_records(pipeline, records))
    if control is not None:
        tagged = tagged.unionByName(_control_rows(pipeline, control, tagged))
    rows = _operator_input(pipeline, tagged, bucket_ids)
    return apply_operator(rows, operator_config(pipeline, profile_dir, writing))


# -- the sink ---------------------------------------------------------------------------------


def kill(point: str, batch_id: int, kill_at: Sequence[tuple[str, int]]) -> None:
    """Test hook: SIGKILL the job (its whole process group when it leads one: driver, JVM,
    Python workers) when ``(point, batch_id)`` is one of ``kill_at`` (points: ``KILL_POINTS``)."""
    if (point, batch_id) in kill_at:
        sys.stderr.flush()
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class BatchStats:
    batch_id: int
    panes: int = 0
    by_timing: dict[str, int] = field(default_factory=dict)
    retractions: int = 0
    late: int = 0
    rejected: int = 0
    committed: bool = False  # False: a replay whose tables were already committed
    vanished: tuple[str, ...] = ()  # listed input files gone before they were read (rejected)
    changed: tuple[ChangedFile, ...] = ()  # input files changed after a batch read them (rejected)
    compute_s: float = 0.0  # running the batch's plan (source, engine) to its output
    commit_s: float = 0.0  # the Delta commits


def table_identity(pipeline: Pipeline, table: str, what: str) -> dict[str, Any]:
    """``properties`` (the pipeline's configuration fingerprint) written when a table is
    created, and the ``check`` that refuses an existing table of another configuration."""
    return tables.table_identity(view_spec(pipeline, lake=str(pipeline.lake_path)), table, what)


class BatchSink:
    """``foreachBatch`` sink: panes, late and rejected rows of a batch, each committed once.

    Per batch (:mod:`jobs.batch_output`): the tables that already hold the batch are skipped
    (a replay: their transaction version is at or above the batch id); one Spark job runs the
    batch and writes each kind still to commit as Parquet files into its table's directory
    (operator tasks that emit many rows write them themselves, the rest one writer task); the
    driver collects a row per file (path, size, statistics, figures) and commits each table's
    files in one Delta commit with the application transaction (pipeline, batch id) through
    delta-rs, the pane log first. Vanished input files (few) become rejected rows written from
    the driver into the rejected table's commit. No output row is collected on the driver.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        on_batch: Callable[[BatchStats], Any] | None = None,
        kill_at: Sequence[tuple[str, int]] = (),
    ) -> None:
        """``kill_at``: test hook, the ``(point, batch id)`` pairs at which to SIGKILL the job
        (:func:`kill`)."""
        unknown = [point for point, _ in kill_at if point not in KILL_POINTS]
        if unknown:
            raise ValueError(f"unknown kill points {unknown}; known: {KILL_POINTS}")
        lay = layout(pipeline)
        self.pipeline = pipeline
        self.layout = lay
        self.kill_at = tuple(kill_at)

        def kw(table: str, what: str) -> dict[str, Any]:
            return table_identity(pipeline, table, what)

        self.pane_log = PaneLog(
            pipeline.table_path("panes"), pipeline.name, lay, **kw("panes", "pane log")
        )
        self.late_log = LateLog(
            pipeline.table_path("late"), pipeline.name, lay, **kw("late", "late table")
        )
        self.rejected_log = RejectedLog(
            pipeline.table_path("rejected"), pipeline.name, **kw("rejected", "rejected table")
        )
        self.on_batch = on_batch
        self.stats: dict[int, BatchStats] = {}
        self.appenders = {
            KIND_PANE: self.pane_log.appender,
            KIND_LATE: self.late_log.appender,
            KIND_REJECTED: self.rejected_log.appender,
        }
        self._tables: OutputTables | None = None

    @property
    def tables(self) -> OutputTables:
        """Where each kind's files go (the tables' URIs: the tables are created if need be)."""
        if self._tables is None:
            uris = {k: a.table().table_uri for k, a in self.appenders.items()}
            schemas = {k: a.schema for k, a in self.appenders.items()}
            self._tables = OutputTables.of(self.pipeline.name, self.layout, uris, schemas)
        return self._tables

    @property
    def task_writing(self) -> TaskWriting:
        """How the operator's tasks write for this sink (:func:`build_job`'s ``writing``)."""
        return TaskWriting(self.tables)

    def committed_batch_id(self) -> int | None:
        """The highest batch id any of the three tables holds, or None."""
        ids = [appender.committed_batch_id() for appender in self.appenders.values()]
        return max((i for i in ids if i is not None), default=None)

    def _vanished_input(self, spark, batch_id: int) -> tuple[tuple[str, ...], int | None]:
        """(the batch's listed input files that no longer exist, the batch timestamp in µs)."""
        try:
            listed = batch_input(self.pipeline.checkpoint_path, batch_id)
        except FileNotFoundError:  # not a checkpointed file-source query (e.g. a test frame)
            return (), None

        def exists(uri: str) -> bool:
            local = local_path(uri)
            if local is not None:
                return os.path.exists(local)
            path = spark._jvm.org.apache.hadoop.fs.Path(uri)
            return bool(path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(path))

        gone = tuple(f for f in listed.files if not exists(f))
        return gone, listed.timestamp_ms * 1000

    def create_tables(self) -> None:
        for appender in self.appenders.values():
            appender.table()

    def __call__(self, df, batch_id: int) -> None:
        """Write and commit batch ``batch_id`` (the class doc); no output row is collected."""
        started = time.perf_counter()
        committed = [k for k, a in self.appenders.items() if a.is_committed(batch_id)]
        todo = [k for k in KINDS if k not in committed]
        # landing files changed after an earlier batch read them (jobs.landing_changes): bound to
        # this batch before its rejected rows commit, so a replay records the same rows
        changed = tuple(bind_changes(self.pipeline, batch_id)) if KIND_REJECTED in todo else ()
        files, counts = write_batch_files(df, self.tables, batch_id, committed)
        # After the plan ran: a file gone now was gone when its batch read it (or vanished while
        # being read). Spark skips such a file with a log warning; we keep it on record.
        gone, batch_ts_us = self._vanished_input(df.sparkSession, batch_id)
        notes = self._file_notes(gone, changed)
        computed = time.perf_counter()
        done = self._commit_files(files, todo, batch_id, notes, batch_ts_us)
        stats = BatchStats(
            batch_id,
            panes=counts.rows.get(KIND_PANE, 0),
            by_timing=counts.by_timing,
            retractions=counts.retractions,
            late=counts.rows.get(KIND_LATE, 0),
            rejected=counts.rows.get(KIND_REJECTED, 0) + len(notes),
            vanished=gone,
            changed=changed,
            committed=done,
        )
        stats.compute_s = computed - started
        stats.commit_s = time.perf_counter() - computed
        kill("after_commit", batch_id, self.kill_at)
        self.stats[batch_id] = stats
        if self.on_batch is not None:
            self.on_batch(stats)

    @staticmethod
    def _file_notes(gone: Sequence[str], changed: Sequence[ChangedFile]) -> list[tuple[str, str]]:
        """(file URI, reason) of each input file the batch records as a whole: vanished before
        it was read, or changed after an earlier batch read it."""
        return [(f, VANISHED) for f in gone] + [(c.uri, CHANGED) for c in changed]

    def _file_table(
        self, notes: Sequence[tuple[str, str]], batch_id: int, batch_ts_us: int | None
    ) -> pa.Table:
        """Rejected-table rows of the batch's file notes (few: built on the driver)."""
        core = [{"raw": None, "source_file": f, "reason": reason} for f, reason in notes]
        return finish_rejected(
            pa.Table.from_pylist(core, schema=REJECTED_CORE),
            self.pipeline.name,
            batch_id,
            batch_ts_us,
        )

    def _commit_files(
        self,
        files: dict[str, list[DataFile]],
        todo: Sequence[str],
        batch_id: int,
        notes: Sequence[tuple[str, str]],
        batch_ts_us: int | None,
    ) -> bool:
        """Commit the written files of each kind still to commit (pane log first)."""
        kill("before_commit", batch_id, self.kill_at)
        done = False
        for kind in KINDS:
            if kind == KIND_LATE:
                kill("between_tables", batch_id, self.kill_at)
            if kind not in todo:
                continue
            found = list(files.get(kind, ()))
            if kind == KIND_REJECTED and notes:  # few: written from here into the same commit
                prefix = f"part-{batch_id:08d}-{attempt_id()}-files"
                target = self.tables.targets[KIND_REJECTED]
                found += write_data_files(
                    target.table_uri,
                    self._file_table(notes, batch_id, batch_ts_us),
                    target.schema,
                    prefix,
                    ROWS_PER_FILE,
                )
            done |= self.appenders[kind].commit_files(batch_id, found)
        return done
