"""Automatic vacuum: each table's unneeded files deleted at most once a day, by the run or the fold.

Compaction (:mod:`sinks.upkeep.compaction`) keeps the live files of a table few, but every file it
replaces stays on disk for the versions that still reference it (time travel). Left alone, a
pipeline run every five minutes holds twenty times its live bytes after a few months
(``docs/decisions.md``, "Automatic vacuum"). So each run, after its compaction and under its run
lock, and each fold, after its compaction and under the materializer's lock, applies one rule to
the tables it writes (:func:`vacuum_if_due`):

    when the table's last vacuum is more than :data:`VACUUM_EVERY_S` (24 h) ago, vacuum it
    exactly as ``panestore vacuum CONF`` without options does
    (:func:`sinks.upkeep.maintenance.vacuum`): retention = the table's
    ``delta.deletedFileRetentionDuration`` (7 days by default), never shorter; a full vacuum for
    every table but the view ``current`` (whose change feed it keeps).

Time travel to any version committed inside the retention keeps working, as with the command.

When the last vacuum was: a small JSON file per table, ``<lake>/_vacuum/<table>.json``, holding
the time of the table's last vacuum (any process holding the table's lock writes it: the run
for ``panes``, ``late``, ``rejected``, ``runs``; the fold for ``current``). Reading it is the whole
cost of a run or a fold when nothing is due (one small file: no listing, no read of the table's
log). A table without the file starts its clock: its first vacuum is a day later (a new lake
has nothing old to delete; an old lake upgraded gets its first vacuum a day after its first run).
``panestore vacuum`` does not write it (it vacuums whenever asked).

What a fold behind needs is never deleted: the fold reads the pane log's newest snapshot (live
files, which no vacuum deletes) and the log entries of the versions it has not folded (which a
vacuum does not delete either: only ``delta.logRetentionDuration``, 30 days, bounds them); a run
never deletes the in-flight files of another attempt younger than the retention.

A vacuum that fails does not fail what called it: :func:`vacuum_if_due` returns a
:class:`Vacuum` with the error (reported as a warning line) and leaves the clock as it was, so
the next run or fold tries again.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass

from sinks.lake import (
    TABLES,
    ViewSpec,
    first_line,
    join_location,
    read_lake_file,
    table_exists,
    write_lake_file,
)

VACUUM_EVERY_S = 24 * 3600
"""A table is vacuumed once its last vacuum is more than this long ago (a day)."""
STATE_FOLDER = "_vacuum"
"""The lake's folder of last-vacuum times, one ``<table>.json`` each (not a table: no
``_delta_log``)."""
clock = time.time
"""The time now, seconds since the epoch (tests replace it by a fake clock)."""
FOLDED_TABLES = ("current",)
"""The tables the fold vacuums (under its lock); a run vacuums every other table of the lake."""


@dataclass(frozen=True)
class Vacuum:
    """What an automatic vacuum of one table did: the files it deleted, the retention it kept
    (hours); ``error``: why it failed (the clock is not reset)."""

    table: str
    deleted: int = 0
    retention_hours: int = 0
    seconds: float = 0.0
    error: str = ""

    def line(self) -> str:
        """One line for a run's or a fold's report.

        >>> Vacuum("panes", 120, 168, 0.42).line()
        'vacuumed panes: 120 unneeded files deleted (retention 168h, 0.42s)'
        >>> Vacuum("late", error="disk full").line()
        'WARNING vacuum of late failed (disk full); nothing was lost: it runs again next time'
        """
        if self.error:
            return (
                f"WARNING vacuum of {self.table} failed ({self.error}); nothing was lost: "
                "it runs again next time"
            )
        return (
            f"vacuumed {self.table}: {self.deleted} unneeded files deleted "
            f"(retention {self.retention_hours}h, {self.seconds:.2f}s)"
        )


def _state_location(spec: ViewSpec, table: str) -> str:
    return join_location(join_location(spec.lake, STATE_FOLDER), f"{table}.json")


def last_vacuum(spec: ViewSpec, table: str) -> float | None:
    """When ``table`` of ``spec``'s lake was last vacuumed automatically (or its clock started):
    seconds since the epoch; None when the lake holds no such time (or an unreadable one)."""
    text = read_lake_file(_state_location(spec, table))
    if text is None:
        return None
    try:
        return float(dt.datetime.fromisoformat(json.loads(text)["vacuumed_at"]).timestamp())
    except (ValueError, KeyError, TypeError):  # a torn or foreign file: start again
        return None


def _set_last_vacuum(spec: ViewSpec, table: str, when: float) -> None:
    stamp = dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat(timespec="seconds")
    text = json.dumps({"table": table, "vacuumed_at": stamp}) + "\n"
    write_lake_file(_state_location(spec, table), text)


def vacuum_if_due(
    spec: ViewSpec, table: str, *, now: float | None = None, every_s: float | None = None
) -> Vacuum | None:
    """Apply the rule (module doc) to ``table`` of ``spec``'s lake, whose lock the caller holds:
    None when the table does not exist, when its clock starts (no last vacuum known) or when
    its last vacuum is ``every_s`` (default :data:`VACUUM_EVERY_S`) or less before ``now``
    (seconds since the epoch; default: :data:`clock`); else vacuum it
    (:func:`sinks.upkeep.maintenance.vacuum`) and set its last vacuum to ``now``. Never raises for a
    failed vacuum: the returned :class:`Vacuum` says why (its clock is left as it was)."""
    from sinks.upkeep.maintenance import vacuum

    now = clock() if now is None else now
    every_s = VACUUM_EVERY_S if every_s is None else every_s
    started = time.perf_counter()
    try:
        last = last_vacuum(spec, table)
        if last is None:
            if table_exists(spec, table):
                _set_last_vacuum(spec, table, now)  # the clock starts: nothing is old yet
            return None
        if now - last <= every_s:
            return None
        (done,) = vacuum(spec, tables=(table,))
        if done.skipped:  # the table is gone (a view being rebuilt): nothing to do
            return None
        _set_last_vacuum(spec, table, now)
    except Exception as e:  # deltalake's errors, a full disk, ...: the caller goes on
        return Vacuum(table, error=first_line(e))
    return Vacuum(
        table,
        len(done.details.get("files", ())),
        int(done.details.get("retention_hours", 0)),
        time.perf_counter() - started,
    )


def vacuum_after_run(spec: ViewSpec, *, now: float | None = None) -> list[Vacuum]:
    """After a run's batches and its compaction, under its lock: :func:`vacuum_if_due` on each
    table of the lake the run writes (:data:`sinks.lake.lake_format.TABLES` but
    :data:`FOLDED_TABLES`); the vacuums done or failed."""
    out = []
    for name in TABLES:
        if name in FOLDED_TABLES:
            continue
        done = vacuum_if_due(spec, name, now=now)
        if done is not None:
            out.append(done)
    return out
