"""The batch check's expected view: the pipeline's results computed from the accepted raw events
as one batch, minus what the engine dropped (the ``late`` table).

Fixed, sliding and global windows with built-in aggregates in DuckDB SQL (:func:`batch_sql`);
anything else, merging windows (sessions) included, through :func:`panes.fold.batch` in one
bundle (:func:`batch_engine`).

Elements: an Arrow table with the key columns, ``ts_us`` and the value columns the aggregates
read (:func:`value_fields`; ``_value`` for an aggregate without a field), or an iterable of
engine ``(key, value, timestamp)`` tuples.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from panes.combiners import CombineFn, fields_of, unfiltered
from panes.fold import batch
from panes.inputs import INPUT_COLUMN
from panes.pane import Dropped, DropReason
from panes.window import Window
from sinks.lake import LakeError, ViewSpec

VALUE = "_value"  # the elements-table column of an aggregate without a field
DEDUP_GROUP = "pst_dedup_group"
"""The elements-table column of a deduplicated pipeline: the number of the record's copies'
group (its key and id; null: a null id, never deduplicated). See :func:`without_duplicates`."""
View = dict[tuple, dict[str, Any]]
"""Aggregate values by (key tuple, (window start, window end))."""


def elements_table(spec: ViewSpec, elements: Any) -> pa.Table:
    """Engine ``(key, value, ts)`` tuples -> the elements table (key columns, values, ts_us)."""
    if isinstance(elements, pa.Table):
        return elements
    cols: dict[str, list] = {k: [] for k in spec.keys}
    # a filter's condition may read a key: its column is the key's
    fields = [f for f in value_fields(spec) if f not in spec.keys]
    for f in fields:
        cols[f] = []
    cols["ts_us"] = []
    for key, value, ts in elements:
        for k, v in zip(spec.keys, spec.key_of(key), strict=True):
            cols[k].append(v)
        for f in fields:
            cols[f].append(value if f == VALUE else value.get(f))
        cols["ts_us"].append(ts)
    return (
        pa.table(cols)
        if cols["ts_us"]
        else pa.table({k: pa.array(v, pa.null() if not v else None) for k, v in cols.items()})
    )


def value_fields(spec: ViewSpec) -> list[str]:
    """The value columns the aggregates read from the elements table."""
    out = []
    for _, fn in spec.aggregates:
        for f in fields_of(fn) or ((VALUE,) if fn.reads_value else ()):
            if f not in out:
                out.append(f)
    return out or [VALUE]


def _sql_aggregate(name: str, fn: CombineFn) -> str:
    form = fn.sql
    if form is None:
        raise LakeError(f"aggregate {name} = {fn!r} has no SQL form")
    base = unfiltered(fn)  # a filtered aggregate's condition is in its form (FILTER (WHERE ...))
    value = f'"{getattr(base, "field", None) or VALUE}"' if base.reads_value else "*"
    fields = fields_of(base)
    by = f'"{fields[1]}"' if len(fields) > 1 else ""
    return f'{form.batch.format(value=value, by=by, order="ts_us", filter="")} AS "{name}"'


def sql_expressible(spec: ViewSpec) -> bool:
    """Whether :func:`batch_sql` computes the view: periodic or global windows, built-in
    aggregates."""
    fn = spec.window_fn
    if fn.periodic is None and fn.only_window is None:
        return False
    return all(fn.sql is not None for _, fn in spec.aggregates)


def _json_value(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True, separators=(",", ":"))


def drop_pairs(spec: ViewSpec, elements: pa.Table, late: pa.Table | None) -> list[tuple[int, int]]:
    """(element row, window start) of each dropped element: matched by key, timestamp, window
    and value (the late table keeps the value as JSON); a value that does not match exactly
    (a late element's value holds the filters' flags, :attr:`ViewSpec` knows their conditions),
    any element of the key and time, of the late element's own input when the elements name
    theirs (several inputs: :func:`_of_its_input`)."""
    if late is None or late.num_rows == 0 or elements.num_rows == 0:
        return []
    fields = [c for c in value_fields(spec) if c in elements.column_names]
    by: dict[tuple, list[int]] = {}
    keys = list(zip(*(elements.column(k).to_pylist() for k in spec.keys), strict=True))
    ts = elements.column("ts_us").to_pylist()
    vals = [elements.column(f).to_pylist() for f in fields]
    named = INPUT_COLUMN in elements.column_names  # (several inputs: each element's input)
    inputs = elements.column(INPUT_COLUMN).to_pylist() if named else None
    for i in range(elements.num_rows):
        value = (
            vals[0][i]
            if fields == [VALUE]
            else {f: v[i] for f, v in zip(fields, vals, strict=True)}
        )
        by.setdefault((keys[i], ts[i], _json_value(value)), []).append(i)
    used: set[tuple[int, int]] = set()
    out = []
    for d in late.to_pylist():
        if d.get("window_start_us") is None:
            continue
        key = tuple(d[k] for k in spec.keys)
        cands = by.get((key, d["timestamp_us"], d.get("value_json")))
        if cands is None:  # value not comparable: any element with this key and time
            cands = [
                i
                for (k, t, _), rows in by.items()
                if (k, t) == (key, d["timestamp_us"])
                for i in rows
            ]
            cands = _of_its_input(cands, inputs, d.get("value_json")) or cands
        for i in cands:
            if (i, d["window_start_us"]) not in used:
                used.add((i, d["window_start_us"]))
                out.append((i, d["window_start_us"]))
                break
    return out


def _of_its_input(rows: list[int], inputs: list[Any] | None, value_json: Any) -> list[int]:
    """Of the element ``rows`` a late row's value does not match exactly, those of the input
    the late row names (several inputs: a late element's value names its input,
    :data:`panes.inputs.INPUT_COLUMN`; an element of another input with the same key and time
    is not it). Empty when the value names no input (then any of ``rows`` is taken)."""
    if inputs is None or not isinstance(value_json, str):
        return []
    try:
        value = json.loads(value_json)
    except ValueError:
        return []
    if not isinstance(value, dict) or INPUT_COLUMN not in value:
        return []
    return [i for i in rows if inputs[i] == value[INPUT_COLUMN]]


def batch_sql(spec: ViewSpec, elements: pa.Table, late: pa.Table | None = None) -> View:
    """Windows and values of ``elements`` minus ``late`` drops, in DuckDB SQL."""
    import duckdb

    keys = ", ".join(f'"{k}"' for k in spec.keys)
    assign = _window_assignment_sql(spec)
    con = duckdb.connect()
    elements = elements.append_column("_row", pa.array(range(elements.num_rows), pa.int64()))
    con.register("e", elements)
    pairs = drop_pairs(spec, elements, late)
    con.register(
        "d",
        pa.table(
            {
                "_row": pa.array([p[0] for p in pairs], pa.int64()),
                "ws": pa.array([p[1] for p in pairs], pa.int64()),
            }
        ),
    )
    aggs = ", ".join(_sql_aggregate(n, f) for n, f in spec.aggregates)
    sql = f"""
        WITH a AS ({assign})
        SELECT {keys}, ws AS window_start_us, we AS window_end_us, {aggs}
        FROM a ANTI JOIN d USING (_row, ws) GROUP BY ALL"""
    out: View = {}
    nk = len(spec.keys)
    for r in con.sql(sql).fetchall():
        at = (tuple(r[:nk]), (r[nk], r[nk + 1]))
        out[at] = dict(zip(spec.value_names, r[nk + 2 :], strict=True))
    con.close()
    return out


def _window_assignment_sql(spec: ViewSpec) -> str:
    """SQL over the elements ``e`` adding each element's window bounds ``ws``, ``we`` (one row
    per element and window)."""
    grid = spec.window_fn.periodic
    if grid is None:
        only = spec.window_fn.only_window
        assert only is not None
        return f"SELECT *, ({only.start + 1}::BIGINT - 1) AS ws, {only.end}::BIGINT AS we FROM e"
    size, period, offset = grid.size, grid.period, grid.offset
    if size == period:  # fixed windows: one per element
        start = f"ts_us - (((ts_us - {offset}) % {size}) + {size}) % {size}"
        return f"SELECT *, {start} AS ws, {start} + {size} AS we FROM e"
    n = -(-size // period)
    return (
        f"SELECT * EXCLUDE (k), ws + {size} AS we FROM (SELECT *, ts_us - "
        f"(((ts_us - {offset}) % {period}) + {period}) % {period} "
        f"- k * {period} AS ws FROM e, range(0, {n + 1}) r(k)) "
        f"WHERE ws > ts_us - {size}"
    )


def batch_engine(spec: ViewSpec, elements: pa.Table, late: pa.Table | None = None) -> View:
    """Windows and values of ``elements`` minus drops, through :func:`panes.fold.batch`."""
    fields = [c for c in value_fields(spec) if c in elements.column_names]
    els = []
    for r in elements.to_pylist():
        key = tuple(r[k] for k in spec.keys)
        key = key[0] if len(key) == 1 else key
        value = r[VALUE] if fields == [VALUE] else _Record({f: r[f] for f in fields})
        els.append((key, value, r["ts_us"]))
    dropped = []
    ends = {}
    if late is not None:
        ends = {(d["window_start_us"]): d["window_end_us"] for d in late.to_pylist()}
    pairs = drop_pairs(spec, elements, late)
    gone = set()
    for i, ws in pairs:
        key, value, ts = els[i]
        windows = spec.window_fn.assign(ts, value)
        if len(windows) == 1:  # the element's only window: leave the element out
            gone.add(i)
        else:  # (values must be hashable here: panes.fold.batch counts drops)
            # batch() reads a drop's key, value, timestamp and window only; the clocks are unknown
            drop = Dropped(key, value, ts, Window(ws, ends[ws]), "", None, None)  # type: ignore[arg-type]
            dropped.append(drop)
    els = [e for i, e in enumerate(els) if i not in gone]
    assert spec.combine_fn is not None  # ViewSpec.__post_init__ sets it
    result = batch(els, spec.window_fn, spec.combine_fn, dropped)
    return {(spec.key_of(k), (w.start, w.end)): spec.values_of(v) for (k, w), v in result.items()}


class _Record(dict):
    """A record value that can be hashed (panes.fold.batch counts elements in a Counter)."""

    def __hash__(self) -> int:  # type: ignore[override]  # dict declares __hash__ None
        return hash(tuple(sorted(self.items())))


def without_duplicates(spec: ViewSpec, elements: pa.Table, late: pa.Table | None) -> pa.Table:
    """``elements`` without the copies a deduplicated pipeline rejects (:mod:`panes.dedup`),
    when they have a :data:`DEDUP_GROUP` column: per group, the first copy is kept (the table is
    sorted in :func:`panes.dedup.copy_order` within each group: event time, then the values).

    A copy the ``late`` table reports as expired arrived past its id's horizon, when the job
    no longer checked it: it is kept, and the late row takes it out again (in the batch's
    subtraction of the late table), whichever copy the job had counted before.
    """
    if DEDUP_GROUP not in elements.column_names:
        return elements
    expired = None
    if late is not None and late.num_rows and "reason" in late.column_names:
        reasons = late.column("reason").to_pylist()
        keep = [r is not None and r.startswith(DropReason.EXPIRED) for r in reasons]
        expired = late.filter(pa.array(keep, pa.bool_()))
    past = {i for i, _ in drop_pairs(spec, elements, expired)}
    seen: set[int] = set()
    keep = []
    for i, group in enumerate(elements.column(DEDUP_GROUP).to_pylist()):
        first = group is None or i in past or group not in seen
        keep.append(first)
        if group is not None and i not in past:
            seen.add(group)
    return elements.filter(pa.array(keep, pa.bool_())).drop_columns([DEDUP_GROUP])


def duplicates_left_out(spec: ViewSpec, elements: Any, late: pa.Table | None) -> int | None:
    """How many copies :func:`without_duplicates` leaves out of ``elements`` (None: they are not
    of a deduplicated pipeline)."""
    if not isinstance(elements, pa.Table) or DEDUP_GROUP not in elements.column_names:
        return None
    return elements.num_rows - without_duplicates(spec, elements, late).num_rows


def batch_view(
    spec: ViewSpec, elements: Any, late: pa.Table | None = None, engine: str = "auto"
) -> tuple[View, str]:
    table = without_duplicates(spec, elements_table(spec, elements), late)
    if engine == "sql" or (engine == "auto" and sql_expressible(spec)):
        return batch_sql(spec, table, late), "DuckDB SQL"
    return batch_engine(spec, table, late), "panes.fold.batch (one bundle)"
