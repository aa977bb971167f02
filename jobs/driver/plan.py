"""The job core: a records frame -> the operator's input stream -> the operator, per batch.

:func:`build_job` takes any streaming *records* frame (see :mod:`jobs.sources.files.landing`) and
returns the operator's input stream (:data:`jobs.executor.operator_input.OPERATOR_INPUT`). The
query has no stateful operator of Spark's: :class:`jobs.driver.batch_sink.BatchSink`
(``foreachBatch``) runs the operator over each batch (:class:`OperatorPlan`, the engine in
Spark tasks keeping its own state: :mod:`jobs.executor.operator`), whose output rows are of three
kinds (``record_kind``):

* ``pane``: a pane the engine emitted (pane-log core record);
* ``late``: an element the engine dropped for lateness (late-table core record);
* ``rejected``: an input record that could not become an element (raw record, file, reason).

and writes each kind as data files into its Delta table (:mod:`jobs.executor.batch_output`),
committed with an application transaction (version = batch id), so one micro-batch is committed
at most once per table.

Plan (all rows of one batch)::

    records: plain rows (one record each), and blobs the JSON-lines decoder packed
      -> tag plain rows: keys, event time _ts, values; or the reason to reject them
         (a blob's _ts is its latest event time; rejected rows keep raw line and file)
      -- union -- control rows (drain sentinel, ticks, writers' watermarks)
      -> withWatermark(_ts, delay) (writer_noted: of the control rows' time only);
         clock = micros(the watermarked column); ts_us = micros(_ts)
      -> bucket = pmod(xxhash64(keys), state_buckets) as the lake's grouping value
         (rejected rows: REJECTED_BUCKET, control rows: CONTROL_BUCKET, only their clock kept)
      -> the operator's input (:mod:`jobs.executor.operator_input`): with the decoder, its blobs
         as they are and each plain row in the row encoding (JSON, no further Python stage);
         without it, the rows of each Arrow batch packed into per-bucket blobs (mapInArrow)
    in the batch sink, per batch, one Spark job:
      -> beside each row with a clock, one clock row for every shard (with_clock_rows)
      -> repartition(shards, bucket).mapInArrow(OperatorBatch) at the batch's clocks, then,
         if the batch's largest clock moved the watermark, at the new watermark

* Event time: the configured column (a timestamp, or an epoch number in ``source.epoch_unit``),
  or with ``watermark.policy = "ingestion_time"`` the batch's timestamp (``current_timestamp()``,
  fixed in the offset log, so replays see the same value).
* Watermark: Spark's (largest event time seen minus the delay), which its offset log records
  per batch; the operator sees every row and applies the model's droppable rule itself,
  recording what it drops. The watermark after a batch is computed by each operator task from
  the batch's largest clock by Spark's rule (:func:`jobs.executor.operator.watermark_after`) and
  fired in the batch itself: the next batch's watermark in Spark's offset log is the same value.
* ``watermark.policy = "writer_noted"``: Spark's watermark follows the control rows only (a
  column null on data rows, which Spark's maximum leaves out); the driver writes the writers'
  watermark as control rows (:mod:`jobs.driver.writers_watermark`), delay 0.
* Drain: a control row at the end of Spark's time range moves the watermark to the end of time
  (``end_of_time_ms``), which the operator maps to ``END_OF_TIME``: every window closes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from jobs.checkpoint.clocks import Clocks
from jobs.checkpoint.input_clocks import InputsAtBatch
from jobs.config.inputs import Input
from jobs.config.pipeline import Pipeline
from jobs.driver.control import SENTINEL_MS
from jobs.executor.jsonl_decoder import LATEST_EVENT_TIME
from jobs.executor.operator import (
    OperatorBatch,
    OperatorConfig,
    run_batch,
    watermark_after,
)
from jobs.executor.operator_input import (
    BLOB,
    BUCKET,
    CLOCK,
    CONTROL_BUCKET,
    DEDUP_ID,
    LANE,
    OPERATOR_INPUT,
    REJECTED_BUCKET,
    REJECTED_COLUMNS,
    ROW,
    TS_US,
    WEIGHT,
    lane_marker,
    noted_lane,
    pack_by_bucket,
    row_expression,
)
from jobs.executor.record_rules import SparkRecords, input_id
from jobs.executor.task_files import TaskWriting
from jobs.sources.files.landing import ERROR, RAW, SOURCE_FILE
from jobs.sources.pane_log.driver import tagged as pane_log_tagged
from jobs.sources.shape import record_shape
from panes.inputs import INPUT_COLUMN, Inputs
from sinks.lake import PaneLogLayout, arrow_type, column_type

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

EVENT_TIME = "_ts"
"""The records' event time as a Spark timestamp, the column Spark's watermark follows."""
CONTROL = "_control"
WRITERS_TIME = "_writers_ts"
"""``writer_noted``: the column Spark's watermark follows, the control rows' time (null on data)."""
RAW_TEXT, FROM_FILE, REASON = REJECTED_COLUMNS
CHECKED_TS, CHECKED_REASON = "_pst_ts", "_pst_reason"
"""A record's event time and why it is rejected (null: it is not), before the tagging."""


# -- layout and operator config ---------------------------------------------------------------


def layout(pipeline: Pipeline) -> PaneLogLayout:
    """Pane-log columns of the pipeline: its key columns and one column per aggregate."""
    types = pipeline.source.types
    fn = pipeline.combine_fn()
    return PaneLogLayout(
        key_fields=tuple((k, arrow_type(types[k])) for k in pipeline.keys),
        value_fields=tuple((n, arrow_type(t)) for n, t in pipeline.aggregate_types.items()),
        combine_fn=None if fn.value_is_accumulator else fn,
    )


def watermark_delay_ms(pipeline: Pipeline) -> int:
    """The watermark's delay in whole ms (Spark's unit), the largest of several inputs'."""
    return max(input_delay_ms(one) for one in pipeline.input_list)


def input_delay_ms(one: Input) -> int:
    """Input ``one``'s watermark delay in whole ms (none under ingestion time)."""
    return 0 if one.ingestion_time else -(-one.watermark.delay // 1000)


def inputs_rule(pipeline: Pipeline) -> tuple[Inputs, tuple[int, ...]]:
    """A pipeline of several inputs' watermark rule (:class:`panes.inputs.Inputs`: its inputs in
    lane order, its idle timeout) and each input's delay (µs, whole ms, in lane order)."""
    rule = Inputs((one.name for one in pipeline.inputs), pipeline.idle_timeout)
    return rule, tuple(input_delay_ms(one) * 1000 for one in pipeline.inputs)


def operator_config(
    pipeline: Pipeline, profile_dir: str | None = None, writing: TaskWriting | None = None
) -> OperatorConfig:
    return OperatorConfig(
        engine_factory=pipeline.engine_factory(),
        key_columns=tuple(pipeline.keys),
        value_columns=pipeline.carried_columns,
        column_types=(
            *((k, arrow_type(pipeline.source.types[k])) for k in pipeline.keys),
            *((c, arrow_type(pipeline.carried_type(c))) for c in pipeline.carried_columns),
        ),
        layout=layout(pipeline),
        # The sentinel at SENTINEL_MS moves Spark's watermark to SENTINEL_MS - delay.
        end_of_time_ms=SENTINEL_MS - watermark_delay_ms(pipeline),
        profile_dir=profile_dir,
        weighted=pipeline.weighted,
        writing=writing,
        dedup=deduplicated_by(pipeline),
        dedup_horizon=pipeline.dedup_horizon,
    )


def deduplicated_by(pipeline: Pipeline) -> tuple[str, ...]:
    """The id columns of the pipeline's duplicates: its inputs' (each input its own), empty
    when none deduplicates."""
    return tuple(dict.fromkeys(c for one in pipeline.input_list for c in one.dedup))


# -- the plan ---------------------------------------------------------------------------------


def _records(pipeline: Pipeline, records: DataFrame) -> SparkRecords:
    """The record rules rendered in Spark SQL over ``records`` (the columns of
    :func:`_complete_records`)."""
    return SparkRecords(record_shape(pipeline), dict(records.dtypes), line=RAW, error=ERROR)


def _complete_records(pipeline: Pipeline, records: DataFrame) -> DataFrame:
    """``records`` with every column the plan reads: the optional bookkeeping columns of
    :mod:`jobs.sources.files.landing`, and the JSON-lines decoder's blob columns (null: every
    row is plain)."""
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
    if BLOB not in cols:
        records = records.select(
            "*",
            F.lit(None).cast("int").alias(BUCKET),
            F.lit(None).cast("timestamp").alias(LATEST_EVENT_TIME),
            F.lit(None).cast("binary").alias(BLOB),
        )
    return records


def _decoded(pipeline: Pipeline, records: DataFrame, one: Input | None = None) -> DataFrame:
    """The JSON-lines decoder's rows (:mod:`jobs.executor.jsonl_decoder`, its output columns) in
    the shape of :func:`_tagged`: a blob (its latest event time) or a line the decoder rejected,
    with the decoder's reason. Nothing is judged here: the decoder was the records' one tagger.
    ``one``: the input of several the decoder read as (its blobs name it; its rejected lines'
    reasons and rows name it here; a weighted pipeline's weight null: a blob's elements carry
    theirs)."""
    from pyspark.sql import functions as F

    reason = F.col(ERROR)
    rejected = reason.isNotNull()
    types = pipeline.source.types

    def carried(v: str) -> Column:
        if one is not None and v == INPUT_COLUMN:
            return F.lit(one.name)
        return F.lit(None).cast(_carried_sql_type(pipeline, v))

    named = reason if one is None else F.concat(F.lit(f"input {one.name}: "), reason)
    weighed = one is not None and pipeline.weighted
    return records.select(
        *[F.lit(None).cast(column_type(types[k]).spark).alias(k) for k in pipeline.keys],
        F.col(LATEST_EVENT_TIME).alias(EVENT_TIME),
        *[carried(v).alias(v) for v in pipeline.carried_columns],
        F.when(rejected, F.make_valid_utf8(RAW)).alias(RAW_TEXT),
        F.when(rejected, F.col(SOURCE_FILE)).alias(FROM_FILE),
        named.alias(REASON),
        F.lit(False).alias(CONTROL),
        BUCKET,
        BLOB,
        *([F.lit(None).cast("string").alias(DEDUP_ID)] if deduplicated_by(pipeline) else []),
        *([F.lit(None).cast("int").alias(WEIGHT)] if weighed else []),
    )


def _carried_sql_type(pipeline: Pipeline, column: str) -> str:
    """The Spark SQL type of a carried value column (a condition's flag: boolean)."""
    return column_type(pipeline.carried_type(column)).spark


TYPED_PREFIX = "pst_typed_"
"""The columns a condition reads, in their schema type, beside the records (:func:`_tagged`)."""


def _tagged(pipeline: Pipeline, records: DataFrame) -> DataFrame:
    """One row per record: keys, event time, values (each filtered aggregate's condition
    computed here, once, over the columns in their schema type: its flag), and for a rejected
    record (its keys and values null: a valid key never is) the raw record, its file and the
    reason."""
    from pyspark.sql import functions as F

    rendered = _records(pipeline, records)
    ts, _ = rendered.event_time(records)
    # the event time and the reason computed once, in a projection of their own: written into
    # each column that depends on them, they made the plan's expressions several times larger,
    # which Spark analyses when the query is built and optimizes when a batch is planned
    read = dict.fromkeys(c for cond in pipeline.conditions for c in cond.columns)
    judging = replace(rendered, event_time_us=F.unix_micros(ts))
    checked = records.select(
        "*",
        ts.alias(CHECKED_TS),
        judging.reason().alias(CHECKED_REASON),
        *[rendered.typed(c).alias(TYPED_PREFIX + c) for c in read],
    )
    ok = F.col(CHECKED_REASON).isNull()

    def carried(v: str) -> Column:
        return rendered.carried(v, lambda c: f"`{TYPED_PREFIX}{c}`")

    # a deduplicated pipeline's elements keep their record: a duplicate becomes a rejected row
    kept = F.lit(True) if pipeline.dedup else ~ok
    ids = replace(rendered, event_time_us=F.unix_micros(F.col(CHECKED_TS)))
    dedup = [F.when(ok, ids.dedup_id()).alias(DEDUP_ID)] if pipeline.dedup else []
    return checked.select(
        *[F.when(ok, rendered.typed(k)).alias(k) for k in pipeline.keys],
        F.when(ok, F.col(CHECKED_TS)).alias(EVENT_TIME),
        *[F.when(ok, carried(v)).alias(v) for v in pipeline.carried_columns],
        F.when(kept, F.make_valid_utf8(RAW)).alias(RAW_TEXT),  # kept as text
        F.when(kept, F.col(SOURCE_FILE)).alias(FROM_FILE),
        F.col(CHECKED_REASON).alias(REASON),
        F.lit(False).alias(CONTROL),
        BUCKET,
        BLOB,
        *dedup,
    )


def _control_rows(pipeline: Pipeline, control: DataFrame, tagged: DataFrame) -> DataFrame:
    """Control rows in the shape of ``tagged`` (only their event time is set)."""
    from pyspark.sql import functions as F

    types = dict(tagged.dtypes)
    weighted = [F.lit(None).cast(types[c]).alias(c) for c in (TS_US, WEIGHT) if c in types]
    return control.select(
        *[F.lit(None).cast(types[k]).alias(k) for k in pipeline.keys],
        F.col("ts").alias(EVENT_TIME),
        *[F.lit(None).cast(types[v]).alias(v) for v in pipeline.carried_columns],
        *[F.lit(None).cast("string").alias(c) for c in REJECTED_COLUMNS],
        F.lit(True).alias(CONTROL),
        F.lit(None).cast("int").alias(BUCKET),
        F.lit(None).cast("binary").alias(BLOB),
        *weighted,
        *([F.lit(None).cast("string").alias(DEDUP_ID)] if DEDUP_ID in types else []),
    )


def _operator_input(
    pipeline: Pipeline,
    tagged: DataFrame,
    bucket_ids: Sequence[int] | None,
    decoded: bool,
    lanes: bool = False,
) -> DataFrame:
    """The operator's input (:mod:`jobs.executor.operator_input`): watermarked, control rows
    dropped, each row in its key bucket. ``decoded``: the records carry the JSON-lines decoder's
    blobs, which pass as they are (and its lane markers, with their clock), the other rows in
    the row encoding; else every row is packed. ``lanes``: rows of several inputs, which carry
    their input's :data:`LANE` (or come as a lane's marker) and no Spark watermark: the
    operator computes the pipeline's from each input's largest clock (the driver keeps the
    inputs' clocks: :mod:`jobs.checkpoint.input_clocks`)."""
    from pyspark.sql import functions as F

    delay = watermark_delay_ms(pipeline)
    bucket = SparkRecords(record_shape(pipeline), {}).bucket()
    # a pane-log source carries the event time in TS_US (EVENT_TIME is the upstream watermark)
    given = TS_US in tagged.columns
    event_time_us = F.col(TS_US) if given else F.unix_micros(F.col(EVENT_TIME))
    watermarked = EVENT_TIME
    if pipeline.writer_noted:  # only control rows move Spark's watermark (null is not counted)
        watermarked = WRITERS_TIME
        tagged = tagged.withColumn(WRITERS_TIME, F.when(F.col(CONTROL), F.col(EVENT_TIME)))
    rows = tagged if lanes else tagged.withWatermark(watermarked, f"{delay} milliseconds")
    # one projection (each DataFrame step costs the driver an analysis of the plan)
    # every row's clock: what Spark's watermark saw of it (the operator computes the next
    # watermark from their largest: jobs.driver.batch_sink)
    clock = F.unix_micros(F.col(watermarked)).alias(CLOCK)
    ts_us = F.when(F.col(BLOB).isNull() & ~F.col(CONTROL), event_time_us)
    number = (
        F.when(F.col(CONTROL), F.coalesce(F.col(BUCKET), F.lit(CONTROL_BUCKET)))
        .otherwise(
            F.coalesce(
                F.col(BUCKET),
                F.when(F.col(REASON).isNull(), bucket).otherwise(F.lit(REJECTED_BUCKET)),
            )
        )
        .cast("int")
    )
    if bucket_ids is not None and tuple(bucket_ids) != tuple(range(pipeline.state_buckets)):
        # bucket number -> the lake's grouping value (jobs.driver.preflight.check_state_layout)
        ids = F.array(*[F.lit(int(i)) for i in bucket_ids])
        number = F.when(number < 0, number).otherwise(F.element_at(ids, number + 1)).cast("int")
    schema = operator_config(pipeline).input_schema
    columns = {c: (ts_us if c == TS_US else F.col(c)) for c in schema.columns}
    if decoded:
        # a rejected line (a blob's row and a lane's marker have a bucket)
        plain = F.col(BLOB).isNull() & F.col(BUCKET).isNull() & ~F.col(CONTROL)
        types = {**dict(rows.dtypes), TS_US: "bigint"}
        row = F.when(plain, row_expression(columns, types))
        return rows.select(number.alias(BUCKET), BLOB, row.alias(ROW), clock)
    packed = rows.select(
        number.alias(BUCKET),
        clock,
        *([LANE] if lanes else []),
        *[c.alias(name) for name, c in columns.items()],
    )
    return packed.mapInArrow(pack_by_bucket, OPERATOR_INPUT)


def build_job(
    spark: SparkSession,
    pipeline: Pipeline,
    records: DataFrame,
    control: DataFrame | None = None,
    *,
    bucket_ids: Sequence[int] | None = None,
) -> DataFrame:
    """The operator's input stream (:data:`jobs.executor.operator_input.OPERATOR_INPUT`) for
    ``records``; the batch sink runs the operator over each batch (:class:`OperatorPlan`).

    A key's bucket is ``pmod(xxhash64(keys), state_buckets)``; the input carries
    ``bucket_ids[bucket]`` (default: the bucket number itself), values chosen per lake so its
    shards get equal shares of buckets (:func:`jobs.driver.preflight.check_state_layout`).
    """
    if pipeline.several_inputs:
        raise ValueError("a pipeline of several inputs: build_inputs_job")
    decoded = BLOB in records.columns  # the JSON-lines decoder packed (jobs.executor.jsonl_decoder)
    if pipeline.source.is_pane_log:
        tagged = pane_log_tagged(pipeline, records, EVENT_TIME, REJECTED_COLUMNS, CONTROL)
    elif decoded:
        tagged = _decoded(pipeline, records)
    else:
        tagged = _tagged(pipeline, _complete_records(pipeline, records))
    if control is not None:
        tagged = tagged.unionByName(_control_rows(pipeline, control, tagged))
    return _operator_input(pipeline, tagged, bucket_ids, decoded)


def build_inputs_job(
    spark: SparkSession,
    pipeline: Pipeline,
    records: Mapping[str, DataFrame],
    control: DataFrame | None = None,
    *,
    bucket_ids: Sequence[int] | None = None,
) -> DataFrame:
    """:func:`build_job` for a pipeline of several inputs: ``records`` is each input's records
    frame (by name, read by :meth:`Pipeline.read_as`). Each is tagged as that input
    (:meth:`Pipeline.tag_as`: its own event time; the columns it lacks null, its name in
    :data:`~panes.inputs.INPUT_COLUMN`) with its lane, the index of the input; the tagged rows
    of all inputs are one stream, which the operator reads as one (the inputs' clocks by
    lane). An input's frame of the JSON-lines decoder's (its blobs tagged as the input and its
    latest event time on its lane's marker: :func:`jobs.sources.files.landing.jsonl_decoder`)
    joins the operator's input as decoded rows, the others' tagged rows packed."""
    from pyspark.sql import functions as F

    weighed = any(one.source.is_pane_log for one in pipeline.inputs)
    tagged: list[DataFrame] = []
    decoded: list[DataFrame] = []
    for lane, one in enumerate(pipeline.inputs):
        view = pipeline.tag_as(one)
        frame = records[one.name]
        # a rejected record names its input (its reason's first words)
        named = F.concat(F.lit(f"input {one.name}: "), F.col(REASON))
        if BLOB in frame.columns:  # the decoder tagged it (jobs.executor.jsonl_decoder.AsInput)
            decoded.append(_decoded(pipeline, frame, one))
            continue
        if not one.source.is_pane_log:  # (an upstream's pane is never rejected: no raw text)
            frame = _complete_records(pipeline.read_as(one), frame)
        types = {c: column_type(t).spark for c, t in view.source.schema}
        frame = frame.select(
            "*",
            *[
                (F.lit(one.name) if c == INPUT_COLUMN else F.lit(None)).cast(t).alias(c)
                for c, t in types.items()
                if c not in frame.columns
            ],
        )
        if one.source.is_pane_log:
            rows = pane_log_tagged(view, frame, EVENT_TIME, REJECTED_COLUMNS, CONTROL)
        else:
            rows = _tagged(view, frame)
            if weighed:  # beside a pane log's elements: an element's own time and weight
                accepted = F.col(REASON).isNull()
                rows = rows.withColumns(
                    {
                        TS_US: F.when(accepted, F.unix_micros(F.col(EVENT_TIME))),
                        WEIGHT: F.when(accepted, F.lit(1)).cast("int"),
                    }
                )
        # carried by the pipeline: a late row names it, a task counts each input's records
        rows = rows.withColumn(INPUT_COLUMN, F.lit(one.name))
        if one.dedup:  # an id is its input's: two inputs' equal ids are not copies
            rows = rows.withColumn(DEDUP_ID, F.concat(F.lit(input_id(one.name)), F.col(DEDUP_ID)))
        elif deduplicated_by(pipeline):  # this input's elements have no id: none is a copy
            rows = rows.withColumn(DEDUP_ID, F.lit(None).cast("string"))
        tagged.append(rows.withColumns({REASON: named, LANE: F.lit(lane)}))
    noted = None
    if control is not None:  # a writers' watermark of an input goes to its lane's marker
        names = [one.name for one in pipeline.inputs]
        control = control.where((F.col("input") == "") | F.col("input").isin(names))
        for lane, name in enumerate(names):
            marker = F.lit(lane_marker(noted_lane(lane, len(names))))
            noted = (F if noted is None else noted).when(F.col("input") == name, marker)
    parts = []
    if decoded:
        parts.append(_operator_input(pipeline, _union(decoded), bucket_ids, True, lanes=True))
    if tagged:
        parts.append(_operator_input(pipeline, _union(tagged), bucket_ids, False, lanes=True))
    if control is not None:  # last: the run's report takes the last source for the control's
        parts.append(_lane_controls(control, noted))
    return _union(parts)


def _lane_controls(control: DataFrame, marker: Column | None) -> DataFrame:
    """Control rows of a pipeline of several inputs as the operator's input: a clock only, of
    the drain (a tick, at 1970, is no time; the inputs' lanes hold their own clocks), in the
    control bucket, or a writers' mark in its input's ``marker`` bucket (its noted lane)."""
    from pyspark.sql import functions as F

    clock = F.unix_micros(F.col("ts"))
    bucket = F.lit(CONTROL_BUCKET) if marker is None else F.coalesce(marker, F.lit(CONTROL_BUCKET))
    return control.select(
        bucket.cast("int").alias(BUCKET),
        F.lit(None).cast("binary").alias(BLOB),
        F.lit(None).cast("binary").alias(ROW),
        F.when(clock > 0, clock).alias(CLOCK),
    )


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    """``frames`` (at least one) as one, by column name."""
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


@dataclass(frozen=True)
class OperatorPlan:
    """How the batch sink runs the operator over a batch's input: ``shards`` tasks keeping their
    state under ``state_root`` (:mod:`jobs.executor.state_store`), and the watermark rule."""

    config: OperatorConfig
    state_root: str
    shards: int
    delay_ms: int

    @classmethod
    def of(
        cls,
        pipeline: Pipeline,
        state_root: str,
        shards: int,
        *,
        writing: TaskWriting | None = None,
        profile_dir: str | None = None,
    ) -> OperatorPlan:
        config = operator_config(pipeline, profile_dir, writing)
        return cls(config, state_root, shards, watermark_delay_ms(pipeline))

    def output(
        self, rows: DataFrame, clocks: Clocks, batch_id: int, inputs: InputsAtBatch | None = None
    ) -> DataFrame:
        """The operator's output frame for batch ``batch_id``'s ``rows`` at ``clocks``: its
        data, then the firing at the watermark after it (:class:`OperatorBatch`; ``inputs``:
        a pipeline of several inputs, the rule of its watermark)."""
        operator = OperatorBatch(
            self.config, self.state_root, clocks, batch_id, self.shards, self.delay_ms, inputs
        )
        return run_batch(rows, operator)

    def watermark_after(self, watermark_ms: int, clock_us: int | None) -> int:
        """The watermark after a batch at ``watermark_ms`` whose largest clock was ``clock_us``
        (Spark's rule: :func:`jobs.executor.operator.watermark_after`)."""
        return watermark_after(watermark_ms, clock_us, self.delay_ms)
