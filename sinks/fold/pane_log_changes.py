"""Reading what the pane log gained between two versions: its commits and their pane rows.

Every data commit of the pane log is one batch of the job (its batch id in the commit metadata,
:func:`sinks.lake.delta_append.commit_metadata`); maintenance commits (optimize, vacuum, ...) add no
pane rows and are skipped. A commit of any other writer is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from panes.window import Window
from sinks.lake import (
    BATCH_ID_METADATA,
    NO_DATA_OPERATIONS,
    PANE_LOG_VERSION,
    ConfigMismatch,
    ForeignTable,
    LakeError,
    ViewSpec,
    arrow_schema,
    commit_metadata,
    open_latest,
    plain_table,
)


def pane_log_commits(
    dt: Any, after: int, upto: int, storage_options: Mapping[str, str] | None = None
) -> dict[int, int | None]:
    """{version: batch id or None (no pane rows)} for pane-log versions ``after < v <= upto``
    (``storage_options``: those ``dt`` was opened with)."""
    if upto <= after:
        return {}
    # History from a table loaded at its newest version: delta-rs 1.6.6 numbers the entries of a
    # time-travelled table's history wrongly (the newest commits, labelled from its version down).
    # The run's (or the fold's) shared snapshot when there is one: no second read of the log.
    fresh = open_latest(dt.table_uri.rstrip("/"), storage_options)
    out: dict[int, int | None] = {}
    for entry in fresh.history(limit=max(1, fresh.version() - after)):
        v = entry.get("version")
        if v is None or not after < v <= upto:
            continue
        batch = commit_metadata(entry).get(BATCH_ID_METADATA)
        op = str(entry.get("operation", ""))
        if batch is None:
            if op not in NO_DATA_OPERATIONS:
                raise ForeignTable(
                    f"pane-log version {v} ({op}) was not written by panestore "
                    f"(no {BATCH_ID_METADATA} in its commit); refusing to fold it"
                )
            out[v] = None
        else:
            out[v] = int(batch)
    missing = [v for v in range(after + 1, upto + 1) if v not in out]
    if missing:
        raise LakeError(f"pane-log history is missing versions {missing[:5]} (log cleaned up?)")
    return out


def read_pane_rows(dt: Any, commits: Mapping[int, int | None]) -> pa.Table:
    """The pane rows of the given commits, with their pane-log version in ``_version``."""
    batches = {b: v for v, b in commits.items() if b is not None}
    if not batches:
        schema = arrow_schema(dt)
        schema = pa.schema([*list(schema), pa.field(PANE_LOG_VERSION, pa.int64())])
        return schema.empty_table()
    ids = pa.array(sorted(batches), pa.int64())
    table = dt.to_pyarrow_dataset().to_table(filter=pc.field("batch_id").isin(ids))
    table = plain_table(table)
    versions = pa.array([batches[b] for b in ids.to_pylist()], pa.int64())
    idx = pc.index_in(table.column("batch_id"), value_set=ids)
    return table.append_column(PANE_LOG_VERSION, pc.take(versions, idx))


def check_pane_rows(spec: ViewSpec, rows: pa.Table, path: str) -> None:
    """Refuse rows of another pipeline or of another window function (fixed/sliding shapes)."""
    if rows.num_rows == 0:
        return
    ids = rows.column("pipeline_id")
    others = pc.unique(pc.filter(ids, pc.not_equal(ids, spec.name)))
    if len(others):
        raise ForeignTable(
            f"pane log at {path} holds rows of pipeline(s) {others.to_pylist()[:3]}, "
            f"not {spec.name!r}"
        )
    bad = window_shape_violation(spec, rows)
    if bad:
        raise ConfigMismatch(
            f"pane log at {path} holds windows that {spec.window_fn} cannot produce "
            f"(e.g. [{bad[0]}, {bad[1]})): it was written with another window function. "
            f"Nothing was written."
        )


def window_shape_violation(spec: ViewSpec, rows: pa.Table) -> tuple[int, int] | None:
    """A window of ``rows`` that the spec's window function cannot produce, or None."""
    pairs = (
        rows.select(["window_start_us", "window_end_us"])
        .group_by(["window_start_us", "window_end_us"])
        .aggregate([])
    )
    for s, e in zip(pairs.column(0).to_pylist(), pairs.column(1).to_pylist(), strict=True):
        if not spec.window_fn.can_produce(Window(s, e)):
            return s, e
    return None
