"""A pipeline whose source is another pipeline's pane log (``[source] format = "pane_log"``).

The pane log is read incrementally by a PySpark Python streaming data source
(:class:`PaneLogDataSource`, no delta-spark jars): its offsets are pane-log versions
and the table they belong to (``{"version": v, "table": id}``, version -1 before the first;
:class:`jobs.upstream_identity.PaneLogOffset`), and a micro-batch reads the rows of the versions
``(start, end]`` with delta-rs (:func:`sinks.upstream.read_elements`). Spark records both offsets
in its offset log before the batch runs, so a replayed batch reads exactly the same rows: the
exactly-once chain is the upstream's exactly-once pane log plus this fixed version range.

A version range means something only in its table: the reader is given the table the driver
checked (:func:`jobs.upstream_identity.check_upstream`, before the query starts) and refuses
another (an upstream rebuilt while the downstream runs) when it looks for new versions, plans a
batch or reads one, with :class:`sinks.errors.UpstreamChanged`.

Each upstream pane row becomes one element (:func:`tagged`):

* its key and aggregate columns are the element's fields (the downstream's keys and the columns
  its aggregates read must be among them; :mod:`jobs.pipeline` checks it, naming the field);
* its output timestamp (``timestamp_us``) is the element's event time;
* its weight is +1, or -1 for a retraction row (an upstream in accumulating & retracting mode);
* its ``watermark_us`` (the upstream's watermark when it emitted the pane) is the column Spark's
  watermark follows, with no delay: the downstream watermark is the largest upstream watermark
  seen in earlier batches, never ahead of the upstream's. An upstream drain (watermark at the
  end of time) drains the downstream too; a watermark before 1970 (the upstream's beginning of
  time) moves nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

try:  # pyspark is optional at import time (the pure test suite runs without it)
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover - exercised only without pyspark
    # stand-ins so that the module imports; mypy checks against pyspark's classes
    DataSource = DataSourceStreamReader = InputPartition = object  # type: ignore[assignment,misc]

from jobs.operator import DEFAULT_END_OF_TIME_MS
from jobs.operator_input import TS_US, WEIGHT
from jobs.pipeline import Pipeline
from jobs.upstream_identity import PaneLogOffset, check_upstream
from panes.time import END_OF_TIME
from sinks.column_types import COLUMN_TYPES, arrow_type
from sinks.errors import UpstreamChanged
from sinks.upstream import EVENT_TIME_US, WATERMARK_US, pane_log_head, read_elements
from sinks.upstream import WEIGHT as UPSTREAM_WEIGHT

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

FORMAT_NAME = "panestore_pane_log"
"""The name :class:`PaneLogDataSource` is registered under."""


class VersionRange(InputPartition):
    """One micro-batch's input: pane-log versions ``after < v <= upto`` of the table ``table``
    (None: not named, by offsets of an older panestore that the driver checked)."""

    def __init__(self, after: int, upto: int, table: str | None) -> None:
        self.value = (after, upto, table)
        self.after, self.upto, self.table = after, upto, table


class PaneLogStreamReader(DataSourceStreamReader):
    """Offsets are pane-log versions of one table; one partition per micro-batch (see the module
    doc). ``options["table"]``: the table id the driver checked ("" while there is no table and
    nothing was read: then the first table seen is kept)."""

    def __init__(self, options: dict[str, str], columns: Sequence[tuple[str, str]]) -> None:
        self.path = options["path"]
        self.pipeline = options["pipeline"]
        self.table = options.get("table") or None
        self.columns = tuple(columns)

    def _changed(self, now: str | None, read: str) -> UpstreamChanged:
        where = f"is table {now} now" if now else "is gone"
        return UpstreamChanged(
            f"the upstream pane log at {self.path} {where}, not table {read} that this "
            f"pipeline has read: the upstream was rebuilt. Rebuild this pipeline too "
            f"(docs/running.md, 'Recovering a lake')"
        )

    def initialOffset(self) -> dict:
        return PaneLogOffset(-1).to_json()

    def latestOffset(self) -> dict:
        head = pane_log_head(self.path)
        if self.table is None:
            self.table = head.table
        elif head.table != self.table:
            raise self._changed(head.table, self.table)
        return PaneLogOffset(head.version, head.table).to_json()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        first, last = PaneLogOffset.from_json(start), PaneLogOffset.from_json(end)
        if first.version >= 0 and first.table is not None and last.table != first.table:
            raise self._changed(last.table, first.table)
        if last.version > first.version:
            return [VersionRange(first.version, last.version, last.table)]
        return []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, VersionRange)
        columns = [(c, arrow_type(t)) for c, t in self.columns]
        table = read_elements(
            self.path, self.pipeline, partition.after, partition.upto, columns, partition.table
        )
        yield from table.to_batches()

    def commit(self, end: dict) -> None:
        """Nothing to release: the pane log is immutable and read by version."""


class PaneLogDataSource(DataSource):
    """``spark.readStream.format("panestore_pane_log")`` with options ``path`` (the pane-log
    table), ``pipeline`` (its writer), ``table`` (its table id, see :class:`PaneLogStreamReader`)
    and ``columns`` (``name:type,...``, configuration types)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _columns(self) -> list[tuple[str, str]]:
        pairs = (item.split(":", 1) for item in self.options["columns"].split(","))
        return [(name, typ) for name, typ in pairs]

    def schema(self) -> str:
        cols = [f"`{c}` {COLUMN_TYPES[t][0]}" for c, t in self._columns()]
        extra = [f"{EVENT_TIME_US} bigint", f"{WATERMARK_US} bigint", f"{UPSTREAM_WEIGHT} int"]
        return ", ".join([*cols, *extra])

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return PaneLogStreamReader(dict(self.options), self._columns())


def read_pane_log(spark: SparkSession, pipeline: Pipeline) -> DataFrame:
    """The upstream's pane log as a streaming frame of element rows: the downstream's key and
    value columns, and the event time, watermark and weight columns of
    :func:`sinks.upstream.read_elements`. Raises :class:`UpstreamChanged` before the query
    starts if the upstream is not the table the pipeline has read
    (:func:`jobs.upstream_identity.check_upstream`)."""
    upstream = pipeline.source.upstream
    assert upstream is not None
    table = check_upstream(pipeline)
    if not getattr(spark, "_panestore_pane_log", False):  # once: Spark warns on a re-register
        spark.dataSource.register(PaneLogDataSource)
        # a marker of ours on the session (SparkSession declares no such attribute)
        spark._panestore_pane_log = True  # type: ignore[attr-defined]
    types = pipeline.source.types
    wanted = [*pipeline.keys, *[c for c in pipeline.value_columns if c not in pipeline.keys]]
    return (
        spark.readStream.format(FORMAT_NAME)
        .option("path", upstream.pane_log)
        .option("pipeline", upstream.name)
        .option("table", table or "")
        .option("columns", ",".join(f"{c}:{types[c]}" for c in wanted))
        .load()
    )


def tagged(
    pipeline: Pipeline, records: DataFrame, event_time: str, reject: Sequence[str], control: str
) -> DataFrame:
    """The job's tagged rows (:func:`jobs.job.build_job`) of the upstream's element rows:
    ``event_time`` (the column Spark's watermark follows) is the upstream's watermark at
    emission as a timestamp, :data:`TS_US` the element's event time, :data:`WEIGHT` its
    weight; ``reject`` columns are null (an upstream pane is never malformed) and ``control``
    false."""
    from pyspark.sql import functions as F

    wm = F.col(WATERMARK_US)
    end = F.lit(DEFAULT_END_OF_TIME_MS * 1000)  # the drain sentinel's time
    watermark_us = (
        F.when(wm.isNull() | (wm <= 0), F.lit(0))
        .when(wm >= F.lit(END_OF_TIME), end)
        .otherwise(F.least(wm, end))
    )
    return records.select(
        *pipeline.keys,
        F.timestamp_micros(watermark_us).alias(event_time),
        *[c for c in pipeline.value_columns if c not in pipeline.keys],
        *[F.lit(None).cast("string").alias(c) for c in reject],
        F.lit(False).alias(control),
        F.col(EVENT_TIME_US).alias(TS_US),
        F.col(UPSTREAM_WEIGHT).alias(WEIGHT),
    )
