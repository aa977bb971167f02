"""A fold in pieces: how the materializer folds a backlog larger than its memory.

The fold's working memory is bounded by :attr:`sinks.lake.spec.ViewSpec.fold_memory` whatever the
number of pane rows to fold. A backlog whose estimate fits (:func:`backlog_of`, from the pane
log's file statistics, no data read) is folded in one piece, as it always was. A larger one is
split by key into *pieces*, contiguous ranges of the key hash (:mod:`sinks.lake.key_hash`):

1. :func:`plan_fold` counts the backlog's rows per fine bucket of the hash, reading only the key
   columns, and cuts the buckets into runs whose rows fit the memory (:class:`FoldPlan`).
2. :func:`spill` reads the backlog once, in record batches, and writes each row into its piece's
   file in a local scratch directory, in the pane log's order. The directory is deleted when the
   fold ends; one a killed fold left (the whole backlog) by the next fold of the view
   (:func:`remove_stale_scratch`).
3. The materializer folds each piece against the view rows of its keys only and commits it as
   one MERGE (the MERGE names the piece's hash range, so it reads only the view files of those
   keys).

Pieces hold disjoint keys: every pane of a key, of every version of the backlog, is in one piece,
so each piece folds exactly as the whole backlog would for its keys (any window function,
sessions included). Each piece's commit carries the plan and its number
(:func:`piece_metadata`); only the last carries the materializer's application transaction (the
last pane-log version folded). A fold killed between pieces leaves the view with some pieces
folded; the next fold finds the plan in the view's history (:func:`fold_in_progress`) and
folds the remaining pieces of the same plan, never a piece twice. The change feed records each
piece's changes in its own view version: applied in order, they give the view of the whole fold.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sinks.lake import (
    FINE_BUCKETS,
    FOLD_PIECE_METADATA,
    FOLD_PLAN_METADATA,
    FOLDED_VERSION_METADATA,
    PANE_LOG_VERSION,
    LakeError,
    ViewSpec,
    arrow_schema,
    commit_metadata,
    fine_bucket_start,
    fine_buckets,
    plain_schema,
)

DEFAULT_FOLD_MEMORY = 512 * 1024 * 1024
"""The fold's working memory unless configured (``fold_memory``): 512 MiB."""
ARROW_ROW_FACTOR = 4
"""A pane row's peak cost in a vectorized fold, in multiples of its Arrow width (the rows, their
reduction, the change table and the MERGE's copy): measured, docs/decisions.md."""
PYTHON_ROW_BYTES = 2_000
"""A pane row's cost in the reference reducer beyond its Arrow width (a Python dict per pane and
per view row): measured, docs/decisions.md."""
SCAN_BATCH_ROWS = 65_536
"""Rows per record batch when the backlog is streamed (counting, spilling)."""


@dataclass(frozen=True)
class Backlog:
    """The pane rows a fold has to read, estimated from the pane log's file statistics."""

    rows: int
    arrow_bytes: int  # their estimated width in memory

    @property
    def row_width(self) -> float:
        return self.arrow_bytes / self.rows if self.rows else 0.0


@dataclass(frozen=True)
class FoldPlan:
    """The pieces of a fold of pane-log versions ``first..last``: piece ``i`` holds the keys of
    fine buckets ``bounds[i] .. bounds[i + 1] - 1`` (:mod:`sinks.lake.key_hash`).

    >>> plan = FoldPlan(3, 9, (0, 512, 1024))
    >>> plan.pieces, plan.hash_range(1)
    (2, (0, None))
    >>> FoldPlan.from_text(plan.text()) == plan
    True
    """

    first: int
    last: int
    bounds: tuple[int, ...] = (0, FINE_BUCKETS)

    @property
    def pieces(self) -> int:
        return len(self.bounds) - 1

    def hash_range(self, piece: int) -> tuple[int, int | None]:
        """The key hashes of ``piece``: ``[low, high)``; ``high`` None for the last (to 2**63)."""
        low = fine_bucket_start(self.bounds[piece])
        end = self.bounds[piece + 1]
        return low, (None if end >= FINE_BUCKETS else fine_bucket_start(end))

    def pieces_of(self, table: pa.Table | pa.RecordBatch, keys: Sequence[str]) -> np.ndarray:
        """The piece of each row of ``table`` (int32), by its key columns ``keys``."""
        piece_of_fine = np.empty(FINE_BUCKETS, np.int32)
        for i in range(self.pieces):
            piece_of_fine[self.bounds[i] : self.bounds[i + 1]] = i
        return piece_of_fine[fine_buckets(table, keys)]

    def text(self) -> str:
        return json.dumps({"first": self.first, "last": self.last, "bounds": list(self.bounds)})

    @classmethod
    def from_text(cls, text: str) -> FoldPlan:
        data = json.loads(text)
        return cls(int(data["first"]), int(data["last"]), tuple(int(b) for b in data["bounds"]))


def piece_metadata(plan: FoldPlan, piece: int) -> dict[str, str]:
    """The commit metadata of piece ``piece`` of ``plan`` (every piece's commit of a fold in
    several pieces carries it; the last also the fold's own)."""
    return {FOLD_PLAN_METADATA: plan.text(), FOLD_PIECE_METADATA: str(piece)}


def piece_app_id(app_id: str, piece: int) -> str:
    """The application transaction a commit of piece ``piece`` carries (its version: the last
    pane-log version of its plan, which grows from fold to fold), beside the materializer's
    ``app_id``: a piece is done when the view's transaction of it is its plan's last version."""
    return f"{app_id}/piece-{piece}"


@dataclass(frozen=True)
class Progress:
    """A fold in pieces that committed some pieces (``done``) but not its end."""

    plan: FoldPlan
    done: frozenset[int]

    @property
    def todo(self) -> list[int]:
        return [i for i in range(self.plan.pieces) if i not in self.done]


def fold_in_progress(view: Any, app_id: str, done: int | None) -> Progress | None:
    """The fold in pieces the view holds some pieces of without its end, or None when the view's
    latest fold commit ended its fold.

    ``app_id``: the materializer's application transaction; ``done``: the last pane-log version
    the view's transaction of it says is folded. The plan is read from the view's history, from
    the newest commit back to its latest fold commit (commits of no fold, a compaction or a
    vacuum, are passed over); the pieces done, from their own transactions."""
    first = 0 if done is None else done + 1
    limit = 16
    while True:
        entries = view.history(limit=limit)
        for entry in entries:
            meta = commit_metadata(entry)
            if FOLDED_VERSION_METADATA in meta:
                return None
            if FOLD_PLAN_METADATA in meta:
                plan = FoldPlan.from_text(str(meta[FOLD_PLAN_METADATA]))
                if plan.first != first:
                    raise LakeError(
                        f"the current view holds piece {meta.get(FOLD_PIECE_METADATA)} of a fold "
                        f"of pane-log versions {plan.first}..{plan.last}, but its transaction "
                        f"says versions up to {done} are folded: the view was changed by "
                        "another writer; rebuild it (panestore materialize --rebuild)"
                    )
                pieces = range(plan.pieces)
                held = {i for i in pieces if piece_done(view, app_id, plan, i)}
                return Progress(plan, frozenset(held))
        if len(entries) < limit:
            return None
        limit *= 8


def piece_done(view: Any, app_id: str, plan: FoldPlan, piece: int) -> bool:
    """Whether the view (as loaded) holds piece ``piece`` of ``plan``."""
    return view.transaction_version(piece_app_id(app_id, piece)) == plan.last


# -- sizing ---------------------------------------------------------------------------------------


def backlog_of(panes: Any, commits: Mapping[int, int | None]) -> Backlog:
    """The rows of the pane-log commits ``commits`` ({version: batch id or None}) and their
    estimated Arrow width, from the statistics of the pane log's files (a file of a compacted
    pane log that also holds other batches counts whole)."""
    batches = [b for b in commits.values() if b is not None]
    if not batches:
        return Backlog(0, 0)
    actions = pa.table(panes.get_add_actions(flatten=True))
    names = actions.column_names
    rows = actions.column("num_records").to_numpy(zero_copy_only=False)
    size = actions.column("size_bytes").to_numpy(zero_copy_only=False)
    if "min.batch_id" in names and "max.batch_id" in names:
        low = actions.column("min.batch_id").to_numpy(zero_copy_only=False)
        high = actions.column("max.batch_id").to_numpy(zero_copy_only=False)
        wanted = (high >= min(batches)) & (low <= max(batches))
    else:  # no statistics: every file might hold them
        wanted = np.ones(len(rows), bool)
    n = int(rows[wanted].sum())
    # Parquet's compressed bytes understate Arrow's: 10x covers what pane rows measure (the
    # estimate only decides whether a backlog may not fit; plan_fold then samples the rows)
    return Backlog(n, int(size[wanted].sum()) * 10)


def row_cost(spec: ViewSpec, width: float, python: bool) -> float:
    """The estimated peak memory one pane row of ``width`` Arrow bytes costs a fold."""
    if python:
        return PYTHON_ROW_BYTES + ARROW_ROW_FACTOR * width
    return ARROW_ROW_FACTOR * max(width, 1.0)


def _batches(
    panes: Any, commits: Mapping[int, int | None], columns: list[str] | None
) -> Iterator[pa.RecordBatch]:
    """The pane rows of ``commits`` in record batches, one file after another, one batch at a
    time: a dataset scan reads ahead of a slower consumer without bound (measured: 336 MiB of
    Arrow buffers held over 6M rows even single-threaded, 96 MiB file by file)."""
    batches = sorted(b for b in commits.values() if b is not None)
    where = pc.field("batch_id").isin(pa.array(batches, pa.int64()))
    for fragment in panes.to_pyarrow_dataset().get_fragments(filter=where):
        yield from fragment.to_batches(
            columns=columns, filter=where, batch_size=SCAN_BATCH_ROWS, use_threads=False
        )


def one_piece_plan(
    spec: ViewSpec,
    panes: Any,
    commits: Mapping[int, int | None],
    budget: int,
    *,
    python: bool,
) -> FoldPlan | None:
    """The plan of one piece for a fold of ``commits`` whose backlog, estimated from the pane
    log's file statistics (nothing read), fits ``budget`` bytes; None when it may not (then
    :func:`plan_fold` reads the backlog to decide)."""
    versions = sorted(commits)
    backlog = backlog_of(panes, commits)
    if backlog.rows * row_cost(spec, backlog.row_width, python) <= budget:
        return FoldPlan(versions[0], versions[-1])
    return None


def plan_fold(
    spec: ViewSpec,
    panes: Any,
    commits: Mapping[int, int | None],
    budget: int,
    *,
    python: bool,
) -> FoldPlan:
    """The plan of a fold of ``commits``: one piece when the backlog's estimate fits ``budget``
    bytes, else runs of fine buckets whose rows fit it (counted by reading the key columns)."""
    versions = sorted(commits)
    first, last = versions[0], versions[-1]
    one = one_piece_plan(spec, panes, commits, budget, python=python)
    if one is not None:
        return one
    backlog = backlog_of(panes, commits)
    sample = next((b for b in _batches(panes, commits, None) if b.num_rows), None)
    width = sample.nbytes / sample.num_rows if sample is not None else 0.0
    cost = row_cost(spec, width, python)
    if backlog.rows * cost <= budget:
        return FoldPlan(first, last)
    counts = np.zeros(FINE_BUCKETS, np.int64)
    for batch in _batches(panes, commits, list(spec.keys)):
        if batch.num_rows == 0:
            continue
        counts += np.bincount(fine_buckets(batch, spec.keys), minlength=FINE_BUCKETS)
    per_piece = max(1, int(budget // cost))
    bounds = [0]
    held = 0
    for bucket, rows in enumerate(counts.tolist()):
        if held and held + rows > per_piece:
            bounds.append(bucket)
            held = 0
        held += rows
    bounds.append(FINE_BUCKETS)
    return FoldPlan(first, last, tuple(bounds))


# -- spilling -------------------------------------------------------------------------------------


SCRATCH_PREFIX = "panestore-fold-"


def scratch_prefix(spec: ViewSpec) -> str:
    """The name prefix of the scratch directories of folds into ``spec``'s view (in the
    system's temporary directory): named by the view's location, so the next fold of the view
    finds those a killed fold left."""
    digest = hashlib.sha256(spec.table_path("current").encode()).hexdigest()[:16]
    return f"{SCRATCH_PREFIX}{digest}-"


def remove_stale_scratch(spec: ViewSpec) -> None:
    """Delete the scratch directories earlier folds into ``spec``'s view left: a fold killed
    while spilling or folding leaves its spill, as large as its backlog, which no later fold
    would read (it spills again). Called under the materializer's lock: no other fold of the
    view on this machine is using one."""
    pattern = os.path.join(tempfile.gettempdir(), glob.escape(scratch_prefix(spec)) + "*")
    for stale in glob.glob(pattern):
        shutil.rmtree(stale, ignore_errors=True)


def piece_path(directory: str, piece: int) -> str:
    return os.path.join(directory, f"piece-{piece:05d}.arrow")


def spill(
    spec: ViewSpec,
    panes: Any,
    commits: Mapping[int, int | None],
    plan: FoldPlan,
    directory: str,
    *,
    only: Container[int] | None = None,
) -> pa.Schema:
    """Write the backlog's pane rows of the pieces of ``plan`` (``only``: of those) into one
    file per piece under ``directory`` (:func:`piece_path`), with their pane-log version in
    ``_version``, in the pane log's order; returns the files' schema. Reads the backlog once, in
    batches. The files are Arrow IPC, LZ4-compressed: Parquet's writer held ~70 bytes a row
    written until it closed (a memory that grew with the backlog), IPC's holds one batch."""
    batches = {b: v for v, b in commits.items() if b is not None}
    ids = pa.array(sorted(batches), pa.int64())
    versions = pa.array([batches[b] for b in ids.to_pylist()], pa.int64())
    schema = plain_schema(arrow_schema(panes))
    schema = schema.append(pa.field(PANE_LOG_VERSION, pa.int64()))
    writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    try:
        for batch in _batches(panes, commits, None):
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            version = pc.take(versions, pc.index_in(table.column("batch_id"), value_set=ids))
            table = table.append_column(PANE_LOG_VERSION, version).cast(schema)
            pieces = plan.pieces_of(table, spec.keys)
            order = np.argsort(pieces, kind="stable")  # (stable: the log's order within a piece)
            table = table.take(pa.array(order))
            pieces = pieces[order]
            cuts = np.flatnonzero(np.diff(pieces)) + 1
            for low, high in zip([0, *cuts.tolist()], [*cuts.tolist(), len(pieces)], strict=True):
                piece = int(pieces[low])
                if only is not None and piece not in only:
                    continue
                part = table.slice(low, high - low)
                writer = writers.get(piece)
                if writer is None:
                    writer = writers[piece] = pa.ipc.new_file(
                        piece_path(directory, piece), schema, options=options
                    )
                writer.write_table(part)
    finally:
        for writer in writers.values():
            writer.close()
    return schema


def read_piece(directory: str, piece: int, schema: pa.Schema) -> pa.Table:
    """The pane rows :func:`spill` wrote for ``piece`` (none: an empty table of ``schema``)."""
    path = piece_path(directory, piece)
    if not os.path.exists(path):
        return schema.empty_table()
    with pa.ipc.open_file(path) as reader:
        return reader.read_all()


__all__ = [
    "DEFAULT_FOLD_MEMORY",
    "Backlog",
    "FoldPlan",
    "Progress",
    "backlog_of",
    "fold_in_progress",
    "one_piece_plan",
    "piece_app_id",
    "piece_done",
    "piece_metadata",
    "plan_fold",
    "read_piece",
    "remove_stale_scratch",
    "scratch_prefix",
    "spill",
]
