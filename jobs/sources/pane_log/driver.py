"""A pipeline whose source is another pipeline's pane log (``[source] format = "pane_log"``).

The pane log is read incrementally by a PySpark Python streaming data source
(:class:`PaneLogDataSource`, no delta-spark jars): its offsets are pane-log versions and the table
they belong to (``{"version": v, "table": id}``, version -1 before the first;
:class:`jobs.checkpoint.offsets.TableOffset`), and a micro-batch reads the rows of the
versions ``(start, end]`` with delta-rs (:func:`jobs.reading.pane_log.upstream.read_elements`).
Spark records both offsets in its offset log before the batch runs, so a replayed batch reads
exactly the same rows: the exactly-once chain is the upstream's exactly-once pane log plus this
fixed version range.

A version range means something only in its table: the reader is given the table the driver
checked (:func:`jobs.sources.pane_log.identity.check_upstream`, before the query starts) and refuses
another (an upstream rebuilt while the downstream runs) when it looks for new versions, plans a
batch or reads one, with :class:`sinks.lake.errors.UpstreamChanged`.

Each upstream pane row becomes one element (:func:`tagged`):

* its key and aggregate columns are the element's fields (the downstream's keys and the columns
  its aggregates read must be among them; :mod:`jobs.config.pipeline` checks it, naming the field);
* its output timestamp (``timestamp_us``) is the element's event time;
* its weight is +1, or -1 for a retraction row (an upstream in accumulating & retracting mode);
* its ``watermark_us`` (the upstream's watermark when it emitted the pane) is the column Spark's
  watermark follows, with no delay: the downstream watermark is the largest upstream watermark
  seen in earlier batches, never ahead of the upstream's. An upstream drain (watermark at the
  end of time) drains the downstream too; a watermark before 1970 (the upstream's beginning of
  time) moves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.config.pipeline import Pipeline
from jobs.executor.operator_input import BLOB, BUCKET, TS_US, WEIGHT
from jobs.executor.record_rules import SparkRecords
from jobs.reading.columns import encode_columns
from jobs.reading.pane_log.reader import FORMAT_NAME, PaneLogDataSource
from jobs.reading.pane_log.upstream import EVENT_TIME_US, WATERMARK_US
from jobs.reading.pane_log.upstream import WEIGHT as UPSTREAM_WEIGHT
from jobs.sources.shape import record_shape
from jobs.startup.session import register_data_source
from panes.time import END_OF_TIME
from sinks.lake import MAX_TIMESTAMP_MS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def read_pane_log(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str | None,
    values: Sequence[str] | None = None,
    of_input: str | None = None,
) -> DataFrame:
    """The upstream's pane log as a streaming frame of element rows: the downstream's key and
    value columns (``values``: these, for one of several inputs), and the event time, watermark
    and weight columns of :func:`jobs.reading.pane_log.upstream.read_elements`; ``table``: the
    pane log's id the run's checks found (:func:`jobs.sources.pane_log.identity.check_upstream`),
    to which the reader holds the versions it reads (None: the pipeline has read none yet);
    ``of_input``: the input of several it is read as (its offsets name it)."""
    upstream = pipeline.source.upstream
    assert upstream is not None
    register_data_source(spark, PaneLogDataSource)
    types = pipeline.source.types
    read = pipeline.value_columns if values is None else values
    wanted = [*pipeline.keys, *[c for c in read if c not in pipeline.keys]]
    return (
        spark.readStream.format(FORMAT_NAME)
        .option("path", upstream.pane_log)
        .option("pipeline", upstream.name)
        .option("table", table or "")
        .option("input", of_input or "")
        .option("columns", encode_columns([(c, types[c]) for c in wanted]))
        .load()
    )


def tagged(
    pipeline: Pipeline, records: DataFrame, event_time: str, reject: Sequence[str], control: str
) -> DataFrame:
    """The job's tagged rows (:func:`jobs.driver.plan.build_job`) of the upstream's element rows:
    ``event_time`` (the column Spark's watermark follows) is the upstream's watermark at
    emission as a timestamp, :data:`TS_US` the element's event time, :data:`WEIGHT` its
    weight; ``reject`` columns are null (an upstream pane is never malformed) and ``control``
    false."""
    from pyspark.sql import functions as F

    wm = F.col(WATERMARK_US)
    end = F.lit(MAX_TIMESTAMP_MS * 1000)  # the drain sentinel's time
    watermark_us = (
        F.when(wm.isNull() | (wm <= 0), F.lit(0))
        .when(wm >= F.lit(END_OF_TIME), end)
        .otherwise(F.least(wm, end))
    )
    # each filtered aggregate's condition, computed here once over the upstream's typed columns
    # (the record's statement rendered in Spark SQL: an upstream pane is never rejected)
    rendered = SparkRecords(record_shape(pipeline), dict(records.dtypes))
    flags = {flag: rendered.carried(flag).alias(flag) for flag in rendered.shape.flags}
    return records.select(
        *pipeline.keys,
        F.timestamp_micros(watermark_us).alias(event_time),
        *[flags.get(c, F.col(c)) for c in pipeline.carried_columns if c not in pipeline.keys],
        *[F.lit(None).cast("string").alias(c) for c in reject],
        F.lit(False).alias(control),
        F.lit(None).cast("int").alias(BUCKET),
        F.lit(None).cast("binary").alias(BLOB),
        F.col(EVENT_TIME_US).alias(TS_US),
        F.col(UPSTREAM_WEIGHT).alias(WEIGHT),
    )
