"""Opening a pipeline's tables, and their identity: format version, pipeline, configuration.

Every table panestore creates records in its table properties (:func:`table_properties`) the lake
format version, the pipeline's name, its table kind and the fingerprint of its configuration
(:attr:`ViewSpec.fingerprint`). Opening a table checks them once (:func:`check_table_properties`):
a table of another format, of another pipeline or built by another configuration is refused with
:class:`FormatMismatch`, :class:`ForeignTable` or :class:`ConfigMismatch`, and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from sinks.lake.data_files import folder_names
from sinks.lake.errors import ConfigMismatch, ForeignTable, LakeError, TableMissing
from sinks.lake.key_hash import KEY_HASH
from sinks.lake.lake_format import (
    CHANGE_FEED_FROM_PROPERTY,
    CHANGE_FEED_PROPERTY,
    CHECKPOINT_INTERVAL,
    CHECKPOINT_INTERVAL_PROPERTY,
    CONFIG_PROPERTY,
    FINGERPRINT_PROPERTY,
    FORMAT_PROPERTY,
    FORMAT_VERSION,
    KIND_PROPERTY,
    PANE_LOG_REQUIRED,
    PIPELINE_PROPERTY,
    VIEW_META,
    VIEW_NOT_NULL,
    WINDOW_DAY,
    WINDOW_FIELDS,
    check_format,
)
from sinks.lake.object_store import join_location, one_line
from sinks.lake.snapshot_sharing import kept, latest, open_latest
from sinks.lake.spec import ViewSpec

# -- Arrow types of delta-rs reads ---------------------------------------------------------------


def plain_type(t: pa.DataType) -> pa.DataType:
    """string_view / binary_view (what delta-rs datasets give) -> string / binary."""
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(plain_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(plain_type(f.type)) for f in t])
    return t


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with :func:`plain_type` field types."""
    return pa.schema([f.with_type(plain_type(f.type)) for f in schema])


def plain_table(table: pa.Table) -> pa.Table:
    """``table`` cast to :func:`plain_schema`."""
    return table.cast(plain_schema(table.schema))


def arrow_schema(dt: Any) -> pa.Schema:
    """The Arrow schema of a ``deltalake.DeltaTable``."""
    return pa.schema(dt.schema().to_arrow())


# -- identity ------------------------------------------------------------------------------------


def table_properties(spec: ViewSpec, kind: str) -> dict[str, str]:
    """The Delta table properties of a table of this pipeline (``kind``: panes, current, ...)."""
    return {
        FORMAT_PROPERTY: FORMAT_VERSION,
        CHECKPOINT_INTERVAL_PROPERTY: CHECKPOINT_INTERVAL,
        KIND_PROPERTY: kind,
        PIPELINE_PROPERTY: spec.name,
        FINGERPRINT_PROPERTY: spec.fingerprint,
        CONFIG_PROPERTY: json.dumps(spec.config, sort_keys=True),
    }


def view_properties(spec: ViewSpec) -> dict[str, str]:
    """The table properties of a new ``current`` table: its identity, and Delta's change data
    feed on from version 0 (:mod:`sinks.fold.change_feed`)."""
    return {
        **table_properties(spec, "current"),
        CHANGE_FEED_PROPERTY: "true",
        CHANGE_FEED_FROM_PROPERTY: "0",
    }


def mismatch_text(what: str, path: str, spec: ViewSpec, conf: Mapping[str, str]) -> str:
    try:
        theirs = json.loads(conf.get(CONFIG_PROPERTY) or "null")
    except ValueError:
        theirs = None
    return (
        f"{what} at {path} was built by a different pipeline configuration "
        f"({spec.describe_config(theirs)}); this configuration is "
        f"{spec.describe_config(spec.config)}. Nothing was written. Changing keys, aggregates, "
        f"window function or accumulation mode needs a new lake directory, or "
        f"`panestore materialize --rebuild` if only the view is affected."
    )


def check_table_properties(
    spec: ViewSpec, what: str, path: str, conf: Mapping[str, str] | None
) -> None:
    """Refuse a table of another lake format, of another pipeline, or whose recorded
    configuration fingerprint is not ``spec``'s."""
    conf = conf or {}
    check_format(what, path, conf)
    if conf.get(FINGERPRINT_PROPERTY) != spec.fingerprint:
        raise ConfigMismatch(mismatch_text(what, path, spec, conf))
    owner = conf.get(PIPELINE_PROPERTY)
    if owner != spec.name:
        raise ForeignTable(f"{what} at {path} belongs to pipeline {owner!r}, not {spec.name!r}")


def table_identity(spec: ViewSpec, table: str, what: str) -> dict[str, Any]:
    """The ``properties`` a writer records when it creates ``table`` of this pipeline, the
    ``check`` that refuses an existing one of another configuration, and the lake's
    ``storage_options`` (``ExactlyOnceAppender``'s keyword arguments)."""
    path = spec.table_path(table)

    def check(conf: Mapping[str, str]) -> None:
        check_table_properties(spec, what, path, conf)

    return {
        "properties": table_properties(spec, table),
        "check": check,
        "storage_options": spec.storage_options,
    }


def check_key_columns(spec: ViewSpec, names: Sequence[str], what: str, path: str) -> None:
    missing = [n for n in [*spec.keys, *spec.value_names] if n not in names]
    if missing:
        raise ConfigMismatch(
            f"{what} at {path} has no column(s) {missing}: it was written by a pipeline "
            f"configuration with other keys or aggregates (columns: {list(names)}). The current "
            f"configuration is {spec.describe_config(spec.config)}. Use a new lake directory "
            f"(or rebuild) after changing keys or aggregates."
        )


# -- opening -------------------------------------------------------------------------------------


def open_table(
    path: str,
    what: str,
    storage_options: Mapping[str, str] | None = None,
    version: int | None = None,
    *,
    shared: bool = True,
):
    """The Delta table at ``path``; :class:`TableMissing` / :class:`ForeignTable` otherwise. At
    its newest version (``version`` None) and ``shared``, the run's snapshot of it when a run
    shares them (:mod:`sinks.lake.snapshot_sharing`: a caller that moves the table to another
    version passes ``shared=False``)."""
    from deltalake import DeltaTable

    opts = dict(storage_options) if storage_options else None
    share = version is None and shared
    if share:
        table = latest(path, opts)
        if table is not None:
            return table
    if not is_table(path, what, opts):
        names = folder_names(path)
        if names and not _creation_never_committed(path, names):
            raise ForeignTable(f"{what} at {path} exists but is not a Delta table")
        raise TableMissing(f"{what} not found at {path}")
    if share:
        return open_latest(path, opts)
    return DeltaTable(path, version=version, storage_options=opts)


def _creation_never_committed(path: str, names: Sequence[str]) -> bool:
    """Whether the folder ``path`` (holding ``names``) is what a table creation that failed
    before its first commit (a full disk, a kill) leaves: a ``_delta_log`` without commits,
    maybe data files."""
    if "_delta_log" not in names:
        return False
    log = folder_names(join_location(path, "_delta_log"))
    return not any(n.endswith((".json", ".checkpoint.parquet")) for n in log)


def is_table(path: str, what: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether a Delta table is at ``path``; a store that cannot be read (no such bucket, no
    access) raises a :class:`LakeError` naming ``what`` and the store's answer on one line."""
    from deltalake import DeltaTable

    opts = dict(storage_options) if storage_options else None
    if kept(path, opts):  # the run's snapshot: it exists (sinks.lake.snapshot_sharing)
        return True
    try:
        return DeltaTable.is_deltatable(path, storage_options=opts)
    except OSError as e:
        raise LakeError(f"cannot read the {what} at {path}: {one_line(e, limit=400)}") from None


def table_exists(spec: ViewSpec, table: str) -> bool:
    """Whether the table ``table`` (``panes``, ``current``, ...) of ``spec``'s lake exists."""
    return is_table(spec.table_path(table), f"{table} table", spec.storage_options)


def existing_table(spec: ViewSpec, table: str) -> Any | None:
    """The ``deltalake.DeltaTable`` ``table`` of ``spec``'s lake, opened with its storage
    options (unchecked; the run's snapshot when a run shares them:
    :mod:`sinks.lake.snapshot_sharing`); None when it does not exist."""
    if not table_exists(spec, table):
        return None
    opts = dict(spec.storage_options) if spec.storage_options else None
    return open_latest(spec.table_path(table), opts)


def open_pane_log(spec: ViewSpec, version: int | None = None):
    """The pane log, checked to be this pipeline's (format, columns, pipeline, fingerprint)."""
    path = spec.table_path("panes")
    try:
        dt = open_table(path, "pane log", spec.storage_options, version)
    except TableMissing:
        raise TableMissing(
            f"pane log not found at {path}: run the pipeline first (panestore run CONF)"
        ) from None
    names = arrow_schema(dt).names
    missing = [n for n in PANE_LOG_REQUIRED if n not in names]
    if missing:
        raise ForeignTable(
            f"the Delta table at {path} is not a panestore pane log (no {', '.join(missing)})"
        )
    check_key_columns(spec, names, "pane log", path)
    check_table_properties(spec, "pane log", path, dt.metadata().configuration)
    return dt


def view_schema(spec: ViewSpec, pane_log_schema: pa.Schema) -> pa.Schema:
    """Schema of ``current``: key and value types as in the pane log."""
    fields = [pane_log_schema.field(k) for k in spec.keys]
    fields += [pa.field(n, t, nullable=n not in VIEW_NOT_NULL) for n, t in WINDOW_FIELDS]
    fields.append(pa.field(WINDOW_DAY, pa.date32()))
    fields.append(pa.field(KEY_HASH, pa.int64()))
    fields += [pane_log_schema.field(v) for v in spec.value_names]
    fields += [pa.field(n, t, nullable=n not in VIEW_NOT_NULL) for n, t in VIEW_META]
    fields.append(pa.field("accumulator", pa.string()))
    return pa.schema(fields)


def open_view(
    spec: ViewSpec,
    pane_log_schema: pa.Schema | None = None,
    *,
    create: bool = False,
    version: int | str | None = None,
):
    """The ``current`` table (created empty, partitioned by ``window_day``, with its change feed
    on, when ``create`` and missing), checked to be this pipeline's view under this
    configuration."""
    from deltalake import DeltaTable

    path = spec.table_path("current")
    try:  # (a view loaded at another version below is not the run's shared one)
        dt = open_table(path, "current view", spec.storage_options, shared=version is None)
    except TableMissing:
        if not create:
            raise TableMissing(
                f"current view not found at {path}: run `panestore materialize CONF` first"
            ) from None
        assert pane_log_schema is not None
        dt = DeltaTable.create(
            path,
            view_schema(spec, pane_log_schema),
            mode="ignore",
            partition_by=[WINDOW_DAY],
            configuration=view_properties(spec),
            raise_if_key_not_exists=False,
            storage_options=dict(spec.storage_options) if spec.storage_options else None,
        )
    conf = dt.metadata().configuration or {}
    check_format("current view", path, conf)
    if conf.get(KIND_PROPERTY) != "current":
        raise ForeignTable(f"the Delta table at {path} is not a panestore current view")
    if conf.get(PIPELINE_PROPERTY) != spec.name:
        raise ForeignTable(
            f"current view at {path} belongs to pipeline {conf.get(PIPELINE_PROPERTY)!r}, "
            f"not {spec.name!r}"
        )
    if conf.get(FINGERPRINT_PROPERTY) != spec.fingerprint:
        raise ConfigMismatch(mismatch_text("current view", path, spec, conf))
    if version is not None:
        dt.load_as_version(version)
    return dt
