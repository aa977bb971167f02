"""Which files of a landing directory are input, and how to name them literally to Spark and DuckDB.

One rule for every reader of the landing directory (Spark's file source, ``panestore verify``,
the writers' watermark): every file at any depth below the landing directory is input, except
names that Spark's file listing treats as hidden (:func:`is_hidden`), at every level: a hidden
folder hides everything below it (e.g. the writers' marks in ``_watermarks/``).

Both Spark (Hadoop's ``globStatus``) and DuckDB read a path with pattern characters as a glob
pattern: a landing directory named ``land[1]`` would read the sibling ``land1/``. The functions
here escape a path so that each reader takes it literally.
"""

from __future__ import annotations

import os

HADOOP_GLOB_CHARS = "\\{}[]*?"
"""Characters Hadoop's glob patterns treat specially (Spark globs a path holding any of them)."""
DUCKDB_GLOB_CHARS = "[*?"
"""Characters that make DuckDB's file readers glob a path (``]`` is literal outside ``[...]``)."""


def is_hidden(name: str, *, folder: bool = False) -> bool:
    """Whether Spark's file listing skips a file (or with ``folder``, a folder and everything
    below it) of this name, at any depth.

    Spark skips names starting with ``.``, names starting with ``_`` unless they contain ``=``
    (a ``_key=value`` folder is a partition), and names ending in ``._COPYING_`` (a copy in
    progress of Hadoop's shell); it still lists the inside of folders named ``_metadata...`` and
    ``_common_metadata...`` (Parquet summary files), though not such files themselves.
    """
    if folder and name.startswith(("_metadata", "_common_metadata")):
        return False
    return (
        name.startswith(".")
        or (name.startswith("_") and "=" not in name)
        or name.endswith("._COPYING_")
    )


def landing_files(path: str) -> list[str]:
    """The input files below ``path`` (recursively, hidden names skipped at every level), sorted."""
    files = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not is_hidden(d, folder=True)]
        files += [os.path.join(folder, n) for n in names if not is_hidden(n)]
    return sorted(files)


def has_scheme(path: str) -> bool:
    """A URI with a scheme (``s3://...``): not a local path."""
    return "://" in path


def hadoop_literal(path: str) -> str:
    """``path`` escaped for Hadoop's glob patterns: Spark then reads exactly that path."""
    return "".join("\\" + c if c in HADOOP_GLOB_CHARS else c for c in path)


def spark_path(path: str) -> str:
    """The path to hand Spark for the file or directory ``path``: absolute when local (a relative
    ``a:b`` would be read as a URI scheme), escaped for Hadoop's globbing."""
    return hadoop_literal(path if has_scheme(path) else os.path.abspath(path))


def duckdb_literal(path: str) -> str:
    """``path`` escaped for DuckDB's file readers' globbing (each special character as a
    one-character class): DuckDB then reads exactly that file. Raises ValueError for a path
    DuckDB cannot name literally: one holding ``\\`` (a separator to DuckDB's globbing) and a
    special character."""
    if not any(c in DUCKDB_GLOB_CHARS for c in path):
        return path
    if "\\" in path:
        raise ValueError(f"DuckDB cannot read {path!r} literally (it holds '\\' and one of [ * ?)")
    return "".join(f"[{c}]" if c in DUCKDB_GLOB_CHARS else c for c in path)


def landing_path_problem(path: str) -> str | None:
    """Why Spark or ``panestore verify`` cannot read the landing directory ``path`` literally
    (None: they can).

    Hadoop reads a path with pattern characters component by component, and a component holding
    ``:`` is then parsed as a URI with a scheme and refused; DuckDB's globbing (``verify``) takes
    ``\\`` for a separator. Without pattern characters either is harmless; spaces, ``%``, ``#``
    and the pattern characters alone work (escaped).
    """
    local = path if has_scheme(path) else os.path.abspath(path)
    rest = local.split("://", 1)[1] if has_scheme(local) else local
    readers = ((":", HADOOP_GLOB_CHARS, "Spark"), ("\\", DUCKDB_GLOB_CHARS, "panestore verify"))
    for odd, specials, reader in readers:
        found = " ".join(sorted({c for c in rest if c in specials and c != odd}))
        if odd in rest and found:
            return (
                f"{path!r} holds {odd!r} and {found}: {reader} cannot read such a path "
                f"literally; rename the directory (or a parent) without the {odd!r}"
            )
    return None
