"""A batch's output -> data files in its tables, written by Spark tasks (no row reaches the driver).

The batch sink (:class:`jobs.driver.batch_sink.BatchSink`) hands the output frame of each of a
micro-batch's operator steps (rows of ``record_kind`` pane / late / rejected, names of files
operator tasks wrote, and each task's clock row: :mod:`jobs.executor.output_tables`,
:mod:`jobs.executor.task_files`) to :func:`write_batch_files`, which runs one Spark job:

1. the operator's tasks run (a step runs exactly once: its output is read by this one job
   only); a task sends few rows of a kind on as rows and writes many itself, as files of about
   :data:`~jobs.executor.task_files.ROWS_PER_FILE` rows;
2. their output is shuffled to one *writer task* (:class:`BatchWriter`, a ``mapInArrow``
   function): it finishes the rows of each kind and writes them as data files of at most
   ``ROWS_PER_FILE`` rows, and reads the footers of the files the operator tasks wrote (their
   size, Delta statistics and figures);
3. the driver collects one small row per file (:data:`FILE_COLUMNS`), and one with the tasks'
   largest clock and input records, and commits the files.

File sizes: a batch writes per kind one file of the rows tasks sent on (none if there are none)
plus, per task that emitted more than ``ROWS_AS_ROWS`` rows of the kind, files of about
``ROWS_PER_FILE`` rows and at most one smaller one. A small batch writes one file per table.

The batch's id and the kinds its tables already hold reach the tasks as Spark local properties
of the job (:func:`batch_properties`): a replayed batch runs the operator (its state versions
are written again) but writes nothing for a table that holds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from jobs.executor.operator_input import CLOCK, LANE
from jobs.executor.output_tables import (
    DATA_FILE,
    FIGURES_KEY,
    INPUT_RECORDS,
    KIND_CLOCK,
    RECORD_KIND,
    OutputTables,
)
from jobs.executor.task_files import (
    BATCH_ID_PROPERTY,
    COMMITTED_PROPERTY,
    ROWS_PER_FILE,
    attempt_id,
)
from sinks.lake import DataFile, read_data_file, split_rows, write_data_file

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
FILE_DDL = (
    f"{RECORD_KIND} string, path string, size bigint, rows bigint, stats string, figures string"
)


@dataclass
class BatchCounts:
    """Rows of a batch's output per kind, the panes by timing and retractions, the largest
    input clock (µs, None: none) of the operator's tasks and the input records they took."""

    rows: dict[str, int] = field(default_factory=dict)
    by_timing: dict[str, int] = field(default_factory=dict)
    retractions: int = 0
    clock_us: int | None = None
    records: int = 0
    #: With several inputs: each input's largest clock (µs) by its lane (inputs without any
    #: absent), which every operator task reports alike.
    lane_clocks: dict[int, int] = field(default_factory=dict)
    #: With several inputs: the records the batch took of each input, by its lane.
    lane_records: dict[int, int] = field(default_factory=dict)

    def add(self, kind: str, rows: int, figures: Mapping) -> None:
        self.rows[kind] = self.rows.get(kind, 0) + rows
        for timing, n in figures.get("by_timing", {}).items():
            self.by_timing[timing] = self.by_timing.get(timing, 0) + n
        self.retractions += figures.get("retractions", 0)

    def merge(self, other: BatchCounts) -> None:
        for kind, n in other.rows.items():
            self.rows[kind] = self.rows.get(kind, 0) + n
        for timing, n in other.by_timing.items():
            self.by_timing[timing] = self.by_timing.get(timing, 0) + n
        self.retractions += other.retractions
        self.add_clock(other.clock_us)
        self.records += other.records
        self.add_lane_clocks(other.lane_clocks)
        self.add_lane_records(other.lane_records)

    def add_clock(self, clock_us: int | None) -> None:
        if clock_us is not None and (self.clock_us is None or clock_us > self.clock_us):
            self.clock_us = clock_us

    def add_lane_records(self, records: Mapping[int, int]) -> None:
        for lane, n in records.items():
            self.lane_records[lane] = self.lane_records.get(lane, 0) + n

    def add_lane_clocks(self, clocks: Mapping[int, int]) -> None:
        for lane, clock in clocks.items():
            self.lane_clocks[lane] = max(clock, self.lane_clocks.get(lane, clock))


@dataclass(frozen=True)
class BatchWriter:
    """``mapInArrow`` function of the writer task (the module doc): the batch's output rows ->
    one :data:`FILE_COLUMNS` row per data file, written here or named by an operator task, and
    one of kind ``clock`` (its ``figures``: the operator tasks' largest clock and their input
    records). Picklable."""

    tables: OutputTables
    batch_id: int
    committed: frozenset[str] = frozenset()
    rows_per_file: int = ROWS_PER_FILE

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        named: list[tuple[str, str]] = []
        rows: dict[str, list[pa.Table]] = {}
        clock, inputs, lanes = None, 0, BatchCounts()
        for batch in batches:
            if not batch.num_rows:
                continue
            table = pa.Table.from_batches([batch])
            is_clock = pc.equal(table.column(RECORD_KIND), KIND_CLOCK)
            clocks = table.filter(is_clock)
            top = pc.max(clocks.column(CLOCK)).as_py()
            clock = top if clock is None or (top is not None and top > clock) else clock
            of_lanes = pc.is_valid(clocks.column(LANE))
            tasks = clocks.filter(pc.invert(of_lanes))
            inputs += pc.sum(tasks.column(INPUT_RECORDS)).as_py() or 0
            for row in clocks.filter(of_lanes).to_pylist():  # several inputs: by input
                if row[CLOCK] is not None:
                    lanes.add_lane_clocks({row[LANE]: row[CLOCK]})
                lanes.add_lane_records({row[LANE]: row[INPUT_RECORDS]})
            table = table.filter(pc.invert(is_clock))
            is_file = pc.is_valid(table.column(DATA_FILE))
            files = table.filter(is_file)
            named += zip(
                files.column(RECORD_KIND).to_pylist(),
                files.column(DATA_FILE).to_pylist(),
                strict=True,
            )
            records = table.filter(pc.invert(is_file))
            for kind in set(records.column(RECORD_KIND).to_pylist()):
                of_kind = records.filter(pc.equal(records.column(RECORD_KIND), kind))
                rows.setdefault(kind, []).append(of_kind)
        out = [self._read(kind, name) for kind, name in named]
        for kind, chunks in rows.items():
            if kind not in self.committed:
                out += self._write(kind, pa.concat_tables(chunks))
        figures = json.dumps(
            {
                "clock_us": clock,
                "records": inputs,
                "lanes": sorted(lanes.lane_clocks.items()),
                "lane_records": sorted(lanes.lane_records.items()),
            }
        )
        out.append({RECORD_KIND: KIND_CLOCK, "rows": 0, "figures": figures})
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
            found = write_data_file(
                target.table_uri,
                f"{prefix}-{n:03d}.parquet",
                finished,
                target.schema,
                {FIGURES_KEY: figures},
            )
            out.append(self._row(kind, found, figures))
        return out

    @staticmethod
    def _row(kind: str, found: DataFile, figures: str) -> dict:
        return {
            RECORD_KIND: kind,
            "path": found.path,
            "size": found.size,
            "rows": found.rows,
            "stats": found.stats,
            "figures": figures,
        }


@contextmanager
def batch_properties(
    spark: SparkSession, batch_id: int, committed: Sequence[str]
) -> Iterator[None]:
    """The batch's id and committed kinds as local properties of the jobs started meanwhile
    (read by the operator's tasks: :class:`jobs.executor.task_files.BatchOfTask`)."""
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
    (the kinds in ``committed`` are neither written nor counted; the input records always
    are)."""
    writer = BatchWriter(tables, batch_id, frozenset(committed))
    plan = frame.repartition(1).mapInArrow(writer, FILE_DDL)
    with batch_properties(frame.sparkSession, batch_id, committed):
        got = plan.collect()
    files: dict[str, list[DataFile]] = {}
    counts = BatchCounts()
    for row in got:
        kind = row[RECORD_KIND]
        if kind == KIND_CLOCK:
            figures = json.loads(row["figures"])
            counts.add_clock(figures["clock_us"])
            counts.records += figures["records"]
            counts.add_lane_clocks(dict(figures["lanes"]))
            counts.add_lane_records(dict(figures["lane_records"]))
            continue
        files.setdefault(kind, []).append(
            DataFile(row["path"], row["size"], row["rows"], row["stats"])
        )
        counts.add(kind, row["rows"], json.loads(row["figures"]))
    return files, counts
