"""The view recomputed from the pane log: every pane-log version up to one, folded from nothing
with the reference reducer. What ``verify`` compares the view with, and what
``connect(as_of="panes:N")`` shows.
"""

from __future__ import annotations

import pyarrow as pa

from sinks.errors import InvalidRequest
from sinks.lake_format import OP
from sinks.pane_log_changes import pane_log_commits, read_pane_rows
from sinks.reducer import fold_rows
from sinks.spec import ViewSpec
from sinks.tables import arrow_schema, open_pane_log, plain_schema, view_schema
from sinks.view_merge import rows_change_table


def refolded_rows(spec: ViewSpec, upto: int | None = None) -> tuple[dict[tuple, dict], pa.Schema]:
    """The view rows of pane-log versions ``0..upto`` (default: all) folded from nothing, by
    (key tuple, (start, end)), their values exact (Python's integers do not stop at 64 bits);
    and the ``current`` schema."""
    dt = open_pane_log(spec)
    latest = dt.version()
    upto = latest if upto is None else upto
    if not 0 <= upto <= latest:
        raise InvalidRequest(f"pane log has versions 0..{latest}, not {upto}")
    if upto != latest:
        dt.load_as_version(upto)
    rows = read_pane_rows(dt, pane_log_commits(dt, -1, upto, spec.storage_options))
    schema = plain_schema(view_schema(spec, plain_schema(arrow_schema(dt))))
    return fold_rows(spec, rows), schema


def view_from_pane_log(spec: ViewSpec, upto: int | None = None) -> pa.Table:
    """The view recomputed from pane-log versions ``0..upto`` (default: all), as a table in the
    ``current`` schema; :class:`sinks.errors.FoldValueOutOfRange` names a window whose value its
    column cannot hold."""
    live, schema = refolded_rows(spec, upto)
    table = rows_change_table(schema, list(live.values()), [], spec.keys)
    return table.drop_columns([OP]).cast(schema)
