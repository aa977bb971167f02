"""The batch sink: each micro-batch's panes, late and rejected rows committed once per table.

:class:`BatchSink` is the query's ``foreachBatch``: it runs the stateful operator over the batch
(:class:`jobs.driver.plan.OperatorPlan`), the executors write each kind as data files into its
Delta table (:mod:`jobs.executor.batch_output`) and the driver commits them with an
application transaction (version = batch id), so one micro-batch is committed at most once per
table, whatever replays a crash causes. Before it returns (before Spark's commit entry of the
batch) it hands the batch's :class:`BatchStats` to ``on_batch``: the run notes them
(:mod:`jobs.driver.run_record`). :func:`kill` is the test hook that SIGKILLs the job at a named
point of a batch (``panestore run --kill-at``, hidden from ``--help``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from jobs.checkpoint.clocks import Clocks
from jobs.checkpoint.input_clocks import InputsAtBatch, latest_before, settle, watermark_ms
from jobs.checkpoint.logs import batch_clocks, batch_input, local_path
from jobs.config.pipeline import Pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.plan import OperatorPlan, inputs_rule, layout
from jobs.executor.batch_output import BatchCounts, write_batch_files
from jobs.executor.output_tables import KIND_LATE, KIND_PANE, KIND_REJECTED, KINDS, OutputTables
from jobs.executor.state_store import state_root
from jobs.executor.task_files import ROWS_PER_FILE, TaskWriting, attempt_id
from jobs.sources.files.changes import CHANGED, ChangedFile, bind_changes
from jobs.startup.session import SHUFFLE_PARTITIONS
from sinks.lake import (
    REJECTED_CORE,
    DataFile,
    Figures,
    LateLog,
    PaneLog,
    RejectedLog,
    batch_figures,
    finish_rejected,
    write_data_files,
)
from sinks.lake import (
    table_identity as lake_table_identity,
)

KILL_POINTS = ("before_commit", "between_tables", "after_commit", "after_report")
"""Where :func:`kill` can stop a batch: before its Delta commits; between the pane log's commit
and the late and rejected tables'; after every Delta commit, before ``on_batch`` (the run's
note); after ``on_batch``, before Spark's commit entry."""
VANISHED = (
    "file vanished: listed for this batch but gone when it was read (deleted or moved after "
    "it landed); its records are not in this batch: land it again under a new name"
)


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
    """What one execution of a batch did: the input records it took, the rows it committed
    (panes by timing, retractions, late, rejected), the tables that held the batch already
    (``held_by``: a replay's) and what they hold of it (``held``, read back from them)."""

    batch_id: int
    panes: int = 0
    by_timing: dict[str, int] = field(default_factory=dict)
    retractions: int = 0
    late: int = 0
    rejected: int = 0
    committed: bool = False  # False: a replay whose tables were already committed
    records: int = 0  # the input records the batch took (its operator counts them, replays too)
    records_by_input: dict[str, int] = field(default_factory=dict)  # of several inputs
    held_by: tuple[str, ...] = ()  # the tables that held the batch before this execution
    held: Figures = field(default_factory=Figures)  # what those tables hold of it
    vanished: tuple[str, ...] = ()  # listed input files gone before they were read (rejected)
    changed: tuple[ChangedFile, ...] = ()  # input files changed after a batch read them (rejected)
    watermark_ms: int | None = None  # the watermark the batch ran at (Spark's offset log)
    watermark_after_ms: int | None = None  # after the batch (fired in it); Spark's next batch's
    compute_s: float = 0.0  # running the batch's plan (source, engine) to its output
    commit_s: float = 0.0  # the Delta commits

    def figures(self) -> Figures:
        """The batch's figures: the records it took and every table's rows of it, those this
        execution committed and those the tables held already."""
        own = Figures.of(
            records=self.records,
            records_by_input=self.records_by_input,
            panes=self.panes,
            by_timing=self.by_timing,
            retractions=self.retractions,
            late=self.late,
            rejected=self.rejected,
        )
        return own + self.held


TABLE_OF_KIND = {KIND_PANE: "panes", KIND_LATE: "late", KIND_REJECTED: "rejected"}
"""The lake table each kind of the operator's output is committed to."""


def table_identity(pipeline: Pipeline, table: str, what: str) -> dict[str, Any]:
    """``properties`` (the pipeline's configuration fingerprint) written when a table is
    created, and the ``check`` that refuses an existing table of another configuration."""
    return lake_table_identity(view_spec(pipeline), table, what)


class BatchSink:
    """``foreachBatch`` sink: panes, late and rejected rows of a batch, each committed once.

    Per batch (:mod:`jobs.executor.batch_output`): the tables that already hold the batch are
    skipped (a replay: their transaction version is at or above the batch id); one Spark job runs
    the operator over the batch at the batch's clocks (its offset log) and, when the batch moved
    the watermark, fires at the new watermark in the same tasks
    (:class:`jobs.driver.plan.OperatorPlan`). It writes each kind still to commit as Parquet files
    into its table's directory (operator tasks that emit many rows write them themselves, the
    rest one writer task); the driver collects a row per file (path, size, statistics, figures)
    and commits each table's files in one Delta commit with the application transaction
    (pipeline, batch id) through delta-rs, the pane log first. Vanished input files (few) become
    rejected rows written from the driver into the rejected table's commit. No output row is
    collected on the driver.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        on_batch: Callable[[BatchStats], Any] | None = None,
        kill_at: Sequence[tuple[str, int]] = (),
        *,
        shards: int = SHUFFLE_PARTITIONS,
        profile_dir: str | None = None,
    ) -> None:
        """``shards``: the operator's tasks (the lake's state layout); ``profile_dir``: profile
        the operator's tasks there; ``kill_at``: test hook, the ``(point, batch id)`` pairs at
        which to SIGKILL the job (:func:`kill`)."""
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
        self._operator: OperatorPlan | None = None
        self.shards = shards
        self.profile_dir = profile_dir

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

    @property
    def operator(self) -> OperatorPlan:
        """How each batch runs the operator (its state under the checkpoint's ``state``)."""
        if self._operator is None:
            root = state_root(self.pipeline.checkpoint_path)
            if local_path(root) is not None:  # in a bucket, a folder is a prefix
                os.makedirs(root, exist_ok=True)
            self._operator = OperatorPlan.of(
                self.pipeline,
                root,
                self.shards,
                writing=self.task_writing,
                profile_dir=self.profile_dir,
            )
        return self._operator

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

    def table_versions(self) -> dict[str, int | None]:
        """The Delta version of each table the sink writes, by table name (``panes``, ``late``,
        ``rejected``), brought up to date."""
        return {name: dt.version() for name, dt in self.written_tables().items()}

    def written_tables(self) -> dict[str, Any]:
        """{table name: its ``deltalake.DeltaTable``, brought up to date} of the tables the
        batches commit to (the handles the sink has open: one incremental read of each log)."""
        return {TABLE_OF_KIND[k]: a.table() for k, a in self.appenders.items()}

    def create_tables(self) -> None:
        for appender in self.appenders.values():
            appender.table()

    def __call__(self, df, batch_id: int) -> None:
        """Write and commit batch ``batch_id`` (the class doc); no output row is collected."""
        started = time.perf_counter()
        committed = [k for k, a in self.appenders.items() if a.is_committed(batch_id)]
        todo = [k for k in KINDS if k not in committed]
        # landing files changed after an earlier batch read them (jobs.sources.files.changes):
        # bound to this batch before its rejected rows commit, so a replay records the same rows
        changed = tuple(bind_changes(self.pipeline, batch_id)) if KIND_REJECTED in todo else ()
        clocks = batch_clocks(self.pipeline.checkpoint_path, batch_id)
        inputs = self._inputs_at(batch_id, clocks)
        if inputs is not None:  # several inputs: their watermark, not Spark's
            clocks = Clocks(inputs.watermark_ms, clocks.processing_ms)
        files, counts, after = self._run_operator(df, clocks, batch_id, committed, inputs)
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
            watermark_ms=clocks.watermark_ms,
            watermark_after_ms=after,
            records=counts.records,
            records_by_input={  # (the lane after the inputs' is the control rows')
                one.name: counts.lane_records.get(lane, 0)
                for lane, one in enumerate(self.pipeline.inputs)
            },
            held_by=tuple(TABLE_OF_KIND[k] for k in committed),
            held=self.held_figures(batch_id, committed),
        )
        stats.compute_s = computed - started
        stats.commit_s = time.perf_counter() - computed
        kill("after_commit", batch_id, self.kill_at)
        self.stats[batch_id] = stats
        if self.on_batch is not None:
            self.on_batch(stats)
        kill("after_report", batch_id, self.kill_at)

    def held_figures(self, batch_id: int, kinds: Sequence[str]) -> Figures:
        """What the tables of ``kinds`` hold of batch ``batch_id`` (:func:`batch_figures`)."""
        if not kinds:
            return Figures()
        tables = {TABLE_OF_KIND[k]: self.appenders[k].table() for k in kinds}
        return batch_figures(tables, batch_id)

    def _run_operator(
        self,
        df,
        clocks: Clocks,
        batch_id: int,
        committed: Sequence[str],
        inputs: InputsAtBatch | None = None,
    ) -> tuple[dict[str, list[DataFile]], BatchCounts, int]:
        """The operator over the batch's input at the batch's clocks, the firing at the
        watermark after it included (one job): its files and counts, and that watermark. With
        several inputs (``inputs``), the inputs' clocks after the batch are settled in the
        run's directory before anything of the batch commits (a replay runs at the clocks
        its first attempt settled)."""
        operator = self.operator
        out = operator.output(df, clocks, batch_id, inputs)
        files, counts = write_batch_files(out, self.tables, batch_id, committed)
        if inputs is not None:
            settled = settle(self.pipeline.run_files, inputs.after(counts.lane_clocks))
            return files, counts, watermark_ms(settled.watermark_after)
        return files, counts, operator.watermark_after(clocks.watermark_ms, counts.clock_us)

    def _inputs_at(self, batch_id: int, clocks: Clocks) -> InputsAtBatch | None:
        """With several inputs: what batch ``batch_id`` runs at (the inputs' clocks after the
        batch before it, the batch's processing time from Spark's offset log); else None."""
        pipeline = self.pipeline
        if not pipeline.several_inputs:
            return None
        return InputsAtBatch(
            *inputs_rule(pipeline),
            latest_before(pipeline.run_files, batch_id),
            batch_id,
            clocks.processing_ms * 1000,
            frozenset(one.name for one in pipeline.inputs if one.writer_noted),
        )

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
