"""The job core: a records frame -> the panes engine in Spark -> one output stream per batch.

:func:`build_job` takes any streaming *records* frame (see :mod:`jobs.source`) and returns one
streaming frame whose rows are of three kinds (``record_kind``):

* ``pane``: a pane the engine emitted (pane-log core record);
* ``late``: an element the engine dropped for lateness (late-table core record);
* ``rejected``: an input record that could not become an element (raw record, file, reason).

:class:`BatchSink` (``foreachBatch``) commits each kind to its Delta table with an application
transaction (version = batch id), so one micro-batch is committed at most once per table.

Plan (all rows of one batch)::

    records: plain rows (one record each), and blobs the JSON-lines decoder packed
      -> tag plain rows: keys, event time _ts, values; or the reason to reject them
         (a blob's _ts is its latest event time; rejected rows keep raw line and file)
      -- union -- control rows (drain sentinel)
      -> withWatermark(_ts, delay); drop control rows; ts_us = micros(_ts); drop _ts
      -> bucket = pmod(xxhash64(keys), state_buckets) as the lake's grouping value
         (rejected rows: REJECTED_BUCKET)
      -> [no decoder: pack the rows of each Arrow batch into per-bucket blobs (mapInArrow)]
      -> groupBy(bucket).transformWithStateInPandas(BucketProcessor)

* Event time: the configured column (a timestamp, or an epoch number in ``source.epoch_unit``),
  or with ``watermark.policy = "ingestion_time"`` the batch's timestamp (``current_timestamp()``,
  fixed in the offset log, so replays see the same value).
* Spark filters rows behind its watermark before a stateful operator only when the watermarked
  column reaches the operator; it does not (``_ts`` is dropped after ``withWatermark``), so the
  engine sees every row and applies the model's droppable rule itself, recording what it drops.
  The model watermark is Spark's (largest event time seen minus the delay), per batch.
* Drain: a control row at the end of Spark's time range moves Spark's watermark to the end of
  time (``end_of_time_ms``), which the operator maps to ``END_OF_TIME``: every window closes.
  Control rows are removed after the watermark has seen them (the filter references ``_ts`` so
  Spark cannot push it below the watermark).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.checkpoint import batch_input, local_path
from jobs.jsonl_decoder import TS as DECODED_TS
from jobs.operator import (
    BLOB,
    BUCKET,
    DEFAULT_END_OF_TIME_MS,
    KIND_LATE,
    KIND_PANE,
    KIND_REJECTED,
    MAX_EVENT_TIME_US,
    MIN_EVENT_TIME_US,
    PACKED_SCHEMA,
    REJECTED_BUCKET,
    OperatorConfig,
    apply_operator,
    pack_by_bucket,
)
from jobs.pipeline import EPOCH_UNITS, Pipeline
from jobs.source import ERROR, FILE_SOURCE_OPTIONS, RAW, SOURCE_FILE
from jobs.view_spec import view_spec
from sinks import tables
from sinks.column_types import COLUMN_TYPES, INTEGRAL, arrow_type
from sinks.delta_append import DeltaWriter
from sinks.pane_log import PaneLog, PaneLogLayout
from sinks.records import REJECTED_CORE, LateLog, RejectedLog

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

TS = "_ts"
# Pack each input batch's rows per bucket before the shuffle (sources the JSON-lines decoder
# does not serve; it packs its own).
PACKED = os.environ.get("PANESTORE_PACKED", "1") != "0"
CONTROL = "_control"
# The drain sentinel's event time: the last millisecond Spark timestamps can hold.
SENTINEL_MS = DEFAULT_END_OF_TIME_MS
HOOK_ENV = "PANESTORE_TEST_HOOK"
NOT_UTF8 = "not valid UTF-8 text (a binary file?)"
EVENT_TIME_RANGE = "accepted from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.998999Z"
VANISHED = (
    "file vanished: listed for this batch but gone when it was read (deleted or moved after "
    "it landed); its records are not in this batch: land it again under a new name"
)


# -- layout and operator config ---------------------------------------------------------------


def layout(pipeline: Pipeline) -> PaneLogLayout:
    """Pane-log columns of the pipeline: its key columns and one column per aggregate."""
    import pyarrow as pa

    types = pipeline.source.types

    def out_type(t: str):
        if t.startswith("list<"):
            return pa.list_(arrow_type(t[5:-1]))
        return arrow_type(t)

    return PaneLogLayout(
        key_fields=tuple((k, arrow_type(types[k])) for k in pipeline.keys),
        value_fields=tuple((n, out_type(t)) for n, t in pipeline.aggregate_types.items()),
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


def operator_config(pipeline: Pipeline) -> OperatorConfig:
    return OperatorConfig(
        engine_factory=EngineFactory(pipeline),
        key_columns=tuple(pipeline.keys),
        timestamp_column="ts_us",
        value_columns=pipeline.value_columns,
        layout=layout(pipeline),
        # The sentinel at SENTINEL_MS moves Spark's watermark to SENTINEL_MS - delay.
        end_of_time_ms=SENTINEL_MS - watermark_delay_ms(pipeline),
        values_as_records=True,
        rejected_columns=(RAW, SOURCE_FILE, "_reason"),
        buckets=pipeline.state_buckets,
        bucket_column=BUCKET,
        decode_columns=_typed_columns(pipeline, {"string"}),
        integer_columns=_typed_columns(pipeline, INTEGRAL),
    )


def _typed_columns(pipeline: Pipeline, types: set[str]) -> frozenset[str]:
    """The key and value columns declared with one of ``types``."""
    declared = pipeline.source.types
    return frozenset(c for c in (*pipeline.keys, *pipeline.value_columns) if declared[c] in types)


def _as_text(cfg: OperatorConfig, col: str):
    """An operator input column: strings as UTF-8 binary, integers as decimal text in UTF-8
    binary (OperatorConfig.decode_columns, integer_columns), others as they are."""
    from pyspark.sql import functions as F

    if col in cfg.integer_columns:
        return F.col(col).cast("string").cast("binary").alias(col)
    if col in cfg.decode_columns:
        return F.col(col).cast("binary").alias(col)
    return F.col(col)


# -- the plan ---------------------------------------------------------------------------------


def _event_time(pipeline: Pipeline, df: DataFrame):
    """(converted event time as a timestamp column, the raw column or None)."""
    from pyspark.sql import functions as F

    if pipeline.ingestion_time:
        return F.current_timestamp(), None
    col = pipeline.event_time
    raw = F.col(col)
    dtype = dict(df.dtypes)[col]
    declared = pipeline.source.types[col]
    if dtype == "timestamp":
        return raw, raw
    if declared in INTEGRAL:
        num = raw.try_cast("bigint") if dtype == "string" else raw.cast("bigint")
        # try_multiply: an epoch too large for µs is unparseable, not a failed batch
        micros = F.try_multiply(num, F.lit(EPOCH_UNITS[pipeline.source.epoch_unit]))
        return F.timestamp_micros(micros), raw
    text = F.trim(raw.cast("string"))
    return text.try_cast("timestamp"), raw


def _key(pipeline: Pipeline, df: DataFrame, k: str):
    from pyspark.sql import functions as F

    sql_type = COLUMN_TYPES[pipeline.source.types[k]][0]
    dtype = dict(df.dtypes)[k]
    if dtype == sql_type:
        return F.col(k)
    return F.col(k).try_cast(sql_type)


def control_stream(spark: SparkSession, pipeline: Pipeline) -> DataFrame:
    """Control rows (``{"ts": ...}`` JSON files under ``<lake>/_control``): only the drain
    sentinel so far."""
    Path(pipeline.control_path).mkdir(parents=True, exist_ok=True)
    reader = spark.readStream.options(**FILE_SOURCE_OPTIONS).schema("kind string, ts timestamp")
    return reader.json(pipeline.control_path)


def write_control(pipeline: Pipeline, kind: str, ts_ms: int) -> Path:
    """Drop a control row (``kind``, event time ``ts_ms``) into ``<lake>/_control``, atomically."""
    import datetime as dt

    ctl = Path(pipeline.control_path)
    ctl.mkdir(parents=True, exist_ok=True)
    ts = dt.datetime.fromtimestamp(ts_ms / 1000, dt.timezone.utc)
    body = json.dumps({"kind": kind, "ts": ts.isoformat(timespec="milliseconds")}) + "\n"
    n = len(list(ctl.glob("*.json")))
    tmp, final = ctl / f".{kind}-{n}.json.tmp", ctl / f"{kind}-{n}.json"
    tmp.write_text(body)
    os.replace(tmp, final)
    return final


def write_drain_sentinel(pipeline: Pipeline) -> Path:
    """The control row that moves the watermark to the end of time (a drain)."""
    return write_control(pipeline, "drain", SENTINEL_MS)


def write_tick(pipeline: Pipeline) -> Path:
    """A control row that only makes Spark run a batch: its event time (1970) moves nothing; the
    batch runs at the watermark Spark computed after the previous one, firing due timers."""
    return write_control(pipeline, "tick", 0)


def pending_watermark(pipeline: Pipeline) -> bool:
    """Whether the checkpoint holds a watermark advance no batch has run with.

    Spark runs the trailing no-data batch (firing the timers of the advance) right after the last
    data batch, in the same process. Killed after that batch's commit and before the no-data
    batch started, a restarted query does not run it (no data, and no previous execution in this
    process to compare watermarks with): the timers would wait for new data. The commit log keeps
    the advance (``nextBatchWatermarkMs``), so a run can tell and tick (:func:`write_tick`).
    """
    ckpt = Path(pipeline.checkpoint_path)
    try:
        commits = [int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit()]
    except FileNotFoundError:
        return False
    if not commits:
        return False
    last = max(commits)
    if (ckpt / "offsets" / str(last + 1)).exists():
        return False  # Spark will run (or replay) that batch itself
    try:
        committed = json.loads((ckpt / "commits" / str(last)).read_text().splitlines()[1])
        offsets = json.loads((ckpt / "offsets" / str(last)).read_text().splitlines()[1])
    except (OSError, IndexError, ValueError):
        return False
    return committed.get("nextBatchWatermarkMs", 0) > offsets.get("batchWatermarkMs", 0)


def build_job(spark: SparkSession, pipeline: Pipeline, records: DataFrame,
              control: DataFrame | None = None, *,
              bucket_ids: Sequence[int] | None = None) -> DataFrame:  # fmt: skip
    """The job's output stream (``record_kind`` pane / late / rejected) for ``records``.

    A key's bucket is ``pmod(xxhash64(keys), state_buckets)``; Spark groups by
    ``bucket_ids[bucket]`` (default: the bucket number itself), values chosen per lake so its
    shuffle partitions get equal shares of buckets (:func:`jobs.run.check_state_layout`).
    """
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
    decoded = BLOB in cols

    # Rows the JSON-lines decoder packed (jobs.jsonl_decoder) are blobs of valid elements with
    # their bucket and latest event time; every other row is plain: one record, tagged here.
    if not decoded:
        records = records.select(
            "*", F.lit(None).cast("int").alias(BUCKET),
            F.lit(None).cast("timestamp").alias(DECODED_TS), F.lit(None).cast("binary").alias(BLOB),
        )  # fmt: skip
    plain = F.col(BLOB).isNull()
    ts, raw_ts = _event_time(pipeline, records)
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
    reason = F.when(plain, reason)
    values = list(pipeline.value_columns)
    # One scan: rejected rows travel with the elements, with null keys (a valid key is never
    # null), and the operator passes them through (OperatorConfig.rejected_columns).
    tagged = records.select(
        *[F.when(reason.isNull(), _key(pipeline, records, k)).alias(k) for k in pipeline.keys],
        F.coalesce(F.col(DECODED_TS), F.when(reason.isNull(), ts)).alias(TS),
        *values,
        F.when(reason.isNotNull(), F.make_valid_utf8(raw)).alias(RAW),  # kept as text
        F.when(reason.isNotNull(), F.col(SOURCE_FILE)).alias(SOURCE_FILE),
        reason.alias("_reason"),
        F.lit(False).alias(CONTROL),
        BUCKET,
        BLOB,
    )
    if control is not None:
        types = dict(tagged.dtypes)
        ctl = control.select(
            *[F.lit(None).cast(types[k]).alias(k) for k in pipeline.keys],
            F.col("ts").alias(TS),
            *[F.lit(None).cast(types[v]).alias(v) for v in values],
            *[F.lit(None).cast("string").alias(c) for c in (RAW, SOURCE_FILE, "_reason")],
            F.lit(True).alias(CONTROL),
            F.lit(None).cast("int").alias(BUCKET),
            F.lit(None).cast("binary").alias(BLOB),
        )
        tagged = tagged.unionByName(ctl)
    elements_types = dict(tagged.dtypes)
    delay = watermark_delay_ms(pipeline)
    bucket = F.pmod(F.xxhash64(*pipeline.keys), F.lit(pipeline.state_buckets))
    elements = (
        tagged.withWatermark(TS, f"{delay} milliseconds")
        # references _ts: Spark must not push this filter below the watermark
        .where(~(F.col(CONTROL) & F.col(TS).isNotNull()))
        .withColumn("ts_us", F.when(plain, F.unix_micros(F.col(TS))))
        .withColumn(BUCKET, F.coalesce(
            F.col(BUCKET),
            F.when(F.col("_reason").isNull(), bucket).otherwise(F.lit(REJECTED_BUCKET)),
        ).cast("int"))
    )  # fmt: skip
    if bucket_ids is not None and tuple(bucket_ids) != tuple(range(pipeline.state_buckets)):
        # bucket number -> the lake's grouping value for it (jobs.run.check_state_layout)
        ids = F.array(*[F.lit(int(i)) for i in bucket_ids])
        grouping = F.when(F.col(BUCKET) == REJECTED_BUCKET, F.col(BUCKET))
        elements = elements.withColumn(
            BUCKET, grouping.otherwise(F.element_at(ids, F.col(BUCKET) + 1)).cast("int")
        )
    cfg = operator_config(pipeline)
    rejected = cfg.rejected_columns
    if PACKED and not decoded:
        columns = (BUCKET, *pipeline.keys, "ts_us", *values, *rejected)
        packed = elements.select(*columns).mapInArrow(pack_by_bucket, PACKED_SCHEMA)
        # the operator's input: blobs only (plain columns null)
        elements = packed.select(
            BUCKET, BLOB,
            *[F.lit(None).cast(elements_types[c]).alias(c) for c in pipeline.keys],
            F.lit(None).cast("bigint").alias("ts_us"),
            *[F.lit(None).cast(elements_types[c]).alias(c) for c in values],
            *[F.lit(None).cast("string").alias(c) for c in rejected],
        )  # fmt: skip
    elements = elements.select(
        BUCKET, BLOB,
        *[_as_text(cfg, c) for c in pipeline.keys], "ts_us", *[_as_text(cfg, c) for c in values],
        *[F.col(c).cast("binary").alias(c) for c in rejected],
    )  # fmt: skip
    return apply_operator(elements, cfg)


# -- the sink ---------------------------------------------------------------------------------


def hook(point: str, batch_id: int) -> None:
    """Test hook: ``PANESTORE_TEST_HOOK="point:batch[,point:batch...]"`` SIGKILLs the job (its
    whole process group when it leads one: driver, JVM, Python workers) at that point."""
    spec = os.environ.get(HOOK_ENV)
    if not spec:
        return
    for item in spec.split(","):
        name, _, batch = item.partition(":")
        if name == point and batch and int(batch) == batch_id:
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
    compute_s: float = 0.0  # running the batch's plan (source, engine) to its output
    commit_s: float = 0.0  # the Delta commits


def table_identity(pipeline: Pipeline, table: str, what: str) -> dict[str, Any]:
    """``properties`` (the pipeline's configuration fingerprint) written when a table is
    created, and the ``check`` that refuses an existing table of another configuration."""
    return tables.table_identity(view_spec(pipeline, lake=str(pipeline.lake_path)), table, what)


class BatchSink:
    """``foreachBatch`` sink: panes, late and rejected rows of a batch, each committed once."""

    def __init__(self, pipeline: Pipeline, on_batch: Callable[[BatchStats], Any] | None = None,
                 writer: DeltaWriter | None = None) -> None:  # fmt: skip
        """``writer``: how each table's commits are written (default: delta-rs)."""
        lay = layout(pipeline)
        self.pipeline = pipeline

        def kw(table: str, what: str) -> dict[str, Any]:
            return {**table_identity(pipeline, table, what), "writer": writer}

        self.pane_log = PaneLog(pipeline.table_path("panes"), pipeline.name, lay,
                                **kw("panes", "pane log"))  # fmt: skip
        self.late_log = LateLog(pipeline.table_path("late"), pipeline.name, lay,
                                **kw("late", "late table"))  # fmt: skip
        self.rejected_log = RejectedLog(pipeline.table_path("rejected"), pipeline.name,
                                        **kw("rejected", "rejected table"))  # fmt: skip
        self.on_batch = on_batch
        self.stats: dict[int, BatchStats] = {}

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

    def committed_batch_id(self) -> int | None:
        """The highest batch id any of the three tables holds, or None."""
        ids = [log.committed_batch_id() for log in (self.pane_log, self.late_log,
                                                     self.rejected_log)]  # fmt: skip
        return max((i for i in ids if i is not None), default=None)

    def create_tables(self) -> None:
        for log in (self.pane_log, self.late_log, self.rejected_log):
            log.appender.table()

    def __call__(self, df, batch_id: int) -> None:
        import pyarrow.compute as pc

        started = time.perf_counter()
        table = df.toArrow()
        computed = time.perf_counter()
        kind = table.column("record_kind")
        panes = table.filter(pc.equal(kind, KIND_PANE))
        late = table.filter(pc.equal(kind, KIND_LATE))
        rejected = table.filter(pc.equal(kind, KIND_REJECTED))
        # After the plan ran: a file gone now was gone when its batch read it (or vanished
        # while being read). Spark skips such a file with a log warning; we keep it on record.
        gone, batch_ts_us = self._vanished_input(df.sparkSession, batch_id)
        stats = BatchStats(batch_id, panes=panes.num_rows, late=late.num_rows,
                           rejected=rejected.num_rows + len(gone), vanished=gone)  # fmt: skip
        if panes.num_rows:
            for t, n in zip(*pc.value_counts(panes.column("timing")).flatten(), strict=True):
                stats.by_timing[t.as_py()] = n.as_py()
            stats.retractions = pc.sum(panes.column("is_retraction")).as_py() or 0
        hook("before_commit", batch_id)
        done = self.pane_log.append(batch_id, panes)
        hook("between_tables", batch_id)
        done |= self.late_log.append(batch_id, late)
        pt = rejected.column("processing_time_us")[0].as_py() if rejected.num_rows else None
        rows = rejected.select(REJECTED_CORE.names).to_pylist()
        rows += [{"raw": None, "source_file": f, "reason": VANISHED} for f in gone]
        done |= self.rejected_log.append(batch_id, rows, processing_time_us=pt or batch_ts_us)
        stats.committed = done
        stats.compute_s = computed - started
        stats.commit_s = time.perf_counter() - computed
        hook("after_commit", batch_id)
        self.stats[batch_id] = stats
        if self.on_batch is not None:
            self.on_batch(stats)
