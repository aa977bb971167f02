"""Each table opened once per run: the snapshots a run shares.

Opening a Delta table reads its log: on an object store a request for ``_last_checkpoint``, a
LIST of ``_delta_log/``, a few ranged GETs of the checkpoint and a GET per commit after it. A
scheduled run opens each of its five tables many times (the checks before Spark, each batch's
appends, the run's record, the fold, the upkeep): measured on a small run in a bucket, 60-80
openings, 360-800 requests a run (docs/decisions.md, "Fewer round trips to a store").

Inside :func:`shared_snapshots` (a run enters it, :func:`jobs.driver.runs.run`, and so does
``panestore materialize``) the first opening of a table at its newest version is kept, and every
later one is the same ``deltalake.DeltaTable`` brought up to date with ``update_incremental``
(``_last_checkpoint``, a LIST of the log, the commits after the snapshot's version); whether a
kept table exists needs no request. A run's appenders (:mod:`sinks.lake.delta_append`) do not
bring their kept table up to date at each use: under the run lock their commits are its only
ones, and each moves the snapshot. A table opened at a given version (time travel, a fold's
pinned pane-log version) is never shared. Outside the scope (other commands, tests, Spark's
executors, the fold's worker processes) every opening reads the log.

A table's application transactions (the batch a pipeline last committed, the fold a view last
took in) are read once per table version inside the scope (:func:`transaction_version`):
delta-rs 1.6.6 answers each ``transaction_version`` by reading every commit since the last Delta
checkpoint again, and a run asked each of its tables three times a batch.

Tables do not disappear within a run (a view is rebuilt by ``panestore rebuild-view``, which
runs alone under the materializer's lock), so a kept table is never stale beyond what
``update_incremental`` brings; callers that keep a table object see it move to newer versions
when another caller updates it, as they would after their own writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_guard = threading.Lock()
_tables: dict[tuple[str, tuple[tuple[str, str], ...]], Any] | None = None
"""The scope's tables by (path, storage options); None outside a scope."""
_transactions: dict[tuple[str, int, str], int | None] = {}
"""The scope's transaction versions read, by (table URI, table version, application id)."""


def _key(path: str, storage_options: Mapping[str, str] | None) -> tuple:
    return path.rstrip("/"), tuple(sorted((storage_options or {}).items()))


@contextmanager
def shared_snapshots() -> Iterator[None]:
    """Share each table's snapshot among the openings inside the block (see the module doc).
    Re-entrant: an inner block shares the outer one's tables."""
    global _tables
    with _guard:
        outer = _tables is not None
        if not outer:
            _tables = {}
    try:
        yield
    finally:
        if not outer:
            with _guard:
                _tables = None
                _transactions.clear()


def kept(path: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether the scope keeps the table at ``path`` (so it exists: no request needed)."""
    with _guard:
        return _tables is not None and _key(path, storage_options) in _tables


def held(path: str, storage_options: Mapping[str, str] | None = None) -> Any | None:
    """The scope's table at ``path`` as it is (no request), or None (outside a scope, or not
    opened in it yet): for a writer whose commits are the table's only ones since the scope
    opened it (a run's appenders: the scope is entered under the run lock)."""
    with _guard:
        return None if _tables is None else _tables.get(_key(path, storage_options))


def latest(path: str, storage_options: Mapping[str, str] | None = None) -> Any | None:
    """The scope's table at ``path`` brought up to its newest version, or None (outside a scope,
    or not opened in it yet)."""
    table = held(path, storage_options)
    if table is not None:
        table.update_incremental()
    return table


def keep(path: str, storage_options: Mapping[str, str] | None, table: Any) -> Any:
    """Keep ``table`` (opened at its newest version) for the scope's later openings of
    ``path``; ``table`` either way."""
    with _guard:
        if _tables is not None:
            _tables.setdefault(_key(path, storage_options), table)
    return table


def open_latest(path: str, storage_options: Mapping[str, str] | None = None) -> Any:
    """The ``deltalake.DeltaTable`` at ``path`` at its newest version: the scope's, or opened
    (and kept when a scope is active)."""
    from deltalake import DeltaTable

    table = latest(path, storage_options)
    if table is None:
        opts = dict(storage_options) if storage_options else None
        table = keep(path, storage_options, DeltaTable(path, storage_options=opts))
    return table


def transaction_version(table: Any, app_id: str) -> int | None:
    """``table.transaction_version(app_id)`` (a ``deltalake.DeltaTable``): the version of the
    application transaction ``app_id`` last committed, or None. Inside a scope read once per
    table version (a version's transactions are fixed by the commits up to it), outside one read
    each time."""
    key = (table.table_uri, table.version(), app_id)
    with _guard:
        if _tables is not None and key in _transactions:
            return _transactions[key]
    found = table.transaction_version(app_id)
    with _guard:
        if _tables is not None:
            _transactions[key] = found
    return found
