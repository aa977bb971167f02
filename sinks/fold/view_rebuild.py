"""Rebuilding the view: ``current`` refolded from the whole pane log, put in the old one's place.

Used after a configuration change that only affects the view (``panestore rebuild-view``), and
for a view that cannot be folded on (``docs/operations.md``).
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow.fs as pafs

from sinks.fold.materializer import Materializer
from sinks.lake import ViewSpec, materializer_lock, table_filesystem


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
