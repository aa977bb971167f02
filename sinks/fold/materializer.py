"""The materializer: fold the pane log into the ``current`` view with one Delta MERGE per run.

``Materializer(spec).run()`` reads the pane-log versions it has not folded yet
(:mod:`sinks.fold.pane_log_changes`), reduces them to one change per (key, window) and applies the
changes to the ``current`` Delta table in a single MERGE commit (:mod:`sinks.fold.view_merge`). The
commit carries an application transaction (``app id = "<pipeline>/materializer"``, ``version =
the last pane-log version folded``), read back first on every run, so a re-run or a
crash-and-retry never folds a version twice; a commit conflict (a concurrent optimize, another
materializer on another machine) is retried from the start. One materializer runs at a time
(:func:`sinks.lake.lock.materializer_lock`). After a fold that committed, still under that lock, the
view is compacted when its small files pass the threshold (:mod:`sinks.upkeep.compaction`; a failure
is a warning line of :meth:`MaterializeResult.line`, never the fold's), and once a day vacuumed
(:mod:`sinks.upkeep.auto_vacuum`; likewise a warning when it fails).

A backlog larger than the fold's memory is folded in pieces by key-hash range
(:mod:`sinks.fold.fold_plan`), one MERGE commit each: planned, spilled and folded piece by piece
in worker processes (:mod:`sinks.fold.piece_workers`), or over Spark's executors (``spread``).

The view's change feed (:mod:`sinks.fold.change_feed`) records what each MERGE inserted, updated
(pre and post image) and deleted; a view created before the feed existed gets it turned on when the
materializer opens it, from that commit on (:attr:`MaterializeResult.change_feed_from`).

Two reducers give the same changes: the reference one in Python (:mod:`sinks.fold.reducer`, any
window function; it reads the view rows of the keys it touches) and a vectorized one in DuckDB
(:mod:`sinks.fold.sql_reducer`) for non-merging window functions (fixed, sliding, global), whose
changes are applied by conditional MERGE clauses without reading the view. The fold rules are in
:mod:`sinks.fold.reducer`.

No integer fold wraps: a window whose value its view column cannot hold (discarding panes that
each fit, summed beyond 64 bits) stops the run with :class:`sinks.lake.errors.FoldValueOutOfRange`
naming the key, the window and the aggregate, and nothing is written. The reference reducer's
values are exact and checked as they become the change table
(:func:`sinks.fold.view_merge.check_view_range`); the vectorized path leaves to it the versions
whose sums do not fit their column (the view's value may bring them back) and any MERGE whose
checked integer sum fails.

View rows: key column(s), window bounds (µs and timestamps), ``window_day`` (the UTC date the
window starts on; the view is partitioned by it, so a MERGE rewrites only the days its changes
touch), the aggregate column(s), the pane index and timing of the pane the row reflects, its
output timestamp, ``pane_log_version`` (the pane-log version of that pane; discarding: the latest
version merged in), ``absorbed``, and ``accumulator``, the JSON of the row's combiner accumulator
(set in discarding mode when folding needs it, else null).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from panes.windowing import AccumulationMode
from sinks.fold.change_feed import ensure_change_feed
from sinks.fold.fold_plan import (
    FoldPlan,
    fold_in_progress,
    one_piece_plan,
    piece_app_id,
    piece_metadata,
    plan_fold,
    read_piece,
    remove_stale_scratch,
    scratch_prefix,
    spill,
)
from sinks.fold.last_failure import clear_fold_failure, note_fold_failure
from sinks.fold.pane_log_changes import check_pane_rows, pane_log_commits, read_pane_rows
from sinks.fold.piece_workers import PieceWorkers
from sinks.fold.reducer import Reducer
from sinks.fold.sql_reducer import reduce_vectorized, vectorized_applies
from sinks.fold.view_merge import change_table, fits_view, merge_changes, rows_change_table
from sinks.lake import (
    FOLDED_FROM_METADATA,
    FOLDED_VERSION_METADATA,
    KEY_HASH,
    KIND_METADATA,
    PANE_LOG_VERSION,
    PIPELINE_METADATA,
    FoldValueOutOfRange,
    ViewSpec,
    arrow_schema,
    materializer_lock,
    open_pane_log,
    open_view,
    plain_table,
    table_exists,
)
from sinks.upkeep import Compaction, Vacuum, compact_if_due, vacuum_if_due

RETRIES = 5


@dataclass(frozen=True)
class PieceFigures:
    """What folding one piece did (a piece folded elsewhere reports it)."""

    piece: int
    pane_rows: int
    changes: int
    metrics: Mapping[str, int]
    path: str = ""  # the reducer's (MaterializeResult.path); "" where not reported


class Spread(Protocol):
    """Folds pieces of a fold elsewhere: each with :meth:`Materializer.fold_piece` (``end``
    False), returning when all are committed."""

    min_pieces: int

    def fold(
        self,
        spec: ViewSpec,
        plan: FoldPlan,
        pieces: list[int],
        commits: Mapping[int, int | None],
        pane_log_version: int,
    ) -> list[PieceFigures]: ...


@dataclass
class MaterializeResult:
    """What one run folded, and how (``line()``: its one-line summary)."""

    folded_from: int | None  # first pane-log version folded (None: nothing to do)
    folded_to: int | None  # last pane-log version folded
    pane_rows: int = 0
    changes: int = 0
    view_version: int | None = None
    path: str = ""  # "python" | "vectorized" | "" (nothing)
    metrics: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    spread: bool = False  # its pieces were folded elsewhere (Spark's executors)
    then: MaterializeResult | None = None  # after finishing a stopped fold, the next one
    seconds: float = 0.0
    change_feed_from: int | None = None  # set when this run turned the view's change feed on
    compaction: Compaction | None = None  # the view's, after the fold (sinks.upkeep.compaction)
    vacuum: Vacuum | None = None  # the view's daily vacuum, after that (sinks.upkeep.auto_vacuum)
    pieces: int = 1  # the fold's pieces (sinks.fold.fold_plan), each one commit
    first_piece: int = 0  # the first this run folded (> 0: it finished a stopped fold)
    pieces_committed: int = 0

    def add(self, piece: PieceFigures) -> None:
        """Count a piece folded elsewhere."""
        self.pane_rows += piece.pane_rows
        self.changes += piece.changes
        self.pieces_committed += 1
        self.path = piece.path or self.path
        for name, value in piece.metrics.items():
            self.metrics[name] = self.metrics.get(name, 0) + value

    @property
    def did_work(self) -> bool:
        return self.folded_to is not None

    def line(self) -> str:
        text = self._folded_text()
        if self.then is not None:
            text += "\n" + self.then._folded_text()
        if self.change_feed_from is not None:
            text += (
                f"\nmaterialize: the view's change feed is on from view version "
                f"{self.change_feed_from} (the view was created without it; earlier versions "
                f"have no changes)"
            )
        if self.compaction is not None:
            text += f"\nmaterialize: {self.compaction.line()}"
        if self.vacuum is not None:
            text += f"\nmaterialize: {self.vacuum.line()}"
        return text

    def _folded_text(self) -> str:
        if not self.did_work:
            return "materialize: the current view is up to date"
        m = self.metrics
        return (
            f"materialize: folded pane-log versions {self.folded_from}..{self.folded_to} "
            f"({self.pane_rows} pane rows -> {self.changes} changes: "
            f"{m.get('num_target_rows_inserted', 0)} inserted, "
            f"{m.get('num_target_rows_updated', 0)} updated, "
            f"{m.get('num_target_rows_deleted', 0)} deleted) into view version "
            f"{self.view_version}{self._pieces_text()} in {self.seconds:.2f}s"
        )

    def _pieces_text(self) -> str:
        if self.pieces == 1:
            return ""
        where = " over Spark's executors" if self.spread else ""
        if self.first_piece:
            return (
                f" ({self.pieces - self.first_piece} of {self.pieces} pieces{where}: the rest "
                "of a fold that was stopped)"
            )
        return f" (in {self.pieces} pieces{where}, one commit each)"


class Materializer:
    """Folds the pane log of a pipeline into ``current``.

    ``vectorized``: None (default) uses the DuckDB reducer when it applies (non-merging window
    function); False forces the Python reducer. ``max_versions`` bounds how many pane-log
    versions one run folds (None: all). ``hook(point)`` is called at ``"before_merge"`` and
    ``"after_merge"``, and between the pieces of a fold in pieces at ``"after_piece"`` (where
    the pieces are folded in worker processes, ``"before_merge"`` is called before each piece's
    worker starts); tests simulate crashes there. ``spread``: folds the pieces of a fold
    in at least ``spread.min_pieces`` pieces elsewhere (Spark's executors:
    :mod:`jobs.driver.fold_spread`); the materializer then commits the fold's end.
    """

    def __init__(
        self,
        spec: ViewSpec,
        *,
        vectorized: bool | None = None,
        max_versions: int | None = None,
        hook: Callable[[str], None] | None = None,
        spread: Spread | None = None,
    ) -> None:
        self.spec = spec
        self.spread = spread
        self.vectorized = vectorized
        self.max_versions = max_versions
        self.hook = hook
        self._view: Any = None  # the view as the last fold left it

    def run(self, *, upto: int | None = None) -> MaterializeResult:
        t0 = time.perf_counter()
        with materializer_lock(self.spec):
            try:
                result = self._run_retried(upto)
            except Exception as e:
                if table_exists(self.spec, "panes"):  # not a lake that never ran
                    note_fold_failure(self.spec, e)
                raise
            clear_fold_failure(self.spec)
            result.seconds = time.perf_counter() - t0
            return result

    def _run_retried(self, upto: int | None) -> MaterializeResult:
        from deltalake.exceptions import CommitFailedError

        for attempt in range(RETRIES):
            try:
                result = self._run_once(upto)
                if result.first_piece and result.did_work:  # it finished a stopped fold:
                    more = self._run_once(upto)  # then the versions written since
                    result.then = more if more.did_work else None
            except CommitFailedError:
                if attempt == RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
                continue
            result.retries = attempt
            if result.did_work and self._view is not None:  # the view it has open
                result.compaction = compact_if_due("current", self._view)
            result.vacuum = vacuum_if_due(self.spec, "current")
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_once(self, upto: int | None) -> MaterializeResult:
        spec = self.spec
        remove_stale_scratch(spec)  # (what a killed fold in pieces spilled)
        panes = open_pane_log(spec)
        latest = panes.version()
        if upto is not None:
            latest = min(latest, upto)
        view = open_view(spec, arrow_schema(panes), create=True)
        feed_from = ensure_change_feed(view)
        done = view.transaction_version(spec.app_id)
        after = -1 if done is None else done
        resumed = fold_in_progress(view, spec.app_id, done)
        plan: FoldPlan | None
        todo: list[int] | None
        if resumed is not None:  # a fold in pieces was stopped: finish its plan
            plan, todo = resumed.plan, resumed.todo
            latest = plan.last
        else:
            if self.max_versions is not None:
                latest = min(latest, after + self.max_versions)
            if latest <= after:
                return MaterializeResult(None, None, change_feed_from=feed_from)
        # (a resumed fold reads the newest snapshot, as a fold behind does
        # (sinks.upkeep.auto_vacuum): its rows are picked by batch id, and the files of the snapshot
        # its plan was made on may be gone, the pane log compacted and vacuumed since)
        if latest != panes.version() and resumed is None:  # (not the run's shared snapshot)
            panes = open_pane_log(spec, latest)
        commits = pane_log_commits(panes, after, latest, spec.storage_options)
        python = self.vectorized is False or not vectorized_applies(
            spec, arrow_schema(panes).empty_table()
        )
        if resumed is None:
            # (one piece, or pieces for Spark's executors: planned here; else in a worker)
            plan = one_piece_plan(spec, panes, commits, spec.fold_memory, python=python)
            if plan is None and self.spread is not None:
                plan = plan_fold(spec, panes, commits, spec.fold_memory, python=python)
            todo = None if plan is None else list(range(plan.pieces))
        workers: PieceWorkers | None = None
        scratch, schema = "", b""
        result: MaterializeResult | None = None
        start = 0
        try:
            if plan is None or (plan.pieces > 1 and todo and not self._spreads(todo)):
                workers = PieceWorkers.shared()
                scratch = tempfile.mkdtemp(prefix=scratch_prefix(spec))
                text, schema = workers.run(
                    plan_and_spill,
                    spec,
                    panes.version(),
                    commits,
                    None if plan is None else plan.text(),
                    None if todo is None else set(todo),
                    python,
                    scratch,
                )
                if plan is None:
                    plan = FoldPlan.from_text(text)
                    todo = list(range(plan.pieces))
            assert todo is not None
            start = plan.pieces - len(todo)
            result = MaterializeResult(
                after + 1, latest, change_feed_from=feed_from, pieces=plan.pieces, first_piece=start
            )
            if plan.pieces == 1:
                self.fold_piece(view, read_pane_rows(panes, commits), plan, 0, result, end=True)
            elif workers is not None:
                self._fold_in_workers(workers, scratch, schema, view, plan, todo, result)
            elif todo:
                assert self.spread is not None
                for got in self.spread.fold(spec, plan, todo, commits, latest):
                    result.add(got)
                view.update_incremental()
                self.end_fold(view, plan, result)
                result.spread = True
            else:  # every piece was committed, the fold's end was not
                self.end_fold(view, plan, result)
        except FoldValueOutOfRange as e:
            assert result is not None and plan is not None
            # the pieces of this fold in the view: this run's, and a stopped fold's it finishes
            # (numbered from 1, as MaterializeResult.line says them)
            committed = start + result.pieces_committed
            if committed:
                stays = (
                    f"nothing of piece {committed + 1} of the {plan.pieces} of this fold of "
                    f"pane-log versions {plan.first}..{plan.last} was written: pieces "
                    f"1..{committed} are committed, the next fold starts at piece "
                    f"{committed + 1}"
                )
            elif done is not None:
                stays = f"nothing was written: the view stays folded up to pane-log version {after}"
            else:
                stays = "nothing was written: the view has folded nothing yet"
            raise FoldValueOutOfRange(
                f"{e}; {stays}, and every materialize stops at this window"
            ) from None
        finally:
            if workers is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        self._view = view
        result.view_version = view.version()
        if self.hook:
            self.hook("after_merge")
        return result

    def _spreads(self, todo: list[int]) -> bool:
        """Whether pieces ``todo`` are folded by :attr:`spread` (Spark's executors)."""
        return self.spread is not None and len(todo) >= self.spread.min_pieces

    def _fold_in_workers(
        self,
        workers: PieceWorkers,
        scratch: str,
        schema: bytes,
        view: Any,
        plan: FoldPlan,
        todo: list[int],
        result: MaterializeResult,
    ) -> None:
        """Fold pieces ``todo`` of ``plan`` (spilled into ``scratch``) one after the other, each
        in a fresh worker process (:mod:`sinks.fold.piece_workers`); the last commits the fold's
        end. (``hook``: ``"before_merge"`` before a piece's worker starts, ``"after_piece"``
        after its commit.)"""
        for piece in todo:
            end = piece == todo[-1]
            if self.hook:
                self.hook("before_merge")
            result.add(
                workers.run(
                    fold_piece_task,
                    self.spec,
                    self.vectorized,
                    scratch,
                    schema,
                    plan.text(),
                    piece,
                    end,
                )
            )
            if self.hook and not end:
                self.hook("after_piece")
        view.update_incremental()

    def fold_piece(
        self,
        view,
        rows: pa.Table,
        plan: FoldPlan,
        piece: int,
        result: MaterializeResult,
        *,
        end: bool,
    ) -> None:
        """Fold piece ``piece`` of ``plan`` (its pane rows: ``rows``) into ``view`` (loaded, up
        to date) in one commit, which carries, in a fold of several pieces, the plan, the
        piece's number and the piece's own transaction (:func:`sinks.fold.fold_plan.piece_app_id`);
        and, when it ends the fold (``end``), the fold's own transaction and metadata. Where the
        pieces are folded elsewhere (a Spark task), each piece is folded by this method there."""
        from deltalake import CommitProperties, Transaction

        spec = self.spec
        check_pane_rows(spec, rows, spec.table_path("panes"))
        metadata = {KIND_METADATA: "current", PIPELINE_METADATA: spec.name}
        transactions = []
        if plan.pieces > 1:
            metadata.update(piece_metadata(plan, piece))
            transactions.append(Transaction(piece_app_id(spec.app_id, piece), plan.last))
        if end:
            metadata.update(self._end_metadata(plan))
            transactions.append(Transaction(spec.app_id, plan.last))
        props = CommitProperties(app_transactions=transactions, custom_metadata=metadata)
        hash_range = plan.hash_range(piece) if plan.pieces > 1 else None
        result.pane_rows += rows.num_rows
        self._fold(view, arrow_schema(view), rows, props, result, hash_range)
        view.update_incremental()
        result.pieces_committed += 1
        if self.hook and not end:
            self.hook("after_piece")

    def _end_metadata(self, plan: FoldPlan) -> dict[str, str]:
        return {
            FOLDED_VERSION_METADATA: str(plan.last),
            FOLDED_FROM_METADATA: str(plan.first),
        }

    def end_fold(self, view, plan: FoldPlan, result: MaterializeResult) -> None:
        """Commit the end of a fold in pieces whose every piece is in ``view``: the fold's
        transaction and metadata, no rows (the change feed has no changes for it)."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        props = CommitProperties(
            app_transactions=[Transaction(self.spec.app_id, plan.last)],
            custom_metadata={
                KIND_METADATA: "current",
                PIPELINE_METADATA: self.spec.name,
                **self._end_metadata(plan),
            },
        )
        schema = arrow_schema(view)
        write_deltalake(view, schema.empty_table(), mode="append", commit_properties=props)
        view.update_incremental()

    def _fold(
        self,
        view,
        schema: pa.Schema,
        rows: pa.Table,
        props,
        result: MaterializeResult,
        hash_range: tuple[int, int | None] | None,
    ) -> None:
        """Reduce ``rows`` and MERGE the changes into ``view`` in one commit (``props``);
        :class:`FoldValueOutOfRange` where a window's value does not fit its view column.
        ``hash_range``: the key hashes of ``rows`` (a piece of a fold)."""
        from deltalake import write_deltalake
        from deltalake.exceptions import CommitFailedError, DeltaError

        spec = self.spec
        use_fast = self.vectorized is not False and vectorized_applies(spec, rows)
        reduced = reduce_vectorized(spec, rows) if use_fast and rows.num_rows else None
        if rows.num_rows == 0:
            changes, style = None, ""
        elif reduced is not None and fits_view(schema, reduced):
            changes = change_table(schema, reduced, spec.keys)
            style = "combine" if spec.mode is AccumulationMode.DISCARDING else "latest"
            result.path = "vectorized"
        else:  # (a sum of these panes beyond its column: the view's value may bring it back)
            changes = self._python_changes(view, schema, rows, hash_range)
            style = "replace"
            result.path = "python"
        del reduced
        if self.hook:
            self.hook("before_merge")
        if changes is None or changes.num_rows == 0:
            write_deltalake(view, schema.empty_table(), mode="append", commit_properties=props)
            return
        result.changes += changes.num_rows
        try:
            metrics = merge_changes(view, spec, changes, style, props, hash_range)
        except DeltaError as e:
            if style != "combine" or isinstance(e, CommitFailedError):
                raise
            # the MERGE refuses a sum its column cannot hold (sinks.fold.view_merge): the reference
            # reducer, exact, names the window
            self._python_changes(view, schema, rows, hash_range)
            raise
        for name, value in metrics.items():
            if isinstance(value, int):
                result.metrics[name] = result.metrics.get(name, 0) + value

    def _python_changes(
        self, view, schema: pa.Schema, rows: pa.Table, hash_range: tuple[int, int | None] | None
    ) -> pa.Table:
        spec = self.spec
        live = load_view_rows(view, spec, rows, hash_range)
        red = Reducer(spec, live)
        pane_rows = rows.to_pylist()
        pane_rows.sort(key=lambda r: r[PANE_LOG_VERSION])
        red.apply(pane_rows)
        upserts, deletes = red.changes()
        return rows_change_table(schema, upserts, deletes, spec.keys)


def load_view_rows(
    view, spec: ViewSpec, rows: pa.Table, hash_range: tuple[int, int | None] | None = None
) -> dict[tuple, dict[str, Any]]:
    """The view rows of the keys in ``rows``: {(key tuple, (start, end)): row}. The view is
    streamed in record batches (only the matching rows are kept); ``hash_range``: the key hashes
    of ``rows``, by which the view's files are skipped (a view without ``key_hash``: none is)."""
    if rows.num_rows == 0:
        return {}
    k0 = spec.keys[0]
    dataset = view.to_pyarrow_dataset()
    where = None
    if hash_range is not None and KEY_HASH in dataset.schema.names:
        low, high = hash_range
        where = pc.field(KEY_HASH) >= low
        if high is not None:
            where = where & (pc.field(KEY_HASH) < high)
    # (the key filter is applied in memory: delta-rs datasets read strings as string_view,
    # which pyarrow cannot compare with the parquet statistics)
    firsts = pc.unique(rows.column(k0))
    wanted = {tuple(r) for r in zip(*(rows.column(k).to_pylist() for k in spec.keys), strict=True)}
    out = {}
    for batch in dataset.to_batches(filter=where):
        if batch.num_rows == 0:
            continue
        table = plain_table(pa.Table.from_batches([batch]))
        table = table.filter(pc.is_in(table.column(k0), value_set=firsts))
        for r in table.to_pylist():
            key = tuple(r[k] for k in spec.keys)
            if key in wanted:
                out[(key, (r["window_start_us"], r["window_end_us"]))] = r
    return out


# -- the tasks of a fold's worker processes (sinks.fold.piece_workers) ----------------------------


def plan_and_spill(
    spec: ViewSpec,
    pane_log_version: int,
    commits: Mapping[int, int | None],
    plan_text: str | None,
    only: Container[int] | None,
    python: bool,
    scratch: str,
) -> tuple[str, bytes]:
    """(In a worker) the fold's plan (``plan_text``: a stopped fold's, else planned here) and,
    for a plan of several pieces, the backlog spilled into ``scratch`` (the pieces ``only``);
    returns the plan's text and the spill's schema (Arrow IPC bytes; empty for one piece)."""
    panes = open_pane_log(spec, pane_log_version)
    if plan_text is None:
        plan = plan_fold(spec, panes, commits, spec.fold_memory, python=python)
    else:
        plan = FoldPlan.from_text(plan_text)
    if plan.pieces == 1:
        return plan.text(), b""
    schema = spill(spec, panes, commits, plan, scratch, only=only)
    return plan.text(), schema.serialize().to_pybytes()


def fold_piece_task(
    spec: ViewSpec,
    vectorized: bool | None,
    scratch: str,
    schema: bytes,
    plan_text: str,
    piece: int,
    end: bool,
) -> PieceFigures:
    """(In a worker) fold piece ``piece`` of the plan from its spill in ``scratch`` into the
    view, in one commit (:meth:`sinks.fold.materializer.Materializer.fold_piece`); returns what it
    did (a :class:`sinks.fold.materializer.PieceFigures`)."""
    plan = FoldPlan.from_text(plan_text)
    rows = read_piece(scratch, piece, pa.ipc.read_schema(pa.py_buffer(schema)))
    result = MaterializeResult(plan.first, plan.last, pieces=plan.pieces)
    Materializer(spec, vectorized=vectorized).fold_piece(
        open_view(spec), rows, plan, piece, result, end=end
    )
    return PieceFigures(piece, result.pane_rows, result.changes, result.metrics, result.path)
