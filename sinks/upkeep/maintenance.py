"""Maintenance of a pipeline's tables: compaction and vacuum.

* :func:`optimize` compacts small files (one per micro-batch in the pane log, one per MERGE in
  the view) into larger ones. Runs and folds already compact a table whose small files pass a
  threshold (:mod:`sinks.upkeep.compaction`); ``optimize`` merges them all, up to a larger size.
  Compaction commits change no data: the materializer skips them, and every earlier version
  stays readable (time travel) until a vacuum removes its files.
* :func:`vacuum` deletes files no version inside the retention period needs, and files no
  commit ever referenced (written by an attempt that never committed: :mod:`sinks.lake.data_files`)
  once they are older than the retention (of the view, every such file but its change feed's).
  Runs and folds vacuum their tables once a day on their own (:mod:`sinks.upkeep.auto_vacuum`). The
  default retention is the table's ``delta.deletedFileRetentionDuration`` (Delta's default: 7 days),
  and a shorter one is refused unless ``force=True``: time travel to any version committed inside
  the retention period keeps working. ``dry_run`` lists what would go.

The view's change feed (:mod:`sinks.fold.change_feed`) across both: compaction commits change no
row, so they have no changes; the view's vacuum never deletes ``_change_data`` files (only the data
files of old versions), so changes stay readable as long as their log entries
(``delta.logRetentionDuration``). :func:`sinks.fold.view_rebuild.rebuild_view` makes a new view
table: its versions and its feed start again at 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sinks.lake import TABLES, LakeError, ViewSpec, existing_table, table_filesystem
from sinks.upkeep.compaction import compact

DEFAULT_RETENTION_HOURS = 168
CHANGE_DATA_FOLDER = "_change_data"
"""Where Delta keeps a table's change feed files (:mod:`sinks.fold.change_feed`)."""


@dataclass
class TableResult:
    table: str
    path: str
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str = ""

    def line(self) -> str:
        if self.skipped:
            return f"{self.table}: {self.skipped}"
        d = self.details
        if "numFilesAdded" in d:
            return (
                f"{self.table}: {d.get('numFilesRemoved', 0)} files compacted into "
                f"{d.get('numFilesAdded', 0)}"
            )
        if "files" in d:
            verb = "would delete" if d.get("dry_run") else "deleted"
            return f"{self.table}: {verb} {len(d['files'])} unreferenced files"
        return f"{self.table}: {d}"


def _tables(spec: ViewSpec, tables: tuple[str, ...] | None) -> Iterator[tuple[str, str, Any]]:
    """(name, path, DeltaTable or None when missing) of each of ``tables`` (default: all)."""
    for name in tables or TABLES:
        yield name, spec.table_path(name), existing_table(spec, name)


def optimize(
    spec: ViewSpec, tables: tuple[str, ...] | None = None, target_size: int | None = None
) -> list[TableResult]:
    """Compact small files of each table (the pane log and the view by default, late and
    rejected too) into files of about ``target_size`` bytes
    (:func:`sinks.upkeep.compaction.compact`; runs and folds compact on their own:
    :mod:`sinks.upkeep.compaction`)."""
    out = []
    for name, path, dt in _tables(spec, tables):
        if dt is None:
            out.append(TableResult(name, path, skipped="no table"))
            continue
        out.append(TableResult(name, path, compact(dt, target_size)))
    return out


def retention_hours_of(dt) -> int:
    text = (dt.metadata().configuration or {}).get("delta.deletedFileRetentionDuration")
    if not text:
        return DEFAULT_RETENTION_HOURS
    # "interval 7 days" / "interval 168 hours"
    parts = text.replace("interval", "").split()
    try:
        n = float(parts[0])
        unit = parts[1].rstrip("s").lower() if len(parts) > 1 else "hour"
    except (IndexError, ValueError):
        return DEFAULT_RETENTION_HOURS
    scale = {"week": 168, "day": 24, "hour": 1, "minute": 1 / 60, "second": 1 / 3600}
    return int(n * scale.get(unit, 1))


def vacuum(
    spec: ViewSpec,
    retention_hours: int | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    tables: tuple[str, ...] | None = None,
) -> list[TableResult]:
    """Delete unreferenced files older than the retention period (see the module doc)."""
    out = []
    for name, path, dt in _tables(spec, tables):
        if dt is None:
            out.append(TableResult(name, path, skipped="no table"))
            continue
        minimum = retention_hours_of(dt)
        hours = minimum if retention_hours is None else retention_hours
        if hours < minimum and not force:
            raise LakeError(
                f"vacuum of {name} with a retention of {hours}h would break time travel to "
                f"versions of the last {minimum}h (the table's retention); nothing was deleted. "
                f"Use --force to accept that."
            )
        files = dt.vacuum(
            retention_hours=hours,
            dry_run=dry_run,
            enforce_retention_duration=not force,
            # full: also the data files no commit ever referenced, which executors leave in the
            # pane log, late and rejected tables when an attempt dies (sinks.lake.data_files). Not
            # for the view: a full vacuum deletes the change feed's files (sinks.fold.change_feed).
            full=name != "current",
        )
        if name == "current":
            files += _untracked_view_files(dt, hours, set(files), dry_run=dry_run, force=force)
        out.append(
            TableResult(name, path, {"files": files, "dry_run": dry_run, "retention_hours": hours})
        )
    return out


def _untracked_view_files(
    dt: Any, hours: int, done: set[str], *, dry_run: bool, force: bool
) -> list[str]:
    """The view's data files its (not full) vacuum misses, deleted unless ``dry_run``: files no
    version inside the retention references whose removal a checkpoint no longer records
    (delta-rs's checkpoints keep only the removals inside the retention, and a vacuum that is not
    full deletes only recorded removals: without this, the view's replaced files stayed on disk
    for good once a checkpoint followed their expiry). Listed by delta-rs's full vacuum (dry
    run), without the change feed's files (``_change_data/``), which stay, and ``done`` (what
    the vacuum just deleted)."""
    listed = dt.vacuum(
        retention_hours=hours, dry_run=True, enforce_retention_duration=not force, full=True
    )
    stale = [p for p in listed if p not in done and not p.startswith(CHANGE_DATA_FOLDER + "/")]
    if not dry_run and stale:
        fs, root = table_filesystem(dt.table_uri)
        for p in stale:
            with contextlib.suppress(FileNotFoundError):  # gone already
                fs.delete_file(f"{root}/{p}")
    return stale
