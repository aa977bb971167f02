"""Delta data files written by whoever holds the rows, committed by whoever holds the log.

A batch's rows are written as Parquet files straight into the table's directory by the tasks
that computed them (:func:`write_data_files`, run on Spark executors), and the driver commits
only their *add actions* (path, size, statistics) in one Delta commit
(:func:`commit_data_files`). Until that commit a file is not part of the table: readers never
see it, and a file of an attempt that never committed stays unreferenced until a full
``vacuum`` (:func:`sinks.upkeep.maintenance.vacuum`) deletes it once it is older than the retention.

Invariants of a written file:

* its schema is the table's schema, column for column (timestamps as INT64 microseconds with
  the UTC zone, never INT96), Snappy-compressed;
* its name is unique per writing attempt (``<prefix>-<part>.parquet``, the caller's prefix
  names the batch, the attempt and the task attempt), so a crashed or retried attempt never
  overwrites a file another attempt may commit;
* its statistics (:func:`file_stats`, also kept in its footer) are Delta's ``numRecords``,
  ``nullCount``, ``minValues`` and ``maxValues`` of the top-level primitive columns, so
  delta-rs and DuckDB keep skipping files by them. Timestamp bounds are widened to
  milliseconds (Delta's precision); strings longer than :data:`MAX_STRING_STAT` characters
  and non-finite floats leave that column's bounds out (a missing bound only costs skipping).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sinks.lake.azure_store import azure_filesystem, is_azure
from sinks.lake.lake_format import MAX_TIMESTAMP_US

MAX_STRING_STAT = 64
"""Longest string (characters) whose value goes into a file's min/max statistics."""
ROW_GROUP_ROWS = 128 * 1024
STATS_KEY = "panestore.delta_stats"
"""Key of a file's Delta statistics in its Parquet key-value metadata."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class DataFile:
    """A written Parquet file of a table: its path relative to the table root, its size in
    bytes, its row count and its Delta statistics (JSON text)."""

    path: str
    size: int
    rows: int
    stats: str


def table_filesystem(table_uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of ``table_uri`` (a local path or a URI pyarrow knows, or a place on Azure
    storage: :func:`sinks.lake.azure_store.azure_filesystem`) and the table's root in it (for a
    local path, an absolute path: the same on every process of the machine)."""
    if is_azure(table_uri):
        return azure_filesystem(table_uri)
    if "://" in table_uri:
        fs, root = pafs.FileSystem.from_uri(table_uri)
        return fs, root.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(table_uri).rstrip("/")


def folder_names(uri: str) -> list[str]:
    """The names of the entries directly inside the folder at ``uri`` (a local path or a URI:
    on an object store, the keys and common prefixes under ``uri/``); none when it is missing."""
    fs, root = table_filesystem(uri)
    found = fs.get_file_info(pafs.FileSelector(root, recursive=False, allow_not_found=True))
    return [info.base_name for info in found]


def _timestamp_text(us: int, *, ceil: bool) -> str:
    ms = -(-us // 1000) if ceil else us // 1000
    moment = _EPOCH + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _bounds(column: pa.ChunkedArray) -> tuple[Any, Any] | None:
    """JSON-ready (min, max) of a primitive column, or None when it gets no bounds."""
    kind = column.type
    if not (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_timestamp(kind)
    ):
        return None
    if column.null_count == len(column):
        return None
    if pa.types.is_timestamp(kind):
        us = pc.min_max(column.cast(pa.int64()))
        if -(-us["max"].as_py() // 1000) > MAX_TIMESTAMP_US // 1000:
            return None  # its millisecond ceiling is not a timestamp
        return (
            _timestamp_text(us["min"].as_py(), ceil=False),
            _timestamp_text(us["max"].as_py(), ceil=True),
        )
    found = pc.min_max(column)
    low, high = found["min"].as_py(), found["max"].as_py()
    if pa.types.is_floating(kind) and not (math.isfinite(low) and math.isfinite(high)):
        return None
    if isinstance(low, str) and max(len(low), len(high)) > MAX_STRING_STAT:
        return None
    return low, high


def file_stats(table: pa.Table) -> str:
    """Delta statistics of ``table`` as written to one file (see the module doc)."""
    nulls: dict[str, int] = {}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_nested(column.type):
            continue
        nulls[name] = column.null_count
        bounds = _bounds(column)
        if bounds is not None:
            mins[name], maxs[name] = bounds
    stats = {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return json.dumps(stats, separators=(",", ":"))


def split_rows(rows: int, rows_per_file: int) -> list[tuple[int, int]]:
    """(offset, length) slices of ``rows`` rows into files of at most ``rows_per_file`` rows,
    of equal sizes (differing by at most one row)."""
    if rows <= 0:
        return []
    files = -(-rows // rows_per_file)
    base, extra = divmod(rows, files)
    out, at = [], 0
    for i in range(files):
        n = base + (1 if i < extra else 0)
        out.append((at, n))
        at += n
    return out


def write_data_file(
    table_uri: str,
    name: str,
    table: pa.Table,
    schema: pa.Schema,
    metadata: Mapping[str, str] | None = None,
) -> DataFile:
    """Write ``table`` (cast to ``schema``, the Delta table's) as one file ``name`` in the table
    directory at ``table_uri``. Its statistics (:data:`STATS_KEY`) and ``metadata`` go into the
    file's key-value metadata, so :func:`read_data_file` rebuilds the :class:`DataFile` from the
    file alone. Not a commit: see :func:`commit_data_files`."""
    table = table.select(schema.names).cast(schema)
    stats = file_stats(table)
    footer = {**(metadata or {}), STATS_KEY: stats}
    fs, root = table_filesystem(table_uri)
    pq.write_table(
        table.replace_schema_metadata({**(schema.metadata or {}), **footer}),
        f"{root}/{name}",
        filesystem=fs,
        compression="snappy",
        row_group_size=ROW_GROUP_ROWS,
        coerce_timestamps="us",
        use_deprecated_int96_timestamps=False,
    )
    size = fs.get_file_info(f"{root}/{name}").size
    return DataFile(name, size, table.num_rows, stats)


def read_data_file(table_uri: str, name: str) -> tuple[DataFile, dict[str, str]]:
    """The :class:`DataFile` of a file :func:`write_data_file` wrote, and the metadata it was
    given (read from the file's footer: a few kilobytes)."""
    fs, root = table_filesystem(table_uri)
    path = f"{root}/{name}"
    footer = pq.read_metadata(path, filesystem=fs)
    found = {
        k.decode(): v.decode()
        for k, v in (footer.metadata or {}).items()
        if not k.startswith(b"ARROW:")
    }
    stats = found.pop(STATS_KEY)
    return DataFile(name, fs.get_file_info(path).size, footer.num_rows, stats), found


def write_data_files(
    table_uri: str, table: pa.Table, schema: pa.Schema, prefix: str, rows_per_file: int
) -> list[DataFile]:
    """Write ``table`` into the table directory at ``table_uri`` as files of at most
    ``rows_per_file`` rows named ``<prefix>-<n>.parquet`` (:func:`write_data_file`); nothing for
    an empty table."""
    return [
        write_data_file(table_uri, f"{prefix}-{n:03d}.parquet", table.slice(offset, length), schema)
        for n, (offset, length) in enumerate(split_rows(table.num_rows, rows_per_file))
    ]


def commit_data_files(
    delta: Any,
    files: Sequence[DataFile],
    schema: pa.Schema,
    app_id: str,
    version: int,
    metadata: Mapping[str, str],
) -> None:
    """Add ``files`` to the Delta table ``delta`` (a ``deltalake.DeltaTable``, brought up to
    date by the caller) in one append commit carrying the application transaction
    (``app_id``, ``version``) and ``metadata`` in its ``commitInfo``; with no files, the commit
    records only the transaction. The caller checks the transaction first: delta-rs does not
    refuse a version it has already recorded."""
    from deltalake import CommitProperties, Transaction
    from deltalake.transaction import AddAction

    now_ms = int(time.time() * 1000)
    actions = [AddAction(f.path, f.size, {}, now_ms, True, f.stats) for f in files]
    props = CommitProperties(
        app_transactions=[Transaction(app_id, version)], custom_metadata=dict(metadata)
    )
    delta.create_write_transaction(actions, "append", schema, commit_properties=props)
