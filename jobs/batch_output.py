"""A batch's output rows -> Parquet files written by Spark's executors (no row reaches the driver).

The batch sink (:class:`jobs.job.BatchSink`) hands each micro-batch's output frame (rows of
``record_kind`` pane / late / rejected, see :mod:`jobs.job`) to :func:`write_batch_files`:

1. the frame is cached on the executors (memory, spilling to disk), so the stateful operator
   runs once however many Spark jobs read its output;
2. :func:`batch_counts`: one small aggregate (rows per kind, timing and retraction flag) gives
   the batch's figures and the row count of each kind;
3. each kind still to be committed is brought to its number of files (the *sizing rule*
   below) and written by one task per file group (:class:`FileWriter`, a ``mapInArrow``
   function): the task finishes its rows into table rows (ids, timestamps, pipeline and batch
   columns: :func:`sinks.pane_log.finish_batch`, :func:`sinks.records.finish_late`,
   :func:`sinks.records.finish_rejected`) and writes them into the table's directory
   (:func:`sinks.data_files.write_data_files`); the driver collects one small row per file
   (path, size, row count, statistics).

Sizing rule: a kind with ``n`` rows in a batch is written as ``ceil(n / ROWS_PER_FILE)`` task
groups (at least one); a task writes its rows as files of at most :data:`ROWS_PER_FILE` rows,
of equal sizes. When there are at most as many groups as the frame has partitions, partitions
are merged without a shuffle (``coalesce``); otherwise the rows are shuffled by their identity
columns (the key columns; a rejected record's file, text and reason). Either way all rows of one
key (and all identical rejected records) of a batch are in one task, which is what the
per-task finishing needs (a row's id numbers identical rows of its batch). So a small batch
writes one file per table, a big one files of about :data:`ROWS_PER_FILE` rows; a task holds
its rows in memory while writing them (about ``ROWS_PER_FILE`` rows, or ``n / partitions``
when ``n`` exceeds ``ROWS_PER_FILE * partitions`` of a coalesced frame: raise
``spark.sql.shuffle.partitions`` of a new lake for such batches).

File names: ``part-<batch>-<attempt>-<task partition>-<task attempt>-<n>.parquet``, where
``attempt`` is a random id per call, so a crashed or retried attempt never overwrites a file
another attempt may commit.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.operator import KIND_LATE, KIND_PANE, KIND_REJECTED, RECORD_KIND
from sinks.data_files import DataFile, write_data_files
from sinks.pane_log import PaneLogLayout, core_schema, finish_batch
from sinks.records import REJECTED_CORE, finish_late, finish_rejected, late_core_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

ROWS_PER_FILE = 500_000
"""Most rows of one data file (pane rows: tens of MB of Parquet)."""
FILE_COLUMNS = pa.schema(
    [
        pa.field(RECORD_KIND, pa.string()),
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("rows", pa.int64()),
        pa.field("stats", pa.string()),
    ]
)
FILE_DDL = f"{RECORD_KIND} string, path string, size bigint, rows bigint, stats string"
PROCESSING_TIME = "processing_time_us"


@dataclass
class BatchCounts:
    """Rows of a batch's output per kind, and the panes by timing and retractions."""

    rows: dict[str, int] = field(default_factory=dict)
    by_timing: dict[str, int] = field(default_factory=dict)
    retractions: int = 0


def batch_counts(frame: DataFrame) -> BatchCounts:
    """The figures of ``frame`` (the job's output) from one aggregate: a few rows collected."""
    counts = BatchCounts()
    grouped = frame.groupBy(RECORD_KIND, "timing", "is_retraction").count().collect()
    for kind, timing, retraction, n in grouped:
        counts.rows[kind] = counts.rows.get(kind, 0) + n
        if kind == KIND_PANE:
            counts.by_timing[timing] = counts.by_timing.get(timing, 0) + n
            counts.retractions += n if retraction else 0
    return counts


@dataclass(frozen=True)
class TableTarget:
    """Where and how one kind of the output is written: the table's URI and schema, the
    columns the finishing reads, and the columns whose equal values must share a task."""

    kind: str
    table_uri: str
    schema: pa.Schema
    columns: tuple[str, ...]
    identity: tuple[str, ...]


def table_targets(layout: PaneLogLayout, uris: Mapping[str, str],
                  schemas: Mapping[str, pa.Schema]) -> dict[str, TableTarget]:  # fmt: skip
    """The three targets of a pipeline (``uris``/``schemas`` by kind)."""
    keys = tuple(layout.key_names)
    columns = {
        KIND_PANE: tuple(core_schema(layout).names),
        KIND_LATE: tuple(late_core_schema(layout).names),
        KIND_REJECTED: (*REJECTED_CORE.names, PROCESSING_TIME),
    }
    identity = {KIND_PANE: keys, KIND_LATE: keys, KIND_REJECTED: tuple(REJECTED_CORE.names)}
    return {k: TableTarget(k, uris[k], schemas[k], columns[k], identity[k]) for k in columns}


@dataclass(frozen=True)
class FileWriter:
    """``mapInArrow`` function: one task's rows of one kind -> finished table rows written as
    data files; yields one row per file (:data:`FILE_COLUMNS`). Picklable."""

    target: TableTarget
    pipeline_id: str
    batch_id: int
    attempt: str
    layout: PaneLogLayout
    rows_per_file: int = ROWS_PER_FILE

    def finish(self, core: pa.Table) -> pa.Table:
        kind = self.target.kind
        if kind == KIND_PANE:
            return finish_batch(core, self.pipeline_id, self.batch_id, self.layout)
        if kind == KIND_LATE:
            return finish_late(core, self.pipeline_id, self.batch_id, self.layout)
        # every rejected row of a batch carries the batch timestamp
        return finish_rejected(core, self.pipeline_id, self.batch_id,
                               core.column(PROCESSING_TIME)[0].as_py())  # fmt: skip

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        got = [b for b in batches if b.num_rows]
        if not got:
            return
        task = TaskContext.get()
        part, attempt = (task.partitionId(), task.attemptNumber()) if task else (0, 0)
        prefix = f"part-{self.batch_id:08d}-{self.attempt}-{part:05d}-{attempt}"
        finished = self.finish(pa.Table.from_batches(got))
        files = write_data_files(self.target.table_uri, finished, self.target.schema, prefix,
                                 self.rows_per_file)  # fmt: skip
        rows = [{RECORD_KIND: self.target.kind, **asdict(f)} for f in files]
        yield pa.RecordBatch.from_pylist(rows, schema=FILE_COLUMNS)


def rows_of(frame: DataFrame, target: TableTarget) -> DataFrame:
    """The rows of ``target``'s kind in ``frame``, with the columns its finishing reads."""
    from pyspark.sql import functions as F

    return frame.where(F.col(RECORD_KIND) == target.kind).select(*target.columns)


def sized(frame: DataFrame, rows: int, identity: Sequence[str],
          rows_per_file: int = ROWS_PER_FILE) -> DataFrame:  # fmt: skip
    """``frame`` (one kind's ``rows`` rows) in the task groups of the sizing rule (module doc)."""
    groups = max(1, -(-rows // rows_per_file))
    if groups <= frame.rdd.getNumPartitions():
        return frame.coalesce(groups)
    return frame.repartition(groups, *identity)


def writing_plan(frame: DataFrame, targets: Sequence[TableTarget], counts: BatchCounts,
                 pipeline_id: str, batch_id: int, layout: PaneLogLayout,
                 rows_per_file: int = ROWS_PER_FILE) -> DataFrame | None:  # fmt: skip
    """One frame of file rows: every target's kind sized and written (None: nothing to write).
    A new attempt id is drawn per call."""
    attempt = uuid.uuid4().hex[:12]
    parts = []
    for target in targets:
        rows = counts.rows.get(target.kind, 0)
        if not rows:
            continue
        writer = FileWriter(target, pipeline_id, batch_id, attempt, layout, rows_per_file)
        kind = sized(rows_of(frame, target), rows, target.identity, rows_per_file)
        parts.append(kind.mapInArrow(writer, FILE_DDL))
    return functools.reduce(lambda a, b: a.unionByName(b), parts) if parts else None


def write_batch_files(frame: DataFrame, targets: Sequence[TableTarget], counts: BatchCounts,
                      pipeline_id: str, batch_id: int,
                      layout: PaneLogLayout) -> dict[str, list[DataFile]]:  # fmt: skip
    """Write ``targets``' kinds of ``frame`` as data files (one Spark job); the files by kind."""
    plan = writing_plan(frame, targets, counts, pipeline_id, batch_id, layout)
    files: dict[str, list[DataFile]] = {t.kind: [] for t in targets}
    for row in plan.collect() if plan is not None else ():
        found = DataFile(row["path"], row["size"], row["rows"], row["stats"])
        files[row[RECORD_KIND]].append(found)
    return files


@contextmanager
def cached(frame: DataFrame) -> Iterator[DataFrame]:
    """``frame`` cached on the executors (memory, then disk) while the block runs."""
    from pyspark import StorageLevel

    kept = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield kept
    finally:
        kept.unpersist()


@dataclass(frozen=True)
class RowFinisher:
    """``mapInArrow`` function: one task's rows of one kind -> finished table rows (for a
    writer that writes a frame itself: delta-spark). Picklable."""

    writer: FileWriter

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = [b for b in batches if b.num_rows]
        if got:
            finished = self.writer.finish(pa.Table.from_batches(got))
            yield from finished.select(self.writer.target.schema.names).to_batches()


def finished_frame(frame: DataFrame, target: TableTarget, counts: BatchCounts, pipeline_id: str,
                   batch_id: int, layout: PaneLogLayout) -> DataFrame:  # fmt: skip
    """``target``'s kind of ``frame`` as finished table rows, sized by the same rule."""
    from pyspark.sql.pandas.types import from_arrow_schema

    rows = counts.rows.get(target.kind, 0)
    finisher = RowFinisher(FileWriter(target, pipeline_id, batch_id, "", layout))
    kind = sized(rows_of(frame, target), rows, target.identity)
    return kind.mapInArrow(finisher, from_arrow_schema(target.schema))
