"""Change tables and the MERGE that applies them to the ``current`` view.

A change table has the view's columns and ``_op`` (upsert / delete), one row per (key, window).
:func:`merge_changes` applies one in a single MERGE commit, naming the ``window_day`` partitions
it touches so only those days' files are rewritten. Integer values never wrap: the reference
reducer's rows are checked against their columns (:func:`check_view_range`), and ``combine``
adds integers in a checked expression that fails the MERGE where the column cannot hold the sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from panes.combiners import CombineFn
from sinks.fold.sql_reducer import merge_aggregate, quote_name
from sinks.lake import (
    DELETE,
    KEY_HASH,
    OP,
    UPSERT,
    WINDOW_DAY,
    WINDOW_REF,
    FoldValueOutOfRange,
    ViewSpec,
    beyond_range,
    column_text,
    integer_range,
    key_hashes,
    window_text,
    with_timestamps,
)

# A MERGE names the days it touches (partition pruning) up to this many; more: no filter.
MAX_PRUNED_DAYS = 1000


def change_table(schema: pa.Schema, table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``table`` (view columns, some missing, plus ``_op``) in the view schema plus ``_op``."""
    if "absorbed" not in table.column_names:
        table = table.append_column(
            "absorbed", pa.array([[]] * table.num_rows, pa.list_(WINDOW_REF))
        )
    table = with_view_derived(table, schema, keys)
    cols, fields = [], []
    for f in schema:
        if f.name not in table.column_names:  # e.g. ``accumulator`` (not folded vectorized)
            cols.append(pa.nulls(table.num_rows, f.type))
            fields.append(f.with_nullable(True))
            continue
        col = table.column(f.name).cast(f.type)
        cols.append(col)
        fields.append(f.with_nullable(True))
    cols.append(table.column(OP).cast(pa.string()))
    fields.append(pa.field(OP, pa.string()))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def rows_change_table(
    schema: pa.Schema, upserts: list[dict], deletes: list[tuple], keys: Sequence[str]
) -> pa.Table:
    """The change table of the reference reducer's changes: view rows to upsert, and the
    (key tuple, (start, end)) windows to delete."""
    rows = [dict(r, **{OP: UPSERT}) for r in upserts]
    for key, (s, e) in deletes:
        row = dict(zip(keys, key, strict=True))
        row.update(window_start_us=s, window_end_us=e, pane_index=0, pane_log_version=0)
        row[OP] = DELETE
        rows.append(row)
    fields = [f.with_nullable(True) for f in schema] + [pa.field(OP, pa.string())]
    try:
        table = pa.Table.from_pylist(rows, schema=pa.schema(fields))
    except (OverflowError, pa.ArrowInvalid):
        check_view_range(schema, upserts, keys)  # names the window whose value does not fit
        raise
    return with_view_derived(table, schema, keys)


def check_view_range(schema: pa.Schema, rows: Sequence[Mapping], keys: Sequence[str]) -> None:
    """Raise :class:`sinks.lake.errors.FoldValueOutOfRange` for the first of the view ``rows`` (a
    reducer's, its values exact Python integers) with a value its integer column cannot hold."""
    for f in schema:
        for row in rows:
            value = row.get(f.name)
            if beyond_range(value, f.type):
                where = window_text(
                    {k: row[k] for k in keys}, row["window_start_us"], row["window_end_us"]
                )
                raise FoldValueOutOfRange(
                    f"the panes of {where} fold to {f.name} = {value}, beyond the current "
                    f"view's {column_text(f.type)} column {f.name!r}"
                )


def fits_view(schema: pa.Schema, table: pa.Table) -> bool:
    """Whether each integer column of the view ``schema`` holds every value of the column of
    its name in ``table`` (a reducer's, whose sums may be wider: DuckDB's are 128-bit)."""
    for f in schema:
        bounds = integer_range(f.type)
        if bounds is None or f.name not in table.column_names:
            continue
        extremes = pc.min_max(table.column(f.name)).as_py()
        if extremes["min"] is None:
            continue
        if int(extremes["min"]) < bounds[0] or int(extremes["max"]) > bounds[1]:
            return False
    return True


def with_view_derived(table: pa.Table, schema: pa.Schema, keys: Sequence[str]) -> pa.Table:
    """``table`` with the view's derived columns set: the timestamps of the ``*_us`` columns,
    ``window_day``, the UTC date of ``window_start`` (null when it is not a timestamp), and, when
    the view ``schema`` has it (a view created before it had not), the ``key_hash`` of ``keys``
    (:mod:`sinks.lake.key_hash`)."""
    table = with_timestamps(table)
    day = table.column("window_start").cast(pa.date32())
    table = _set_column(table, WINDOW_DAY, day)
    if KEY_HASH in schema.names:
        table = _set_column(table, KEY_HASH, key_hashes(table, keys))
    return table


def _set_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


def days_filter(changes: pa.Table) -> str | None:
    """``t.window_day IN (...)`` naming the days of ``changes`` (the view is partitioned by
    ``window_day``), None when there are too many days to name."""
    days = pc.unique(changes.column(WINDOW_DAY))
    named = [d for d in days.to_pylist() if d is not None]
    if len(named) > MAX_PRUNED_DAYS:
        return None
    parts = []
    if named:
        dates = ", ".join(f"DATE '{d.isoformat()}'" for d in named)
        parts.append(f"t.{WINDOW_DAY} IN ({dates})")
    if days.null_count:
        parts.append(f"t.{WINDOW_DAY} IS NULL")
    return "(" + " OR ".join(parts) + ")"


def _merge_predicate(spec: ViewSpec) -> str:
    parts = [f"t.{quote_name(k)} = s.{quote_name(k)}" for k in spec.keys]
    parts += ["t.window_start_us = s.window_start_us", "t.window_end_us = s.window_end_us"]
    return " AND ".join(parts)


# SQL integer types by width (a Delta table's integers are signed)
_SQL_INTEGERS = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}


def _combine_expr(fn: CombineFn, col: str, type_: pa.DataType) -> str:
    t, s = f"t.{col}", f"s.{col}"
    merge = merge_aggregate(fn)
    if merge == "sum" and integer_range(type_) is not None:
        # DataFusion's integer + wraps silently; the sum as a 38-digit decimal, cast back to
        # the column's type, fails the MERGE (nothing committed) where the column cannot hold it
        wide = "DECIMAL(38, 0)"
        back = _SQL_INTEGERS[type_.bit_width]
        return f"CAST(CAST({t} AS {wide}) + CAST({s} AS {wide}) AS {back})"
    if merge == "sum":
        return f"{t} + {s}"
    op = "<" if merge == "min" else ">"
    return (
        f"CASE WHEN {t} IS NULL THEN {s} WHEN {s} IS NULL THEN {t} "
        f"WHEN {s} {op} {t} THEN {s} ELSE {t} END"
    )


def hash_filter(low: int, high: int | None) -> str:
    """``t.key_hash`` in ``[low, high)`` (``high`` None: no upper bound)."""
    text = f"t.{KEY_HASH} >= {low}"
    return text if high is None else f"{text} AND t.{KEY_HASH} < {high}"


def merge_changes(
    dt,
    spec: ViewSpec,
    changes: pa.Table,
    style: str,
    commit_properties,
    hash_range: tuple[int, int | None] | None = None,
) -> dict:
    """Apply a change table in one MERGE commit. ``style``: ``replace`` (rows are final),
    ``latest`` (keep the higher pane index; deletes name the retracted index) or ``combine``
    (discarding: merge values into the row). ``hash_range``: the key hashes of every change
    (a piece of a fold, :mod:`sinks.fold.fold_plan`): the MERGE reads only the view files whose
    statistics overlap it."""
    names = [n for n in changes.column_names if n != OP]
    all_cols = {quote_name(n): f"s.{quote_name(n)}" for n in names}
    predicate = _merge_predicate(spec)
    days = days_filter(changes)
    if days is not None:  # each change's window is on its own day: no match is lost
        predicate = f"{predicate} AND {days}"
    if hash_range is not None and KEY_HASH in names:  # each change's key is in the range
        predicate = f"{predicate} AND {hash_filter(*hash_range)}"
    m = dt.merge(
        changes,
        predicate,
        source_alias="s",
        target_alias="t",
        commit_properties=commit_properties,
    )
    if style == "replace":
        m = m.when_matched_delete(f"s.{OP} = '{DELETE}'")
        m = m.when_matched_update(all_cols, f"s.{OP} = '{UPSERT}'")
    elif style == "latest":
        upd = {k: v for k, v in all_cols.items() if k != '"absorbed"'}
        m = m.when_matched_update(upd, f"s.{OP} = '{UPSERT}' AND s.pane_index > t.pane_index")
        m = m.when_matched_delete(f"s.{OP} = '{DELETE}' AND t.pane_index <= s.pane_index")
    elif style == "combine":
        upd = {
            quote_name(n): _combine_expr(fn, quote_name(n), changes.schema.field(n).type)
            for n, fn in spec.aggregates
        }
        newer = "s.pane_index > t.pane_index"
        for n in ("pane_index", "timing", "is_last", "timestamp_us", "timestamp"):
            col = quote_name(n)
            upd[col] = f"CASE WHEN {newer} THEN s.{col} ELSE t.{col} END"
        upd['"pane_log_version"'] = (
            "CASE WHEN s.pane_log_version > t.pane_log_version "
            "THEN s.pane_log_version ELSE t.pane_log_version END"
        )
        m = m.when_matched_update(upd)
    else:  # pragma: no cover
        raise ValueError(style)
    m = m.when_not_matched_insert(all_cols, f"s.{OP} = '{UPSERT}'")
    return m.execute()
