"""The fold's pieces over Spark's executors: a fold too large for one process, where a session is
at hand (the fold at the end of ``panestore run``, ``panestore materialize --master URL``).

:class:`SparkSpread` is the materializer's :class:`sinks.fold.materializer.Spread`. The pieces are
those of the fold's plan (:mod:`sinks.fold.fold_plan`: contiguous ranges of the key hash, each sized
to the fold's memory). Two Spark stages:

1. *read*: one task per group of the backlog's pane-log files reads them (file by file, one batch at
   a time, through the lake's own store: delta-rs, as the driver would) and gives each row its
   pane-log version, its place in the log's order and its piece; the rows of pieces already in the
   view are left out;
2. *fold*: Spark groups the rows by piece; one task a piece sorts them back into the log's order
   and folds them with :meth:`sinks.fold.materializer.Materializer.fold_piece`, the in-process
   fold's own method: against the view rows of its keys only, one MERGE commit naming its hash range
   and carrying the piece's own transaction. A task that finds its piece already in the view (a task
   Spark ran again after its commit) commits nothing; a commit that conflicts with another piece's
   (both rewrote one view file) is folded again on the newer view.

The driver then commits the fold's end (:meth:`~sinks.fold.materializer.Materializer.end_fold`).
Killed anywhere, the next fold finds the pieces in the view by their transactions and folds the
others.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sinks.fold import (
    SCAN_BATCH_ROWS,
    FoldPlan,
    Materializer,
    MaterializeResult,
    PieceFigures,
    piece_done,
)
from sinks.lake import (
    DERIVED_TIMESTAMPS,
    PANE_LOG_VERSION,
    ViewSpec,
    arrow_schema,
    open_pane_log,
    open_view,
    plain_schema,
    with_timestamps,
)

MIN_PIECES = 2
"""A fold in this many pieces or more goes over the executors (one piece: in-process, no Spark
job); docs/decisions.md, "The fold at any volume"."""


def spread_pays(spark: Any) -> bool:
    """Whether the fold at the end of a run goes over ``spark``'s executors: on a cluster, not on
    a local master (``local[N]``, ``local-cluster[...]``), whose executors share the driver's
    machine: there the in-process fold in pieces was 3x faster (3M pane rows, 4 pieces: 10.7 s
    against 32.4 s on ``local[2]``, docs/decisions.md, "The fold at any volume")."""
    return not str(spark.sparkContext.master).startswith("local")


FILES_PER_READ_TASK = 4
PIECE = "_piece"
ORDER = "_order"
"""A row's place in the log's order: its file's ordinal (high 32 bits), its row in the file."""
RETRIES = 5
FIGURES = "piece int, pane_rows long, changes long, metrics string"


@dataclass
class SparkSpread:
    """Folds a plan's pieces as Spark tasks (the module's doc)."""

    spark: Any
    min_pieces: int = MIN_PIECES

    def fold(
        self,
        spec: ViewSpec,
        plan: FoldPlan,
        pieces: list[int],
        commits: Mapping[int, int | None],
        pane_log_version: int,
    ) -> list[PieceFigures]:
        panes = open_pane_log(spec, pane_log_version)
        batches = {b: v for v, b in commits.items() if b is not None}
        files = backlog_files(panes, sorted(batches))
        if not files:
            return []
        schema = read_schema(panes)
        read = ReadTask(spec, pane_log_version, batches, plan, frozenset(pieces), schema)
        fold = FoldTask(spec, plan)
        from pyspark.sql.pandas.types import from_arrow_schema

        tasks = max(1, -(-len(files) // FILES_PER_READ_TASK))
        listing = self.spark.createDataFrame(files, "ordinal long, path string")
        rows = listing.repartition(tasks).mapInArrow(read, from_arrow_schema(schema))

        def fold_group(key: tuple, group: pa.Table) -> pa.Table:  # (PySpark reads the arity)
            return fold(key, group)

        done = rows.groupBy(PIECE).applyInArrow(fold_group, FIGURES).collect()
        return [
            PieceFigures(r.piece, r.pane_rows, r.changes, json.loads(r.metrics))
            for r in sorted(done, key=lambda r: r.piece)
        ]


def backlog_files(panes: Any, batches: list[int]) -> list[tuple[int, str]]:
    """(ordinal, path) of the pane-log files that may hold rows of ``batches``, in the order the
    in-process fold reads them."""
    import pyarrow.dataset as pds

    where = pds.field("batch_id").isin(pa.array(batches, pa.int64()))
    fragments = panes.to_pyarrow_dataset().get_fragments(filter=where)
    return [(i, f.path) for i, f in enumerate(fragments)]


def read_schema(panes: Any) -> pa.Schema:
    """The rows the read stage gives: the pane log's columns but the derived timestamps (the
    fold task sets them again), the pane-log version, the log order, the piece."""
    schema = plain_schema(arrow_schema(panes))
    fields = [f for f in schema if f.name not in DERIVED_TIMESTAMPS]
    fields += [
        pa.field(PANE_LOG_VERSION, pa.int64()),
        pa.field(ORDER, pa.int64()),
        pa.field(PIECE, pa.int32()),
    ]
    return pa.schema(fields)


@dataclass(frozen=True)
class ReadTask:
    """The read stage's function (``mapInArrow``): files -> pane rows of the plan's pieces."""

    spec: ViewSpec
    version: int
    batches: Mapping[int, int]  # batch id -> pane-log version
    plan: FoldPlan
    pieces: frozenset[int]
    schema: pa.Schema

    def __call__(self, listing: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.dataset as pds

        wanted: dict[str, int] = {}
        for part in listing:
            paths = part.column("path").to_pylist()
            wanted.update(zip(paths, part.column("ordinal").to_pylist(), strict=True))
        if not wanted:
            return
        panes = open_pane_log(self.spec, self.version)
        ids = pa.array(sorted(self.batches), pa.int64())
        versions = pa.array([self.batches[b] for b in ids.to_pylist()], pa.int64())
        where = pds.field("batch_id").isin(ids)
        for fragment in panes.to_pyarrow_dataset().get_fragments(filter=where):
            ordinal = wanted.get(fragment.path)
            if ordinal is None:
                continue
            seen = 0
            for batch in fragment.to_batches(
                filter=where, batch_size=SCAN_BATCH_ROWS, use_threads=False
            ):
                if batch.num_rows == 0:
                    continue
                table = pa.Table.from_batches([batch])
                order = (ordinal << 32) + seen + np.arange(table.num_rows, dtype=np.int64)
                seen += table.num_rows
                pieces = self.plan.pieces_of(table, self.spec.keys)
                keep = np.isin(pieces, np.fromiter(self.pieces, np.int32))
                version = pc.take(versions, pc.index_in(table.column("batch_id"), value_set=ids))
                table = table.append_column(PANE_LOG_VERSION, version)
                table = table.append_column(ORDER, pa.array(order))
                table = table.append_column(PIECE, pa.array(pieces, pa.int32()))
                table = table.filter(pa.array(keep)).select(self.schema.names).cast(self.schema)
                yield from table.to_batches()


@dataclass(frozen=True)
class FoldTask:
    """The fold stage's function (``applyInArrow``): one piece's rows -> the piece committed."""

    spec: ViewSpec
    plan: FoldPlan

    def __call__(self, key: tuple, rows: pa.Table) -> pa.Table:
        from deltalake.exceptions import CommitFailedError

        piece = int(key[0].as_py() if isinstance(key[0], pa.Scalar) else key[0])
        rows = rows.sort_by([(ORDER, "ascending")]).drop_columns([PIECE, ORDER])
        rows = with_timestamps(rows)
        mat = Materializer(self.spec)
        for attempt in range(RETRIES):
            view = open_view(self.spec)
            if piece_done(view, self.spec.app_id, self.plan, piece):
                return _figures(piece, 0, 0, {})
            result = MaterializeResult(self.plan.first, self.plan.last)
            try:
                mat.fold_piece(view, rows, self.plan, piece, result, end=False)
            except CommitFailedError:
                if attempt == RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
                continue
            return _figures(piece, result.pane_rows, result.changes, result.metrics)
        raise AssertionError("unreachable")  # pragma: no cover


def _figures(piece: int, pane_rows: int, changes: int, metrics: Mapping[str, Any]) -> pa.Table:
    return pa.table(
        {
            "piece": pa.array([piece], pa.int32()),
            "pane_rows": pa.array([pane_rows], pa.int64()),
            "changes": pa.array([changes], pa.int64()),
            "metrics": [json.dumps(dict(metrics))],
        }
    )


__all__ = ["MIN_PIECES", "SparkSpread", "spread_pays"]
