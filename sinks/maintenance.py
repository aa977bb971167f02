"""Maintenance of a pipeline's tables: compaction and vacuum.

* :func:`optimize` compacts small files (one per micro-batch in the pane log, one per MERGE in
  the view) into larger ones. Runs and folds already compact a table whose small files pass a
  threshold (:mod:`sinks.compaction`); ``optimize`` merges them all, up to a larger size.
  Compaction commits change no data: the materializer skips them, and every earlier version
  stays readable (time travel) until a vacuum removes its files.
* :func:`vacuum` deletes files no version inside the retention period needs, and files no
  commit ever referenced (written by an attempt that never committed: :mod:`sinks.data_files`)
  once they are older than the retention. The default
  retention is the table's ``delta.deletedFileRetentionDuration`` (Delta's default: 7 days), and
  a shorter one is refused unless ``force=True``: time travel to any version committed inside the
  retention period keeps working. ``dry_run`` lists what would go.

The view's change feed (:mod:`sinks.change_feed`) across both: compaction commits change no row,
so they have no changes; delta-rs's vacuum never deletes ``_change_data`` files (only the data
files of old versions), so changes stay readable as long as their log entries
(``delta.logRetentionDuration``). :func:`rebuild_view` makes a new view table: its versions and
its feed start again at 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow.fs as pafs

from sinks.compaction import compact
from sinks.data_files import table_filesystem
from sinks.errors import LakeError
from sinks.lake_format import TABLES
from sinks.lock import materializer_lock
from sinks.materializer import Materializer
from sinks.spec import ViewSpec
from sinks.tables import existing_table

DEFAULT_RETENTION_HOURS = 168


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
    rejected too) into files of about ``target_size`` bytes (:func:`sinks.compaction.compact`;
    runs and folds compact on their own: :mod:`sinks.compaction`)."""
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
            # pane log, late and rejected tables when an attempt dies (sinks.data_files). Not for
            # the view: a full vacuum deletes the change feed's files (sinks.change_feed).
            full=name != "current",
        )
        out.append(
            TableResult(name, path, {"files": files, "dry_run": dry_run, "retention_hours": hours})
        )
    return out


def rebuild_view(spec: ViewSpec) -> str:
    """Replace ``current`` by the whole pane log refolded under the current configuration (after
    a change that only affects the view). Overwrites the view in one commit that also records the
    materializer's transaction. The new table's versions and change feed start at 0: followers
    of the old feed re-read the view in full.

    The new view is built beside the old one (``current.rebuild``) and then put in its place
    under the materializer's lock: by renaming folders on a local lake; on an object store,
    which renames nothing, by copying the new table's objects and deleting the old ones (a
    rebuild killed while copying leaves no whole view: rebuild again)."""
    path = spec.table_path("current")
    fs, root = table_filesystem(path)
    tmp = path + ".rebuild"
    _delete_folder(fs, root + ".rebuild")
    tables = dict(spec.tables or {})
    tables["current"] = tmp
    result = Materializer(replace(spec, tables=tables)).run()
    with materializer_lock(spec):
        _delete_folder(fs, root + ".old")
        if fs.get_file_info(root).type != pafs.FileType.NotFound:
            _move_folder(fs, root, root + ".old")
        _move_folder(fs, root + ".rebuild", root)
        _delete_folder(fs, root + ".old")
    return f"rebuilt {path}: " + result.line()


def _delete_folder(fs: pafs.FileSystem, folder: str) -> None:
    """Delete ``folder`` and everything in it, if it exists."""
    if fs.get_file_info(folder).type != pafs.FileType.NotFound:
        fs.delete_dir(folder)


def _move_folder(fs: pafs.FileSystem, source: str, target: str) -> None:
    """Move the folder ``source`` to ``target`` (absent): a rename on a local filesystem, a copy
    of every object then a delete of the source on an object store."""
    if isinstance(fs, pafs.LocalFileSystem):
        fs.move(source, target)
        return
    pafs.copy_files(source, target, source_filesystem=fs, destination_filesystem=fs)
    fs.delete_dir(source)
