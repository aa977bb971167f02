"""Any Delta table read as an append-only stream, version by version, without Spark.

A pipeline's source can be any Delta table (``[source] format = "delta"``), read the way Spark's
Delta streaming source reads one, but with pyarrow alone. Its offsets are the table's versions:
a micro-batch reads the rows that the commits of versions ``after < v <= upto`` added. The
table's newest offset is :func:`jobs.checkpoint.offsets.head_at` (any Delta table: its
id and newest version), and :func:`version_at` turns a starting timestamp into a first version.

Reading a range is two steps, so a Spark data source can plan on the driver and read on its
workers: :func:`plan_range` reads the range's commits from the table's log
(``_delta_log/<version>.json``, one JSON action a line) and returns the data files they added,
as :class:`SourceFile` (picklable); :func:`read_files` reads the rows of some of them. Planning
reads immutable commits, so a replayed batch plans (and reads) the same files in the same order.

What a commit contributes:

* its ``add`` actions with ``dataChange = true``, in the order the commit lists them: appends,
  and the rows an insert-only MERGE adds;
* nothing when it changes no data: compaction and Z-ordering (``dataChange = false``), metadata,
  protocol, properties, vacuum;
* a commit that deletes or updates rows (a ``remove`` with ``dataChange = true``: DELETE,
  UPDATE, MERGE, overwrite, RESTORE; an ``add`` with a deletion vector; ``cdc`` files) cannot be
  followed by an append-only source: it stops the run (:class:`SourceTableError`, naming the
  version and its operation) unless :data:`SKIP_CHANGE_COMMITS_OPTION` is set, which skips the
  whole commit, its added rows included (as Spark's ``skipChangeCommits``).

What stops the run, each with a one-line :class:`SourceTableError`: a version no longer in the
log (cleaned up after a checkpoint), a data file vacuumed before it was read, a table that
needs what this reader cannot do (column mapping, reader features it does not know), and
another table at the URI than the one whose versions the offsets count
(:class:`SourceTableChanged`: the table was deleted and created anew).

Rows come out with exactly the requested columns and Arrow types: a column a data file lacks
(added later by schema evolution) is null, partition columns come from the commit's partition
values, and timestamps are ``timestamp[us, tz=UTC]`` (``timestamp_ntz`` read as UTC wall time;
INT96 and nanosecond Parquet timestamps converted, rounded down to the microsecond).

Files are read through a pyarrow filesystem (:func:`sinks.lake.data_files.table_filesystem`): a
local path, or a URI pyarrow knows.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from jobs.checkpoint.offsets import table_head
from sinks.lake import (
    KNOWN,
    SourceTableChanged,
    SourceTableError,
    column_type,
    first_line,
    table_filesystem,
)

SKIP_CHANGE_COMMITS_OPTION = "source.skip_change_commits"
"""The option that skips commits that delete or update rows (whole, their added rows too)."""
STARTING_VERSION_OPTION = "source.starting_version"
"""The option naming the first version a pipeline reads."""

COLUMN_MAPPING_PROPERTY = "delta.columnMapping.mode"
READABLE_FEATURES = frozenset(
    {
        "timestampNtz",
        "typeWidening",  # old files hold narrower types: read columns are cast
        "typeWidening-preview",
        "v2Checkpoint",  # commits are read from their JSON files, never from checkpoints
        "vacuumProtocolCheck",
        "variantType",  # variant columns are of no type panestore reads; the others are fine
        "variantType-preview",
        "columnMapping",  # refused unless its mode is none (COLUMN_MAPPING_PROPERTY)
        "deletionVectors",  # a commit with one is a change commit (see the module doc)
    }
)
"""The Delta reader features a table may have and still be read here."""

_CONFIG_TYPE_OF_DELTA = {
    "string": "string",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "date": "date",
}
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_READ_THREADS = 8
_CHANGES = (
    ("dv", "it marks rows deleted with deletion vectors"),
    ("remove", "it removes data files"),
    ("cdc", "it records row changes in cdc files"),
)


@dataclass(frozen=True)
class SourceFile:
    """A data file a commit of the source table added: the commit's ``version``, the file's
    ``path`` in the table's filesystem (for a local table, its absolute path), its partition
    values (column, Delta's text of the value or None), as the commit lists them, and its size
    in bytes."""

    version: int
    path: str
    partition_values: tuple[tuple[str, str | None], ...]
    size: int


@dataclass(frozen=True)
class SourceTableSchema:
    """The current columns of the source table at ``uri``: ``columns`` (name, configuration
    type) of those whose type panestore reads, ``unsupported`` (name, Delta type text such as
    ``decimal(10,2)``) of the others, both in the table's order; ``partition_columns``."""

    uri: str
    columns: tuple[tuple[str, str], ...]
    unsupported: tuple[tuple[str, str], ...]
    partition_columns: tuple[str, ...]

    def column_error(self, name: str) -> str | None:
        """Why column ``name`` cannot be read from the table (one line), or None if it can."""
        if any(n == name for n, _ in self.columns):
            return None
        delta_type = dict(self.unsupported).get(name)
        if delta_type is not None:
            return (
                f"column {name} of the Delta table at {self.uri} is {delta_type}, not a type "
                f"panestore reads ({KNOWN})"
            )
        names = [n for n, _ in self.columns + self.unsupported]
        return f"the Delta table at {self.uri} has no column {name} (its columns: {names})"


def source_table_columns(uri: str) -> SourceTableSchema:
    """The columns of the Delta table at ``uri`` now (see :class:`SourceTableSchema`). Refuses
    (:class:`SourceTableError`) a missing table and one this reader cannot read."""
    dt = _load(uri)
    _check_readable(uri, dt.version(), _reader_features(dt), dt.metadata().configuration)
    columns, unsupported = [], []
    for field in dt.schema().fields:
        text = _delta_type_text(field.type)
        config_type = _CONFIG_TYPE_OF_DELTA.get(text)
        if config_type is None and text.startswith("decimal("):
            config_type = column_type(text).name
        if config_type is None:
            unsupported.append((field.name, text))
        else:
            columns.append((field.name, config_type))
    return SourceTableSchema(
        uri, tuple(columns), tuple(unsupported), tuple(dt.metadata().partition_columns)
    )


def version_at(uri: str, timestamp_ms: int) -> int:
    """The first version of the table committed at or after ``timestamp_ms`` (ms since the
    epoch): where a pipeline with a starting timestamp starts. A timestamp after the newest
    commit gives the newest version + 1 (nothing old is read); one before the oldest commit
    still in the log gives that commit's version.

    A commit's time is its ``commitInfo`` in-commit timestamp, else its ``timestamp`` (what
    ``DESCRIBE HISTORY`` of delta-rs shows), else its log file's modification time; commit
    times are taken to grow with versions (a binary search over the log)."""
    dt = _load(uri)
    newest = dt.version()
    fs, root = table_filesystem(uri)
    versions = [v for v in _logged_versions(fs, root) if v <= newest]
    low, high = 0, len(versions)
    while low < high:
        middle = (low + high) // 2
        if _commit_time_ms(fs, root, versions[middle]) >= timestamp_ms:
            high = middle
        else:
            low = middle + 1
    return versions[low] if low < len(versions) else newest + 1


def plan_range(
    uri: str,
    after: int,
    upto: int,
    *,
    table: str | None = None,
    skip_change_commits: bool = False,
) -> tuple[SourceFile, ...]:
    """The data files the commits of versions ``after < v <= upto`` of the Delta table at
    ``uri`` added, version by version, each commit's in its order (see the module doc for what
    a commit contributes and what stops the run).

    ``table``: the table id (``metaData.id``, as
    :class:`jobs.checkpoint.offsets.TableOffset.table`) the versions belong to; another
    table at ``uri`` raises :class:`SourceTableChanged`. ``skip_change_commits``: skip the commits
    that delete or update rows instead of stopping."""
    if after < -1:
        raise ValueError(f"after must be -1 or a version, not {after}")
    if upto <= after:
        return ()
    dt = _load(uri, table)
    head = table_head(dt)
    if table is not None and head.table != table:
        raise SourceTableChanged(
            f"the Delta table at {uri} is table {head.table} now, not table {table} whose "
            f"versions {after + 1}..{upto} this batch reads: it was deleted and created anew; "
            f"start the pipeline again with a new checkpoint to read the new table"
        )
    if upto > head.version:
        raise SourceTableError(
            f"version {upto} of the Delta table at {uri} does not exist (its newest is "
            f"{head.version}): the table went back to an older state; start the pipeline "
            f"again with a new checkpoint"
        )
    _check_readable(uri, head.version, _reader_features(dt), dt.metadata().configuration)
    fs, root = table_filesystem(uri)
    files: list[SourceFile] = []
    for version in range(after + 1, upto + 1):
        actions = _read_commit(fs, root, version)
        if actions is None:
            oldest = min(_logged_versions(fs, root), default=head.version)
            raise SourceTableError(
                f"version {version} of the Delta table at {uri} is no longer in the table's "
                f"log (cleaned up after a checkpoint; the oldest there is {oldest}), so its rows "
                f"cannot be read: set {STARTING_VERSION_OPTION} to a later version ({oldest} or "
                f"later) and start the pipeline again"
            )
        files.extend(
            _commit_files(uri, fs, root, version, actions, table or head.table, skip_change_commits)
        )
    return tuple(files)


def read_files(
    uri: str,
    files: Sequence[SourceFile],
    columns: Sequence[tuple[str, pa.DataType]],
    *,
    file_column: str | None = None,
) -> pa.Table:
    """The rows of ``files`` (of the Delta table at ``uri``, from :func:`plan_range`), file by
    file in the given order, each file's in its order: exactly ``columns`` (name, Arrow type),
    and with ``file_column`` a string column holding each row's data file path.

    A column a file lacks is null; a partition column is the file's partition value; every
    column is cast to its type (timestamps: see the module doc). A file that no longer exists
    raises :class:`SourceTableError` naming the version that added it."""
    fields = [pa.field(name, kind) for name, kind in columns]
    if file_column is not None:
        fields.append(pa.field(file_column, pa.string()))
    schema = pa.schema(fields)
    if not files:
        return schema.empty_table()
    fs, _ = table_filesystem(uri)

    def read(file: SourceFile) -> pa.Table:
        return _read_file(uri, fs, file, columns, file_column, schema)

    if len(files) == 1:
        return read(files[0])
    with ThreadPoolExecutor(min(_READ_THREADS, len(files))) as pool:
        return pa.concat_tables(pool.map(read, files))


# -- the table and its log ------------------------------------------------------------------------


def _load(uri: str, table: str | None = None) -> Any:
    """The ``deltalake.DeltaTable`` at ``uri`` (newest version); ``table``: the id of the table
    that was there (its absence is then :class:`SourceTableChanged`)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri)
    except TableNotFoundError as e:
        reason = first_line(e)
        if table is not None:
            raise SourceTableChanged(
                f"there is no Delta table at {uri} any more ({reason}), where table {table} "
                f"was: start the pipeline again with a new checkpoint once it is back"
            ) from None
        raise SourceTableError(
            f"no Delta table at {uri} ({reason}): check the source's path"
        ) from None
    except Exception as e:  # a log delta-rs cannot read: an unknown feature, a broken commit
        raise SourceTableError(
            f"the Delta table at {uri} cannot be read ({first_line(e)}); nothing was read: "
            f"read a copy of the table that panestore's Delta source can read"
        ) from None


def _reader_features(dt: Any) -> tuple[int, tuple[str, ...]]:
    protocol = dt.protocol()
    return int(protocol.min_reader_version), tuple(protocol.reader_features or ())


def _check_readable(
    uri: str,
    version: int,
    protocol: tuple[int, Sequence[str]],
    configuration: dict[str, str] | None,
) -> None:
    """Refuse a table whose protocol or properties (at ``version``) this reader cannot read."""
    mode = (configuration or {}).get(COLUMN_MAPPING_PROPERTY, "none")
    if mode != "none":
        raise SourceTableError(
            f"the Delta table at {uri} uses column mapping ({COLUMN_MAPPING_PROPERTY} = {mode} "
            f"at version {version}), which panestore's Delta source cannot read (its data files "
            f"name columns by physical names): read a copy of the table without column mapping"
        )
    min_reader, features = protocol
    unknown = sorted(set(features) - READABLE_FEATURES)
    if min_reader > 3 or unknown:
        what = f"reader feature {unknown[0]}" if unknown else f"reader version {min_reader}"
        raise SourceTableError(
            f"the Delta table at {uri} needs the {what} (at version {version}), which "
            f"panestore's Delta source cannot read: read a copy of the table without it"
        )


def _commit_path(root: str, version: int) -> str:
    return f"{root}/_delta_log/{version:020d}.json"


def _read_commit(fs: pafs.FileSystem, root: str, version: int) -> list[dict[str, Any]] | None:
    """The actions of the commit of ``version`` (None: its log file is gone)."""
    try:
        with fs.open_input_stream(_commit_path(root, version)) as stream:
            text = stream.read().decode("utf-8")
    except FileNotFoundError:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _logged_versions(fs: pafs.FileSystem, root: str) -> list[int]:
    """The versions whose commit files are in the log, ascending."""
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/_delta_log", allow_not_found=True))
    found = (_COMMIT_FILE.match(posixpath.basename(i.path)) for i in infos)
    return sorted(int(m.group(1)) for m in found if m)


def _commit_time_ms(fs: pafs.FileSystem, root: str, version: int) -> int:
    for action in _read_commit(fs, root, version) or []:
        info = action.get("commitInfo")
        if info is not None:
            found = info.get("inCommitTimestamp", info.get("timestamp"))
            if found is not None:
                return int(found)
    mtime = fs.get_file_info(_commit_path(root, version)).mtime_ns
    return int(mtime // 1_000_000) if mtime is not None else 0


def _commit_files(
    uri: str,
    fs: pafs.FileSystem,
    root: str,
    version: int,
    actions: Sequence[dict[str, Any]],
    table: str | None,
    skip_change_commits: bool,
) -> list[SourceFile]:
    """The files one commit contributes (see the module doc)."""
    operation = None
    adds: list[dict[str, Any]] = []
    changes: set[str] = set()  # what makes the commit a change commit
    for action in actions:
        if "commitInfo" in action:
            operation = action["commitInfo"].get("operation")
        elif "metaData" in action:
            meta = action["metaData"]
            if table is not None and meta.get("id") not in (None, table):
                raise SourceTableChanged(
                    f"version {version} of the Delta table at {uri} belongs to table "
                    f"{meta.get('id')}, not table {table}: it was deleted and created anew; "
                    f"start the pipeline again with a new checkpoint to read the new table"
                )
            _check_readable(uri, version, (1, ()), meta.get("configuration"))
        elif "protocol" in action:
            protocol = action["protocol"]
            features = protocol.get("readerFeatures") or ()
            _check_readable(uri, version, (int(protocol["minReaderVersion"]), features), {})
        elif "add" in action:
            add = action["add"]
            if add.get("dataChange", True):
                adds.append(add)
                if add.get("deletionVector"):
                    changes.add("dv")
        elif "remove" in action:
            if action["remove"].get("dataChange", True):
                changes.add("remove")
        elif "cdc" in action:
            changes.add("cdc")
    change = next((text for key, text in _CHANGES if key in changes), None)
    if change is not None:
        if skip_change_commits:
            return []
        what = f" ({operation})" if operation else ""
        raise SourceTableError(
            f"version {version}{what} of the Delta table at {uri} deletes or updates rows "
            f"({change}), which an append-only source cannot follow: set "
            f"{SKIP_CHANGE_COMMITS_OPTION} = true to skip such commits (the rows they add "
            f"too), or start again from a later version with {STARTING_VERSION_OPTION}"
        )
    return [
        SourceFile(
            version,
            _data_file_path(uri, fs, root, version, str(add["path"])),
            _partition_values(add),
            int(add.get("size", 0)),
        )
        for add in adds
    ]


def _data_file_path(uri: str, fs: pafs.FileSystem, root: str, version: int, path: str) -> str:
    """An ``add.path`` (URL-encoded, relative to the table root, or an absolute URI) as a path
    in the table's filesystem."""
    if len(urlparse(path).scheme) > 1:  # an absolute URI (not a Windows drive letter)
        other, found = pafs.FileSystem.from_uri(path)
        if other.type_name != fs.type_name:
            raise SourceTableError(
                f"version {version} of the Delta table at {uri} adds a data file on another "
                f"filesystem ({path}), which panestore's Delta source cannot read"
            )
        return str(found)
    return f"{root}/{unquote(path)}"


# -- reading data files ---------------------------------------------------------------------------


def _read_file(
    uri: str,
    fs: pafs.FileSystem,
    file: SourceFile,
    columns: Sequence[tuple[str, pa.DataType]],
    file_column: str | None,
    schema: pa.Schema,
) -> pa.Table:
    partition = dict(file.partition_values)
    try:
        with fs.open_input_file(file.path) as source:
            parquet = pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
            present = set(parquet.schema_arrow.names)
            wanted = [n for n, _ in columns if n not in partition and n in present]
            data = parquet.read(columns=wanted, use_threads=True)
            rows = parquet.metadata.num_rows
    except FileNotFoundError:
        raise SourceTableError(
            f"data file {file.path} added by version {file.version} of the Delta table at "
            f"{uri} no longer exists: it was vacuumed before this pipeline read it, so the rows "
            f"of version {file.version} can no longer be read; start again from a later version "
            f"with {STARTING_VERSION_OPTION}, or rebuild"
        ) from None
    out: list[pa.Array | pa.ChunkedArray] = []
    for name, kind in columns:
        try:
            if name in partition:
                out.append(pa.repeat(_partition_value(partition[name], kind), rows))
            elif name in present:
                out.append(_cast(data.column(name), kind))
            else:
                out.append(pa.nulls(rows, kind))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            found = partition[name] if name in partition else data.schema.field(name).type
            raise SourceTableError(
                f"column {name} of data file {file.path} (version {file.version} of the Delta "
                f"table at {uri}) is {found!r}, which cannot be read as {kind}: {e}"
            ) from None
    if file_column is not None:
        out.append(pa.repeat(pa.scalar(file.path, pa.string()), rows))
    return pa.Table.from_arrays(out, schema=schema)


def _partition_value(text: str | None, kind: pa.DataType) -> pa.Scalar:
    """A partition value (Delta's text of it; None or empty: null) as a scalar of ``kind``."""
    if text is None or text == "":
        return pa.scalar(None, kind)
    value = pa.array([text], pa.string())
    if pa.types.is_timestamp(kind):  # microseconds, as Delta writes them
        try:  # Delta's "2024-01-02 03:04:05.123456": UTC, no zone written
            value = value.cast(pa.timestamp("us"))
        except pa.ArrowInvalid:  # ISO 8601 with a zone: "2024-01-02T03:04:05.123456Z"
            value = value.cast(pa.timestamp("us", "UTC"))
        return _cast(pa.chunked_array([value]), kind)[0]
    return value.cast(kind)[0]


def _cast(column: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray:
    """``column`` as ``kind``; timestamps of any unit and zone (none: UTC wall time) are moved
    to ``kind``'s unit, rounded down."""
    if column.type == kind:
        return column
    if pa.types.is_timestamp(kind) and pa.types.is_timestamp(column.type):
        have, want = _PER_SECOND[column.type.unit], _PER_SECOND[kind.unit]
        if have == want:
            return column.cast(kind)  # only the zone changes: the same instants
        ticks = column.cast(pa.int64())
        if have > want:
            factor = have // want
            ticks = pc.divide(ticks, factor)  # toward zero: one less below it
            ticks = pc.subtract(
                ticks,
                pc.greater(pc.multiply(ticks, factor), column.cast(pa.int64())).cast(pa.int64()),
            )
        else:
            ticks = pc.multiply_checked(ticks, want // have)
        return ticks.cast(kind)
    return column.cast(kind)


def _delta_type_text(kind: Any) -> str:
    """A deltalake schema type as Delta writes it (``decimal(10,2)``, ``array<long>``, ...)."""
    if hasattr(kind, "element_type"):
        return f"array<{_delta_type_text(kind.element_type)}>"
    if hasattr(kind, "key_type"):
        return f"map<{_delta_type_text(kind.key_type)},{_delta_type_text(kind.value_type)}>"
    if hasattr(kind, "fields"):
        inner = ",".join(f"{f.name}:{_delta_type_text(f.type)}" for f in kind.fields)
        return f"struct<{inner}>"
    return str(kind.type)


def _partition_values(add: dict[str, Any]) -> tuple[tuple[str, str | None], ...]:
    values = add.get("partitionValues") or {}
    return tuple((str(k), None if v is None else str(v)) for k, v in values.items())
