"""A pane log read as the input of another pipeline: its columns, and its rows by version range.

A downstream pipeline (``[source] format = "pane_log"``) reads an upstream pipeline's pane log
version by version. :func:`pane_log_columns` says what the upstream offers (its key and
aggregate columns with their configuration types, its accumulation mode); :func:`read_elements`
returns the rows a range of versions ``after < v <= upto`` added, as element rows: the
requested columns, the pane's output timestamp (the element's event time), the upstream's
watermark at emission and the pane's weight (+1, or -1 for a retraction). A range of versions
always reads the same rows (commits are immutable; maintenance commits add none), so a replayed
downstream batch reads what it read the first time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from jobs.checkpoint.offsets import head_at
from sinks.fold import pane_log_commits, read_pane_rows
from sinks.lake import (
    CONFIG_PROPERTY,
    PANE_LOG_VERSION,
    PIPELINE_PROPERTY,
    ForeignTable,
    LakeError,
    UpstreamChanged,
    arrow_schema,
    is_column_type,
    is_struct_type,
    plain_type,
    type_name,
)

EVENT_TIME_US, WATERMARK_US, WEIGHT = "pst_ts_us", "pst_watermark_us", "pst_weight"
"""The element columns :func:`read_elements` adds: event time (µs), upstream watermark at
emission (µs) and weight (int32: +1, -1)."""


@dataclass(frozen=True)
class PaneLogColumns:
    """What an upstream pane log offers a downstream pipeline.

    ``keys`` and ``values``: (column, type) of its key and aggregate columns: a configuration
    type, or a sketch aggregate's struct type (``struct<estimate: long, sketch: binary>``, which
    only ``merge(column)`` reads: :func:`offered_type`); list aggregates are left out: no
    configuration type holds them. ``mode``: its accumulation mode name
    (``ACCUMULATING_AND_RETRACTING`` writes retractions).
    """

    pipeline: str
    keys: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str], ...]
    mode: str

    @property
    def retracting(self) -> bool:
        return self.mode == "ACCUMULATING_AND_RETRACTING"

    def describe(self) -> str:
        keys = ", ".join(f"{n} {t}" for n, t in self.keys)
        values = ", ".join(f"{n} {t}" for n, t in self.values)
        return f"keys {keys}; aggregates {values}"


def offered_type(type_name: str | None) -> bool:
    """Whether an upstream's column of ``type_name`` (an aggregate's output type) is offered to a
    downstream: a configuration type, or a struct (a sketch aggregate's answer and bytes).

    >>> [offered_type(t) for t in ("long", "struct<estimate: long, sketch: binary>", "list<long>")]
    [True, True, False]
    """
    return type_name is not None and (is_column_type(type_name) or is_struct_type(type_name))


def has_pane_log(path: str) -> bool:
    """Whether a Delta table (a pane log, once checked) is at ``path``."""
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(path)


def pane_log_columns(path: str, pipeline: str | None = None) -> PaneLogColumns:
    """The columns of the pane log at ``path`` (its table properties and schema); refuses a
    table that is not a panestore pane log, or one of another pipeline than ``pipeline``."""
    from deltalake import DeltaTable

    try:
        dt = DeltaTable(path)
    except Exception as e:  # deltalake raises TableNotFoundError and others
        raise LakeError(f"no pane log at {path}: {e}") from None
    conf = dt.metadata().configuration or {}
    owner = conf.get(PIPELINE_PROPERTY)
    if owner is None or CONFIG_PROPERTY not in conf:
        raise ForeignTable(f"{path} is not a panestore pane log (no {PIPELINE_PROPERTY})")
    if pipeline is not None and owner != pipeline:
        raise ForeignTable(
            f"the pane log at {path} belongs to pipeline {owner!r}, not {pipeline!r}"
        )
    config = json.loads(conf[CONFIG_PROPERTY])
    schema = arrow_schema(dt)

    def typed(names: Sequence[str]) -> tuple[tuple[str, str], ...]:
        out = []
        for name in names:
            found = type_name(plain_type(schema.field(name).type))
            if offered_type(found):
                assert found is not None
                out.append((name, found))
        return tuple(out)

    return PaneLogColumns(
        owner,
        typed(config["keys"]),
        typed([name for name, _ in config["aggregates"]]),
        str(config["accumulation_mode"]),
    )


def latest_version(path: str) -> int:
    """The pane log's newest version, -1 if it does not exist yet (the upstream has not run)."""
    return head_at(path).version


def commit_times_ms(path: str, since: int) -> dict[int, int]:
    """{version: commit timestamp in ms} of the pane log's versions from ``since`` on, as far as
    its history still holds them (a cleaned-up log has lost its oldest commits)."""
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    entries = dt.history(limit=max(1, dt.version() - since + 1))
    return {
        int(e["version"]): int(e["timestamp"])
        for e in entries
        if e.get("version") is not None and e.get("timestamp") is not None
    }


def read_elements(
    path: str,
    pipeline: str,
    after: int,
    upto: int,
    columns: Sequence[tuple[str, pa.DataType]],
    table: str | None = None,
) -> pa.Table:
    """The element rows of pane-log versions ``after < v <= upto`` (see the module doc): the
    ``columns`` (name, Arrow type), then :data:`EVENT_TIME_US`, :data:`WATERMARK_US` and
    :data:`WEIGHT`; in version order, and by pane id within a version (deterministic).

    ``table``: the pane log's table id the versions belong to; another table at ``path`` (the
    upstream was rebuilt since the range was planned) raises :class:`UpstreamChanged`."""
    from deltalake import DeltaTable

    out_schema = pa.schema(
        [
            *[pa.field(c, t) for c, t in columns],
            pa.field(EVENT_TIME_US, pa.int64()),
            pa.field(WATERMARK_US, pa.int64()),
            pa.field(WEIGHT, pa.int32()),
        ]
    )
    if upto <= after:
        return out_schema.empty_table()
    # The newest version: rows are found by their batch ids, which compaction keeps, while the
    # files of an old version may have been vacuumed.
    dt = DeltaTable(path)
    if table is not None and str(dt.metadata().id) != table:
        raise UpstreamChanged(
            f"the pane log at {path} is table {dt.metadata().id} now, not table {table} whose "
            f"versions {after + 1}..{upto} this batch reads: the upstream was rebuilt"
        )
    rows = read_pane_rows(dt, pane_log_commits(dt, after, upto))
    if rows.num_rows == 0:
        return out_schema.empty_table()
    ids = rows.column("pipeline_id")
    others = pc.unique(pc.filter(ids, pc.not_equal(ids, pipeline)))
    if len(others):
        raise ForeignTable(
            f"pane log at {path} holds rows of pipeline(s) {others.to_pylist()[:3]}, "
            f"not {pipeline!r}"
        )
    rows = rows.sort_by([(PANE_LOG_VERSION, "ascending"), ("pane_id", "ascending")])
    weight = pc.if_else(rows.column("is_retraction"), -1, 1).cast(pa.int32())
    data = [rows.column(c).cast(t) for c, t in columns]
    data += [rows.column("timestamp_us"), rows.column("watermark_us"), weight]
    return pa.table(data, schema=out_schema)


def final_view_elements(view_path: str, columns: Sequence[str]) -> pa.Table:
    """The upstream's current view as elements of a batch computation: ``columns`` (key and
    aggregate columns) and ``ts_us``, each window's output timestamp (what its last pane said).
    This is the batch check's input of a pipeline over this upstream (``panestore verify``):
    its view must equal the batch over the upstream's final windows."""
    from deltalake import DeltaTable

    try:
        view = DeltaTable(view_path).to_pyarrow_table(columns=[*columns, "timestamp_us"])
    except Exception as e:  # no view yet, or not a panestore view
        raise LakeError(f"cannot read the upstream's view at {view_path}: {e}") from None
    return view.rename_columns([*columns, "ts_us"])
