"""Small files written whole or not at all: a run's own, beside its checkpoint (the lake's
identity, fingerprint, state layout, the writers' state, noted landing changes) and a saved
pipeline configuration."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a hidden temporary file, flushed to disk and renamed
    over it: a run killed at any moment leaves the old file (or none) or the whole new one.
    Creates the parent folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_lake_file(location: str, text: str) -> None:
    """Write ``text`` to a small file of a lake (a local path or an object store's URI), whole
    or not at all: a local file through :func:`write_atomically`, an object's put (whole or
    nothing by the store's own rule)."""
    from sinks.lake.data_files import table_filesystem
    from sinks.lake.object_store import is_object_store

    if not is_object_store(location):
        write_atomically(Path(location), text)
        return
    fs, path = table_filesystem(location)
    with fs.open_output_stream(path) as f:
        f.write(text.encode("utf-8"))


def read_lake_file(location: str) -> str | None:
    """The text of a small file of a lake; None when there is none (or it cannot be read). On an
    object store one GET (pyarrow's input stream asks for the object's size first)."""
    from sinks.lake.object_store import is_object_store

    if is_object_store(location):
        return _object_text(location)
    from sinks.lake.data_files import table_filesystem

    fs, path = table_filesystem(location)
    try:
        with fs.open_input_stream(path) as f:
            return bytes(f.read()).decode("utf-8")
    except (OSError, ValueError):  # missing (FileNotFoundError is one), or torn
        return None


def _object_text(location: str) -> str | None:
    import obstore
    from obstore.exceptions import BaseError

    from sinks.lake.object_store import store_at

    folder, _, name = location.rstrip("/").rpartition("/")
    try:
        return bytes(obstore.get(store_at(folder), name).bytes()).decode("utf-8")
    except (BaseError, OSError, ValueError):  # missing, unreadable, or torn
        return None


def remove_lake_file(location: str) -> None:
    """Delete a small file of a lake; nothing when there is none."""
    from sinks.lake.data_files import table_filesystem

    fs, path = table_filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(path)
