"""The view recomputed from the pane log: every pane-log version up to one, folded from nothing
with the reference reducer. What ``verify`` compares the view with, and what
``connect(as_of="panes:N")`` shows.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from sinks.fold.pane_log_changes import pane_log_commits, read_pane_rows
from sinks.fold.reducer import fold_rows
from sinks.fold.view_merge import rows_change_table
from sinks.lake import (
    OP,
    InvalidRequest,
    ViewSpec,
    arrow_schema,
    open_pane_log,
    plain_schema,
    view_schema,
)


class Refold(NamedTuple):
    """The view recomputed from pane-log versions ``0..upto``, and the watermark they reached."""

    rows: dict[tuple, dict]
    """The view's rows by (key tuple, (start, end)), their values exact (Python's integers do
    not stop at 64 bits)."""
    schema: pa.Schema
    """The ``current`` schema."""
    watermark_us: int | None
    """The latest watermark a pane of those versions was emitted at (``watermark_us``; None:
    no pane). The watermark never moves back, and the batch that reached it fired and let go
    every window due at it (:meth:`panes.rules.WindowRules.gone`) in the same commit: every window
    gone at this watermark has its final panes in these versions."""


def refold(spec: ViewSpec, upto: int | None = None) -> Refold:
    """The view recomputed from pane-log versions ``0..upto`` (default: all), and their
    watermark."""
    dt = open_pane_log(spec)
    latest = dt.version()
    upto = latest if upto is None else upto
    if not 0 <= upto <= latest:
        raise InvalidRequest(f"pane log has versions 0..{latest}, not {upto}")
    if upto != latest:  # (a table of its own: not a run's shared snapshot)
        dt = open_pane_log(spec, upto)
    rows = read_pane_rows(dt, pane_log_commits(dt, -1, upto, spec.storage_options))
    watermark = pc.max(rows.column("watermark_us")).as_py() if rows.num_rows else None
    schema = plain_schema(view_schema(spec, plain_schema(arrow_schema(dt))))
    return Refold(fold_rows(spec, rows), schema, watermark)


def view_from_pane_log(spec: ViewSpec, upto: int | None = None) -> pa.Table:
    """The view recomputed from pane-log versions ``0..upto`` (default: all), as a table in the
    ``current`` schema; :class:`sinks.lake.errors.FoldValueOutOfRange` names a window whose value
    its column cannot hold."""
    again = refold(spec, upto)
    table = rows_change_table(again.schema, list(again.rows.values()), [], spec.keys)
    return table.drop_columns([OP]).cast(again.schema)
