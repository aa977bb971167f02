"""A batch's output -> data files in its tables, written by Spark tasks (no row reaches the driver).

The batch sink (:class:`jobs.job.BatchSink`) hands each micro-batch's output frame (rows of
``record_kind`` pane / late / rejected, and names of files operator tasks wrote:
:mod:`jobs.output_tables`, :mod:`jobs.task_files`) to :func:`write_batch_files`, which runs one
Spark job:

1. the operator's tasks run (the stateful operator runs exactly once per batch: the output is
   read by this one job only); a task sends few rows of a kind on as rows and writes many
   itself, as files of about :data:`~jobs.task_files.ROWS_PER_FILE` rows;
2. their output is shuffled to one *writer task* (:class:`BatchWriter`, a ``mapInArrow``
   function): it finishes the rows of each kind and writes them as data files of at most
   ``ROWS_PER_FILE`` rows, and reads the footers of the files the operator tasks wrote (their
   size, Delta statistics and figures);
3. the driver collects one small row per file (:data:`FILE_COLUMNS`) and commits them.

File sizes: a batch writes per kind one file of the rows tasks sent on (none if there are none)
plus, per task that emitted more than ``ROWS_AS_ROWS`` rows of the kind, files of about
``ROWS_PER_FILE`` rows and at most one smaller one. A small batch writes one file per table.

The batch's id and the kinds its tables already hold reach the tasks as Spark local properties
of the job (:func:`batch_properties`): a replayed batch runs the operator (Spark's state must
advance) but writes nothing for a table that holds it.

A session with delta-spark writes through Spark instead: the operator sends every row on
(``OperatorConfig.writing`` None), :func:`cached` keeps its output for the jobs that read it,
:func:`batch_counts` counts it and :func:`finished_frame` gives each kind's finished rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from jobs.output_tables import (
    DATA_FILE,
    FIGURES_KEY,
    KIND_PANE,
    RECORD_KIND,
    OutputTables,
)
from jobs.task_files import (
    BATCH_ID_PROPERTY,
    COMMITTED_PROPERTY,
    ROWS_PER_FILE,
    attempt_id,
)
from sinks.data_files import DataFile, read_data_file, split_rows, write_data_file

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

FILE_COLUMNS = pa.schema(
    [
        pa.field(RECORD_KIND, pa.string()),
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("rows", pa.int64()),
        pa.field("stats", pa.string()),
        pa.field("figures", pa.string()),
    ]
)
FILE_DDL = (f"{RECORD_KIND} string, path string, size bigint, rows bigint, stats string, "
            "figures string")  # fmt: skip


@dataclass
class BatchCounts:
    """Rows of a batch's output per kind, and the panes by timing and retractions."""

    rows: dict[str, int] = field(default_factory=dict)
    by_timing: dict[str, int] = field(default_factory=dict)
    retractions: int = 0

    def add(self, kind: str, rows: int, figures: Mapping) -> None:
        self.rows[kind] = self.rows.get(kind, 0) + rows
        for timing, n in figures.get("by_timing", {}).items():
            self.by_timing[timing] = self.by_timing.get(timing, 0) + n
        self.retractions += figures.get("retractions", 0)


def batch_counts(frame: DataFrame) -> BatchCounts:
    """The figures of ``frame`` (the operator's output, every row sent on) from one aggregate."""
    counts = BatchCounts()
    grouped = frame.groupBy(RECORD_KIND, "timing", "is_retraction").count().collect()
    for kind, timing, retraction, n in grouped:
        figures = {"by_timing": {timing: n}, "retractions": n if retraction else 0}
        counts.add(kind, n, figures if kind == KIND_PANE else {})
    return counts


@dataclass(frozen=True)
class BatchWriter:
    """``mapInArrow`` function of the writer task (the module doc): the batch's output rows ->
    one :data:`FILE_COLUMNS` row per data file, written here or named by an operator task.
    Picklable."""

    tables: OutputTables
    batch_id: int
    committed: frozenset[str] = frozenset()
    rows_per_file: int = ROWS_PER_FILE

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        named: list[tuple[str, str]] = []
        rows: dict[str, list[pa.Table]] = {}
        for batch in batches:
            if not batch.num_rows:
                continue
            table = pa.Table.from_batches([batch])
            is_file = pc.is_valid(table.column(DATA_FILE))
            files = table.filter(is_file)
            named += zip(files.column(RECORD_KIND).to_pylist(),
                         files.column(DATA_FILE).to_pylist(), strict=True)  # fmt: skip
            records = table.filter(pc.invert(is_file))
            for kind in set(records.column(RECORD_KIND).to_pylist()):
                of_kind = records.filter(pc.equal(records.column(RECORD_KIND), kind))
                rows.setdefault(kind, []).append(of_kind)
        out = [self._read(kind, name) for kind, name in named]
        for kind, chunks in rows.items():
            if kind not in self.committed:
                out += self._write(kind, pa.concat_tables(chunks))
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=FILE_COLUMNS)

    def _read(self, kind: str, name: str) -> dict:
        found, metadata = read_data_file(self.tables.targets[kind].table_uri, name)
        return self._row(kind, found, metadata.get(FIGURES_KEY, "{}"))

    def _write(self, kind: str, records: pa.Table) -> list[dict]:
        target = self.tables.targets[kind]
        core = records.select(target.columns).cast(target.core)
        prefix = f"part-{self.batch_id:08d}-{attempt_id()}-w"
        out = []
        for n, (offset, length) in enumerate(split_rows(core.num_rows, self.rows_per_file)):
            part = core.slice(offset, length)
            figures = self.tables.figures(kind, part)
            finished = self.tables.finish(kind, part, self.batch_id)
            found = write_data_file(target.table_uri, f"{prefix}-{n:03d}.parquet", finished,
                                    target.schema, {FIGURES_KEY: figures})  # fmt: skip
            out.append(self._row(kind, found, figures))
        return out

    @staticmethod
    def _row(kind: str, found: DataFile, figures: str) -> dict:
        return {RECORD_KIND: kind, "path": found.path, "size": found.size, "rows": found.rows,
                "stats": found.stats, "figures": figures}  # fmt: skip


@contextmanager
def batch_properties(spark: SparkSession, batch_id: int,
                     committed: Sequence[str]) -> Iterator[None]:  # fmt: skip
    """The batch's id and committed kinds as local properties of the jobs started meanwhile
    (read by the operator's tasks: :class:`jobs.task_files.BatchOfTask`)."""
    sc = spark.sparkContext
    sc.setLocalProperty(BATCH_ID_PROPERTY, str(batch_id))
    sc.setLocalProperty(COMMITTED_PROPERTY, ",".join(sorted(committed)))
    try:
        yield
    finally:  # None removes a local property (pyspark's annotation says str only)
        sc.setLocalProperty(BATCH_ID_PROPERTY, None)  # type: ignore[arg-type]
        sc.setLocalProperty(COMMITTED_PROPERTY, None)  # type: ignore[arg-type]


def write_batch_files(
    frame: DataFrame, tables: OutputTables, batch_id: int, committed: Sequence[str]
) -> tuple[dict[str, list[DataFile]], BatchCounts]:
    """Run the batch (one Spark job, the module doc): its data files by kind, and its figures
    (the kinds in ``committed`` are neither written nor counted)."""
    writer = BatchWriter(tables, batch_id, frozenset(committed))
    plan = frame.repartition(1).mapInArrow(writer, FILE_DDL)
    with batch_properties(frame.sparkSession, batch_id, committed):
        got = plan.collect()
    files: dict[str, list[DataFile]] = {}
    counts = BatchCounts()
    for row in got:
        kind = row[RECORD_KIND]
        files.setdefault(kind, []).append(DataFile(row["path"], row["size"], row["rows"],
                                                   row["stats"]))  # fmt: skip
        counts.add(kind, row["rows"], json.loads(row["figures"]))
    return files, counts


@contextmanager
def cached(frame: DataFrame) -> Iterator[DataFrame]:
    """``frame`` cached on the executors (memory, then disk) while the block runs."""
    from pyspark import StorageLevel

    kept = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield kept
    finally:
        kept.unpersist()


def sized(frame: DataFrame, rows: int, identity: Sequence[str],
          rows_per_file: int = ROWS_PER_FILE) -> DataFrame:  # fmt: skip
    """``frame`` (one kind's ``rows`` rows) as ``ceil(rows / rows_per_file)`` partitions (at
    least one), all rows of equal ``identity`` in one: merged without a shuffle when there are
    enough partitions, else shuffled by ``identity``."""
    groups = max(1, -(-rows // rows_per_file))
    if groups <= frame.rdd.getNumPartitions():
        return frame.coalesce(groups)
    return frame.repartition(groups, *identity)


@dataclass(frozen=True)
class RowFinisher:
    """``mapInArrow`` function: one task's rows of one kind -> finished table rows (for a
    writer that writes a frame itself: delta-spark). Picklable."""

    tables: OutputTables
    kind: str
    batch_id: int

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        target = self.tables.targets[self.kind]
        got = [b for b in batches if b.num_rows]
        if got:
            core = pa.Table.from_batches(got).select(target.columns).cast(target.core)
            finished = self.tables.finish(self.kind, core, self.batch_id)
            yield from finished.select(target.schema.names).cast(target.schema).to_batches()


def finished_frame(frame: DataFrame, tables: OutputTables, kind: str, counts: BatchCounts,
                   batch_id: int) -> DataFrame:  # fmt: skip
    """``kind``'s rows of ``frame`` (every row sent on) as finished table rows, in
    ``ceil(n / ROWS_PER_FILE)`` tasks, all rows of a key in one."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    target = tables.targets[kind]
    rows = frame.where(F.col(RECORD_KIND) == kind).select(*target.columns)
    rows = sized(rows, counts.rows.get(kind, 0), target.identity)
    return rows.mapInArrow(RowFinisher(tables, kind, batch_id), from_arrow_schema(target.schema))
