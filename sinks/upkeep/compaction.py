"""Automatic compaction: a table's small files merged once there are enough of them.

Every batch of a run commits a few small files to each of its tables (the pane log, ``late``,
``rejected``) and every fold a few to the view (``current``). Left alone, a pipeline run every
five minutes would hold tens of thousands of files after a month, and every read (a fold, a
query) would open each one. So each run, after its batches, and each fold, after its MERGE,
applies one rule to the tables it wrote (:func:`compact_if_due`):

    when a table has more than :data:`MAX_SMALL_FILES` files smaller than
    :data:`SMALL_FILE_BYTES` that could be merged (two or more in one partition), they are
    compacted into files of up to that size, in one Delta commit.

The figures are measured (``docs/decisions.md``, "Automatic compaction"): compacting costs a
few milliseconds plus a fraction of a millisecond per file, rewriting an already-compacted file
about 10 ms per MB; reading costs about half a millisecond more per small file. A file of
:data:`SMALL_FILE_BYTES` or more is never rewritten again by this rule, but in the view: there
the days (partitions) holding small files are rewritten whole, their rows sorted by the key hash,
so each file written holds a narrow range of it (:func:`clustered_by_key_hash`), the layout a fold
in pieces reads by (:mod:`sinks.fold.fold_plan`).

What a compaction keeps: it is one Delta commit (``OPTIMIZE``) that adds the merged files and
removes the small ones with ``dataChange = false``: the rows do not change; the table's
application transactions (the batch ids :class:`sinks.lake.delta_append.ExactlyOnceAppender` and the
materializer read back) are part of the table's state, not of the removed files, so a replayed
batch is still skipped; every earlier version stays readable until a vacuum deletes its files;
the fold skips the commit (:data:`sinks.lake.lake_format.NO_DATA_OPERATIONS`) and the view's change
feed has no changes for it. Killed before its commit, it leaves only files no version
references, which ``panestore vacuum`` deletes (its full vacuum of every table but the view; the
view's stay, unread).

What it costs when there is nothing to do: counting the small files in the snapshot the caller
has open (no listing of the table's folder, no read of any data file); a table of the lake the
run does not write through its sink (``runs``) is opened for it.

A compaction that fails does not fail what called it: :func:`compact_if_due` returns a
:class:`Compaction` with the error, which the run and the fold report as a warning line.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sinks.lake import TABLES, ViewSpec, existing_table, first_line

SMALL_FILE_BYTES = 8 * 1024 * 1024
"""A data file smaller than this (8 MiB) is small: compaction merges it with others, up to
this size. Also the most an automatic compaction rewrites of an already-merged file."""
MAX_SMALL_FILES = 16
"""A table compacts once more than this many of its small files can be merged."""
RETRIES = 3
"""Attempts of one compaction when a concurrent commit conflicts with it."""


@dataclass(frozen=True)
class Compaction:
    """What an automatic compaction of one table did: the small files it found, the files it
    removed and added and the version it committed; ``error``: why it failed (nothing
    committed)."""

    table: str
    small_files: int
    removed: int = 0
    added: int = 0
    version: int | None = None
    seconds: float = 0.0
    error: str = ""

    def line(self) -> str:
        """One line for a run's or a fold's report.

        >>> Compaction("panes", 17, 17, 1, 42, 0.031).line()
        'compacted panes: 17 small files into 1 (version 42, 0.03s)'
        >>> Compaction("late", 20, error="disk full").line()
        'WARNING compaction of late failed (disk full); nothing was lost: it runs again next time'
        """
        if self.error:
            return (
                f"WARNING compaction of {self.table} failed ({self.error}); nothing was lost: "
                "it runs again next time"
            )
        return (
            f"compacted {self.table}: {self.removed} small files into {self.added} "
            f"(version {self.version}, {self.seconds:.2f}s)"
        )


def mergeable_small_files(dt: Any, small_bytes: int = SMALL_FILE_BYTES) -> int:
    """How many data files of the snapshot ``dt`` (a ``deltalake.DeltaTable``, as loaded: not
    updated) are smaller than ``small_bytes`` and share their partition with another such file
    (what a compaction can merge). Reads the snapshot's file list only."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    if adds.num_rows == 0:
        return 0
    parts = [n for n in adds.column_names if n.startswith("partition.")]
    sizes = adds.column("size_bytes").to_pylist()
    if parts:
        keys = list(zip(*(adds.column(n).to_pylist() for n in parts), strict=True))
    else:
        keys = [()] * len(sizes)
    per_partition = Counter(k for k, size in zip(keys, sizes, strict=True) if size < small_bytes)
    return sum(n for n in per_partition.values() if n > 1)


def small_file_partitions(dt: Any, small_bytes: int = SMALL_FILE_BYTES) -> list[tuple] | None:
    """The partitions (tuples of their values, in the partition columns' order) holding two or
    more files smaller than ``small_bytes``; None when the table is not partitioned."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    parts = [n for n in adds.column_names if n.startswith("partition.")]
    if not parts:
        return None
    sizes = adds.column("size_bytes").to_pylist()
    keys = list(zip(*(adds.column(n).to_pylist() for n in parts), strict=True))
    small = Counter(k for k, size in zip(keys, sizes, strict=True) if size < small_bytes)
    return sorted((k for k, n in small.items() if n > 1), key=repr)


def clustered_by_key_hash(dt: Any, target_size: int | None) -> dict[str, Any]:
    """Rewrite the partitions of ``dt`` (the view) that hold small files, their rows sorted by
    ``key_hash`` (a Z-order on one column): each file written holds a narrow range of the key
    hash, so a fold in pieces skips the files outside its pieces' ranges (sinks.fold.fold_plan), as
    it skips those a fold in pieces writes. A partition of one day is rewritten whole."""
    from sinks.lake import KEY_HASH

    partitions = small_file_partitions(dt) or []
    days = [k[0] for k in partitions]
    filters = None
    if days and all(d is not None for d in days):
        filters = [("window_day", "in", [str(d) for d in days])]
    return dict(dt.optimize.z_order([KEY_HASH], partition_filters=filters, target_size=target_size))


def compact(dt: Any, target_size: int | None = None) -> dict[str, Any]:
    """Compact the small files of ``dt`` (a ``deltalake.DeltaTable``) into files of about
    ``target_size`` bytes (None: the table's ``delta.targetFileSize``, else delta-rs's 100 MB)
    in one commit; a commit that conflicts with a concurrent one (an append, a MERGE) is tried
    again on the newer version, up to :data:`RETRIES` times. The view (a table with a
    ``key_hash`` column) keeps its rows clustered by it (:func:`clustered_by_key_hash`).
    Returns delta-rs's metrics (no commit when nothing could be merged)."""
    from deltalake.exceptions import CommitFailedError

    from sinks.lake import KEY_HASH, arrow_schema

    clustered = KEY_HASH in arrow_schema(dt).names
    for attempt in range(RETRIES):
        try:
            if clustered:
                return clustered_by_key_hash(dt, target_size)
            return dict(dt.optimize.compact(target_size=target_size))
        except CommitFailedError:
            if attempt == RETRIES - 1:
                raise
            dt.update_incremental()
    raise AssertionError("unreachable")  # pragma: no cover


def compact_if_due(
    name: str,
    dt: Any,
    *,
    max_small: int | None = None,
    small_bytes: int | None = None,
) -> Compaction | None:
    """Apply the rule (module doc) to the table ``name`` whose snapshot ``dt`` the caller has
    open and up to date: None when it has ``max_small`` mergeable small files or fewer (nothing
    done); else compact them into files of up to ``small_bytes``. Never raises for a failed
    compaction: the returned :class:`Compaction` says why (nothing was committed). The
    defaults: :data:`MAX_SMALL_FILES`, :data:`SMALL_FILE_BYTES`."""
    max_small = MAX_SMALL_FILES if max_small is None else max_small
    small_bytes = SMALL_FILE_BYTES if small_bytes is None else small_bytes
    started = time.perf_counter()
    try:
        small = mergeable_small_files(dt, small_bytes)
    except Exception as e:  # deltalake's errors: an unreadable snapshot
        return Compaction(name, 0, error=first_line(e))
    if small <= max_small:
        return None
    try:
        metrics = compact(dt, target_size=small_bytes)
    except Exception as e:  # deltalake's errors, a full disk, ...: the caller goes on
        return Compaction(name, small, error=first_line(e))
    return Compaction(
        name,
        small,
        int(metrics.get("numFilesRemoved", 0)),
        int(metrics.get("numFilesAdded", 0)),
        dt.version(),
        time.perf_counter() - started,
    )


FOLDED_TABLES = ("current",)
"""The tables the fold writes (and compacts, under its lock); a run compacts every other table
of the lake (:data:`sinks.lake.lake_format.TABLES`)."""


def compact_after_run(spec: ViewSpec, written: Mapping[str, Any]) -> list[Compaction]:
    """After a run's batches committed, under its lock: :func:`compact_if_due` on each table of
    the lake the run writes (:data:`sinks.lake.lake_format.TABLES` but :data:`FOLDED_TABLES`).
    ``written``: {name: the ``deltalake.DeltaTable`` the run has open, up to date}; a table of
    the lake the run did not open is opened (skipped when it does not exist)."""
    out = []
    for name in TABLES:
        if name in FOLDED_TABLES:
            continue
        try:
            dt = written.get(name)
            if dt is None:
                dt = existing_table(spec, name)
                if dt is None:
                    continue
        except Exception as e:  # deltalake's errors: an unreadable log
            out.append(Compaction(name, 0, error=first_line(e)))
            continue
        done = compact_if_due(name, dt)
        if done is not None:
            out.append(done)
    return out
