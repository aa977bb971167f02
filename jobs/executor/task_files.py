"""What one operator task sends on as rows, and what it writes itself as data files.

Rows that leave the operator's Python worker as Arrow record batches are handed to the JVM,
shuffled to the batch's writer task and turned back into Arrow there
(:mod:`jobs.executor.batch_output`). A task that emits many rows of a kind writes them itself
instead, straight into the kind's table directory. Per task and kind (:class:`TaskOutput`):

* rows leave as rows while the kind's total in the task stays within ``rows_as_rows``, counted
  by whole emissions (an emission is one bucket visit's rows of that kind: a key's rows are never
  split);
* from the emission that takes the total past it on, the task writes: it names a data file (one
  output row: ``record_kind`` and :data:`~jobs.executor.output_tables.DATA_FILE`) when the file's
  first rows arrive, collects rows until the file holds at least ``rows_per_file``, then finishes
  and writes them and names the next file at the next rows; at the task's end (``close``) it writes
  the last one. A file's Delta statistics and figures are in its footer
  (:func:`sinks.lake.data_files.write_data_file`), for the writer task that completes its file row.

So a batch whose tasks emit few rows writes one file per kind (the writer task's), and a task
that emits many writes files of about ``rows_per_file`` rows, plus at most one smaller one.

Why a file may be named before it is written: Spark keeps only a successful task attempt's
output, and the writer task that reads the named files runs after every operator task has ended
(a shuffle stands between them). A task attempt ends after ``close``, so each named file is
complete by then; a failed attempt's names are discarded with its output and its files are
never committed (a full vacuum removes them).

The batch (its id, the kinds its tables already hold) comes from Spark local properties the
batch sink sets for the batch's job (:data:`BATCH_ID_PROPERTY`, :data:`COMMITTED_PROPERTY`);
a kind already committed (a replayed batch) is neither sent nor written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from jobs.executor.output_tables import DATA_FILE, FIGURES_KEY, RECORD_KIND, OutputTables
from sinks.lake import write_data_file

ROWS_AS_ROWS = 10_000
"""Most rows of a kind one task sends on as rows; beyond, it writes data files itself."""
ROWS_PER_FILE = 500_000
"""A data file takes rows until it holds this many (pane rows: tens of MB of Parquet)."""
BATCH_ID_PROPERTY = "panestore.batch_id"
COMMITTED_PROPERTY = "panestore.committed_kinds"
"""Spark local properties of a batch's job: the batch id, and the kinds (comma-separated)
whose tables already hold the batch."""
SPARK_BATCH_ID_PROPERTY = "streaming.sql.batchId"


def attempt_id() -> str:
    """A new random id for the files of one writing attempt (names never collide)."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class TaskWriting:
    """How the operator's tasks write: the tables, and the two row counts of the module doc."""

    tables: OutputTables
    rows_as_rows: int = ROWS_AS_ROWS
    rows_per_file: int = ROWS_PER_FILE


@dataclass(frozen=True)
class BatchOfTask:
    """The batch a task works for: its id, and the kinds whose tables already hold it."""

    batch_id: int
    committed: frozenset[str] = frozenset()

    @classmethod
    def current(cls) -> BatchOfTask:
        """The running Spark task's batch (its job's local properties)."""
        from pyspark import TaskContext

        task = TaskContext.get()
        prop = task.getLocalProperty if task is not None else (lambda _name: None)
        batch = prop(BATCH_ID_PROPERTY) or prop(SPARK_BATCH_ID_PROPERTY)
        if batch is None:
            raise RuntimeError(
                "an operator task without a batch id: run the query through "
                "jobs.driver.batch_sink.BatchSink"
            )
        committed = frozenset(k for k in (prop(COMMITTED_PROPERTY) or "").split(",") if k)
        return cls(int(batch), committed)


@dataclass
class _Pending:
    """The rows collected for one named file."""

    name: str
    chunks: list[pa.Table] = field(default_factory=list)
    rows: int = 0


class TaskOutput:
    """One task's output of every kind (the module doc). ``emit`` returns the record batches to
    yield (of the operator's output ``schema``); ``close`` writes what is still collected.
    ``writing`` None: every row leaves as a row (a caller that reads the operator's output
    itself, e.g. a test)."""

    def __init__(
        self, schema: pa.Schema, writing: TaskWriting | None, batch: BatchOfTask | None = None
    ) -> None:
        self.schema = schema
        self.columns = schema.names
        self.writing = writing
        self._batch = batch
        self._sent: dict[str, int] = {}
        self._pending: dict[str, _Pending] = {}
        self._writes: set[str] = set()
        self._task_id = attempt_id()
        self._files = 0
        self.written: list[str] = []

    @property
    def batch(self) -> BatchOfTask:
        if self._batch is None:
            self._batch = BatchOfTask.current()
        return self._batch

    def emit(self, kind: str, columns: dict[str, list], n: int) -> Iterator[pa.RecordBatch]:
        """Record batches to yield for ``n`` core records of ``kind`` (``columns``: one list per
        core column; the lists may be reused)."""
        if not n or (self.writing is not None and kind in self.batch.committed):
            return
        sent = self._sent.get(kind, 0)
        if self.writing is None or (
            kind not in self._writes and sent + n <= self.writing.rows_as_rows
        ):
            self._sent[kind] = sent + n
            data = {c: columns[c] if c in columns else [None] * n for c in self.columns}
            data[RECORD_KIND] = [kind] * n
            yield pa.RecordBatch.from_pydict(data, schema=self.schema)
            return
        self._writes.add(kind)
        target = self.writing.tables.targets[kind]
        pending = self._pending.get(kind)
        if pending is None:
            pending = self._pending[kind] = _Pending(self._file_name())
            named: dict[str, list[str | None]] = {c: [None] for c in self.columns}
            named[RECORD_KIND], named[DATA_FILE] = [kind], [pending.name]
            yield pa.RecordBatch.from_pydict(named, schema=self.schema)
        pending.chunks.append(
            pa.Table.from_pydict({c: columns[c] for c in target.columns}, schema=target.core)
        )
        pending.rows += n
        if pending.rows >= self.writing.rows_per_file:
            self._write(kind)

    def close(self) -> None:
        """Write every file still collecting rows (the end of the task)."""
        for kind in list(self._pending):
            self._write(kind)

    def _file_name(self) -> str:
        from pyspark import TaskContext

        task = TaskContext.get()
        part, attempt = (task.partitionId(), task.attemptNumber()) if task else (0, 0)
        self._files += 1
        return (
            f"part-{self.batch.batch_id:08d}-{self._task_id}-{part:05d}-{attempt}"
            f"-t{self._files:03d}.parquet"
        )

    def _write(self, kind: str) -> None:
        pending = self._pending.pop(kind)
        assert self.writing is not None  # files are collected only by a writing task
        tables, target = self.writing.tables, self.writing.tables.targets[kind]
        core = pa.concat_tables(pending.chunks)
        finished = tables.finish(kind, core, self.batch.batch_id)
        write_data_file(
            target.table_uri,
            pending.name,
            finished,
            target.schema,
            {FIGURES_KEY: tables.figures(kind, core)},
        )
        self.written.append(pending.name)
