"""The filesystem side of a configuration, checked before Spark starts: the landing directory
can be read, the lake can be written and is named by a path every engine reads alike.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jobs.config.pipeline import Pipeline, PipelineConfigError, _has_scheme


def check_paths(pipeline: Pipeline) -> None:
    """The filesystem side of a configuration, before Spark starts: the landing directory exists
    and can be listed and read (or ``source.create_path`` says to create it), and the lake is a
    directory that is writable or can be created, named by a plain local path
    (:func:`check_lake_name`). A landing directory with a URI scheme (an object store) is left
    to the storage layer. Raises :class:`PipelineConfigError` naming the setting."""
    landing = Path(pipeline.source.path)
    if pipeline.source.is_landing and not _has_scheme(pipeline.source.path):
        if landing.exists() and not landing.is_dir():
            raise PipelineConfigError("source.path", f"{landing} is a file, not a directory")
        if landing.is_dir() and not os.access(landing, os.R_OK | os.X_OK):
            raise PipelineConfigError("source.path", f"{landing} cannot be read (permissions)")
        if not landing.exists() and not pipeline.source.create_path:
            raise PipelineConfigError(
                "source.path",
                f"{landing.absolute()} does not exist (a typo?). Create it, or set "
                "source.create_path = true to have runs create it empty",
            )
    check_lake_name(pipeline)
    lake = pipeline.lake_path
    if lake.exists() and not lake.is_dir():
        raise PipelineConfigError("lake", f"{lake} is a file, not a directory")
    existing = next(p for p in (lake, *lake.parents) if p.exists())
    if not existing.is_dir():
        raise PipelineConfigError("lake", f"{lake} cannot be created: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == lake else f"cannot be created in {existing}"
        raise PipelineConfigError("lake", f"{lake} {what} (permissions)")


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")
# Characters Spark, Hadoop or delta-rs read as part of a URI or a glob pattern, not of a name:
# a lake path holding one is read or written somewhere else than where it is.
_UNSAFE = re.compile(r"[%#?*\[\]{}\\^|:\x00-\x1f\x7f]")


def check_lake_name(pipeline: Pipeline) -> None:
    """Refuse a lake that is not a local directory path every engine reads alike: a URI (an
    object store: not supported yet) or a path with a character Spark, Hadoop or delta-rs take
    for URI or glob syntax (``%``, ``#``, ``?``, ``:``, ...). Raises :class:`PipelineConfigError`
    naming ``lake``."""
    if _URI.match(pipeline.lake):
        raise PipelineConfigError(
            "lake",
            f"{pipeline.lake} is a URI: object-store lakes are not supported yet; give a local "
            "directory (or a shared filesystem mounted as one)",
        )
    bad = _UNSAFE.search(str(pipeline.lake_path))
    if bad:
        raise PipelineConfigError(
            "lake",
            f"{str(pipeline.lake_path)!r} contains {bad.group()!r}, which Spark, Hadoop or "
            "delta-rs read as URI or glob syntax (they would use another directory): choose a "
            "lake path without any of % # ? * [ ] { } \\ ^ | : or control characters",
        )
