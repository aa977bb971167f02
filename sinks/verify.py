"""Verification: the current view against two independent recomputations.

1. **From the pane log**: the whole pane log (up to the version the view has folded) folded from
   nothing with the reference reducer (:func:`view_from_pane_log`).
2. **From the accepted raw events**, as a batch: each element assigned to its windows and
   aggregated, minus what the engine dropped (the ``late`` table). Fixed, sliding and global
   windows in DuckDB SQL; merging windows (sessions), which SQL cannot express, through
   :func:`panes.fold.batch` in one bundle.

``verify(pipeline, elements=...) -> Report``; ``Report.ok`` is False when any difference was
found, and ``str(report)`` lists them. Elements: an Arrow table with the key columns, ``ts_us``
and the value columns the aggregates read (``_value`` for an aggregate without a field), or an
iterable of engine ``(key, value, timestamp)`` tuples. The CLI reads them from the pipeline's
landing zone (:func:`load_source_elements`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from panes.combiners import Count, Max, Mean, Min, Sum, ToList
from panes.window import GLOBAL_WINDOW, Window
from panes.windowfns import FixedWindows, GlobalWindows, SlidingWindows
from sinks.spec import LakeError, ViewSpec, as_spec

VALUE = "_value"
View = dict[tuple, dict[str, Any]]


def view_from_pane_log(pipeline: Any, upto: int | None = None) -> pa.Table:
    """The view recomputed from pane-log versions ``0..upto`` (default: all), as a table in the
    ``current`` schema."""
    from sinks.materializer import (
        _plain,
        fold_rows,
        open_pane_log,
        pane_log_commits,
        read_pane_rows,
        rows_change_table,
        view_schema,
    )

    spec = as_spec(pipeline)
    dt = open_pane_log(spec)
    latest = dt.version()
    upto = latest if upto is None else upto
    if not 0 <= upto <= latest:
        raise LakeError(f"pane log has versions 0..{latest}, not {upto}")
    if upto != latest:
        dt.load_as_version(upto)
    rows = read_pane_rows(dt, pane_log_commits(dt, -1, upto))
    live = fold_rows(spec, rows)
    schema = pa.schema(
        [
            f.with_type(_plain(f.type))
            for f in view_schema(
                spec,
                pa.schema([f.with_type(_plain(f.type)) for f in pa.schema(dt.schema().to_arrow())]),
            )
        ]
    )
    table = rows_change_table(schema, list(live.values()), [], spec.keys)
    return table.drop_columns(["_op"]).cast(schema)


def view_dict(spec: ViewSpec, table: pa.Table) -> View:
    out: View = {}
    for r in table.to_pylist():
        at = (tuple(r[k] for k in spec.keys), (r["window_start_us"], r["window_end_us"]))
        out[at] = {n: r[n] for n in spec.value_names}
    return out


# -- the batch from raw events -------------------------------------------------------------------


def elements_table(spec: ViewSpec, elements: Any) -> pa.Table:
    """Engine ``(key, value, ts)`` tuples -> the elements table (key columns, values, ts_us)."""
    if isinstance(elements, pa.Table):
        return elements
    cols: dict[str, list] = {k: [] for k in spec.keys}
    fields = value_fields(spec)
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
    out = []
    for _, fn in spec.aggregates:
        f = getattr(fn, "field", None)
        f = VALUE if f is None else f
        if f not in out and not (isinstance(fn, Count) and getattr(fn, "field", None) is None):
            out.append(f)
    return out or [VALUE]


def _sql_aggregate(name: str, fn: Any) -> str:
    f = getattr(fn, "field", None)
    col = f'"{VALUE if f is None else f}"'
    if isinstance(fn, Count):
        return f'count({"*" if f is None else col}) AS "{name}"'
    if isinstance(fn, Sum):
        return f'coalesce(sum({col}), 0) AS "{name}"'
    if isinstance(fn, Min):
        return f'min({col}) AS "{name}"'
    if isinstance(fn, Max):
        return f'max({col}) AS "{name}"'
    if isinstance(fn, Mean):
        return f'avg({col}) AS "{name}"'
    if isinstance(fn, ToList):
        return f'list({col} ORDER BY ts_us) AS "{name}"'
    raise LakeError(f"aggregate {name} = {fn!r} has no SQL form")


def sql_expressible(spec: ViewSpec) -> bool:
    if not isinstance(spec.window_fn, (FixedWindows, SlidingWindows, GlobalWindows)):
        return False
    return all(isinstance(fn, (Count, Sum, Min, Max, Mean, ToList)) for _, fn in spec.aggregates)


def _json_value(value: Any) -> str:
    import json

    return json.dumps(value, default=str, sort_keys=True, separators=(",", ":"))


def drop_pairs(spec: ViewSpec, elements: pa.Table, late: pa.Table | None) -> list[tuple[int, int]]:
    """(element row, window start) of each dropped element: matched by key, timestamp, window
    and value (the late table keeps the value as JSON)."""
    if late is None or late.num_rows == 0 or elements.num_rows == 0:
        return []
    fields = [c for c in value_fields(spec) if c in elements.column_names]
    by: dict[tuple, list[int]] = {}
    keys = list(zip(*(elements.column(k).to_pylist() for k in spec.keys), strict=True))
    ts = elements.column("ts_us").to_pylist()
    vals = [elements.column(f).to_pylist() for f in fields]
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
        for i in cands:
            if (i, d["window_start_us"]) not in used:
                used.add((i, d["window_start_us"]))
                out.append((i, d["window_start_us"]))
                break
    return out


def batch_sql(spec: ViewSpec, elements: pa.Table, late: pa.Table | None = None) -> View:
    """Windows and values of ``elements`` minus ``late`` drops, in DuckDB SQL."""
    import duckdb

    fn = spec.window_fn
    keys = ", ".join(f'"{k}"' for k in spec.keys)
    if isinstance(fn, FixedWindows):
        start = f"ts_us - (((ts_us - {fn.offset}) % {fn.size}) + {fn.size}) % {fn.size}"
        assign = f"SELECT *, {start} AS ws, {start} + {fn.size} AS we FROM e"
    elif isinstance(fn, SlidingWindows):
        n = -(-fn.size // fn.period)
        assign = (
            f"SELECT * EXCLUDE (k), ws + {fn.size} AS we FROM (SELECT *, ts_us - "
            f"(((ts_us - {fn.offset}) % {fn.period}) + {fn.period}) % {fn.period} "
            f"- k * {fn.period} AS ws FROM e, range(0, {n + 1}) r(k)) "
            f"WHERE ws > ts_us - {fn.size}"
        )
    else:
        assign = (
            f"SELECT *, ({GLOBAL_WINDOW.start + 1}::BIGINT - 1) AS ws, "
            f"{GLOBAL_WINDOW.end}::BIGINT AS we FROM e"
        )
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


def batch_engine(spec: ViewSpec, elements: pa.Table, late: pa.Table | None = None) -> View:
    """Windows and values of ``elements`` minus drops, through :func:`panes.fold.batch`."""
    from panes.fold import batch
    from panes.pane import Dropped

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
            dropped.append(Dropped(key, value, ts, Window(ws, ends[ws]), "", None, None))
    els = [e for i, e in enumerate(els) if i not in gone]
    result = batch(els, spec.window_fn, spec.combine_fn, dropped)
    return {(spec.key_of(k), (w.start, w.end)): spec.values_of(v) for (k, w), v in result.items()}


class _Record(dict):
    """A record value that can be hashed (panes.fold.batch counts elements in a Counter)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


def _value_from_json(text: str | None, candidates: list) -> Any:
    import json

    if text is not None:
        try:
            v = json.loads(text)
            for c in candidates:
                if c == v:
                    return c
        except ValueError:
            pass
    return candidates[0]


def batch_view(
    spec: ViewSpec, elements: Any, late: pa.Table | None = None, engine: str = "auto"
) -> tuple[View, str]:
    table = elements_table(spec, elements)
    if engine == "sql" or (engine == "auto" and sql_expressible(spec)):
        return batch_sql(spec, table, late), "DuckDB SQL"
    return batch_engine(spec, table, late), "panes.fold.batch (one bundle)"


# -- comparing -----------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return a == b


def diff(expected: View, actual: View) -> list[str]:
    out = []
    for at in sorted(set(expected) | set(actual), key=repr):
        e, a = expected.get(at), actual.get(at)
        if e is None:
            out.append(f"extra in view: {_at(at)} = {a}")
        elif a is None:
            out.append(f"missing in view: {_at(at)} (expected {e})")
        elif not all(_same(e[n], a.get(n)) for n in e):
            out.append(f"differs: {_at(at)}: view {a}, expected {e}")
    return out


def _at(at: tuple) -> str:
    key, (s, e) = at
    k = key[0] if len(key) == 1 else key
    return f"key {k!r} window [{s}, {e})"


@dataclass
class Check:
    name: str
    differences: list[str]
    windows: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.differences


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    folded_version: int | None = None
    pane_log_version: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        lines = [
            f"view folded up to pane-log version {self.folded_version} "
            f"(pane log at version {self.pane_log_version})"
        ]
        for c in self.checks:
            status = "OK" if c.ok else f"{len(c.differences)} DIFFERENCES"
            lines.append(
                f"{c.name}: {status} ({c.windows} windows){' - ' + c.note if c.note else ''}"
            )
            lines += [f"  {d}" for d in c.differences[:20]]
            if len(c.differences) > 20:
                lines.append(f"  ... {len(c.differences) - 20} more")
        lines += self.notes
        lines.append("verify: OK" if self.ok else "verify: FAILED")
        return "\n".join(lines)


def verify(
    pipeline: Any, elements: Any = None, late: pa.Table | None = None, *, engine: str = "auto"
) -> Report:
    """Compare ``current`` with the pane log refolded and (given ``elements``) with the batch.

    ``late``: the late table (default: read from the lake when it exists).
    """
    from deltalake import DeltaTable

    from sinks.materializer import open_pane_log, open_view

    spec = as_spec(pipeline)
    view_dt = open_view(spec)
    folded = view_dt.transaction_version(spec.app_id)
    report = Report(folded_version=folded, pane_log_version=open_pane_log(spec).version())
    actual = view_dict(spec, view_dt.to_pyarrow_table())
    if folded is None:
        report.notes.append("the view has folded nothing yet")
        refold: View = {}
    else:
        refold = view_dict(spec, view_from_pane_log(spec, upto=folded))
    report.checks.append(Check("view = pane log refolded", diff(refold, actual), len(refold)))
    if folded is not None and report.pane_log_version != folded:
        report.notes.append(
            f"note: pane-log versions {folded + 1}..{report.pane_log_version} "
            f"are not folded yet (run panestore materialize)"
        )
    if elements is not None:
        if late is None and DeltaTable.is_deltatable(spec.table_path("late")):
            late = DeltaTable(spec.table_path("late")).to_pyarrow_table()
        expected, how = batch_view(spec, elements, late, engine)
        note = how
        if folded is not None and report.pane_log_version != folded:
            note += "; the view is behind the pane log, so differences may be expected"
        report.checks.append(
            Check(
                "view = batch over accepted raw events", diff(expected, actual), len(expected), note
            )
        )
    return report


# -- raw events from the landing zone ----------------------------------------------------------


def load_source_elements(pipeline: Any) -> pa.Table:
    """The pipeline's landing-zone records as an elements table (DuckDB readers).

    Records that the job rejects (missing key or event time) are left out. Requires
    ``event_time`` (an ingestion-time pipeline's event time is the batch time, which the files
    do not hold).
    """
    import os

    from sinks.duck import raw_connect

    p = pipeline.pipeline if isinstance(pipeline, ViewSpec) else pipeline
    spec = as_spec(pipeline)
    if p is None:
        raise LakeError("loading raw events needs the pipeline configuration")
    if getattr(p, "ingestion_time", False) or not p.event_time:
        raise LakeError(
            "ingestion-time pipelines cannot be checked against raw events: their "
            "event time is the batch time, not in the files"
        )
    src = p.source
    duck_types = {
        "string": "VARCHAR",
        "int": "INTEGER",
        "long": "BIGINT",
        "bigint": "BIGINT",
        "double": "DOUBLE",
        "float": "FLOAT",
        "boolean": "BOOLEAN",
        "timestamp": "VARCHAR",
    }
    cols = "{" + ", ".join(f"'{c}': '{duck_types[t]}'" for c, t in src.schema) + "}"
    path = src.path
    if not os.path.isdir(path):
        raise LakeError(f"landing zone {path} not found")
    files = [
        os.path.join(dp, f)
        for dp, _, fs in os.walk(path)
        for f in fs
        if not f.startswith((".", "_"))
    ]
    if not files:
        raise LakeError(f"no input files in {path}")
    flist = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in sorted(files)) + "]"
    if src.format == "jsonl":
        # Malformed lines are rejected by the job too: skip them here.
        reader = (
            f"read_json({flist}, format='newline_delimited', columns={cols}, ignore_errors=true)"
        )
    elif src.format == "csv":
        reader = (
            f"read_csv({flist}, header={str(src.csv_header).lower()}, "
            f"delim='{src.csv_delimiter}', columns={cols}, ignore_errors=true)"
        )
    else:
        reader = f"read_parquet({flist})"
    et = p.event_time
    if src.types[et] == "timestamp":
        ts = f'epoch_us(TRY_CAST("{et}" AS TIMESTAMPTZ))'
    else:
        from jobs.pipeline import EPOCH_UNITS

        ts = f'("{et}" * {EPOCH_UNITS[src.epoch_unit]})::BIGINT'
    keys = ", ".join(f'"{k}"' for k in spec.keys)
    vals = [f for f in value_fields(spec) if f != VALUE]
    sel = ", ".join([keys, *[f'"{v}"' for v in vals], f"{ts} AS ts_us"])
    nn = " AND ".join([f'"{k}" IS NOT NULL' for k in spec.keys] + [f"{ts} IS NOT NULL"])
    con = raw_connect()
    try:
        return con.sql(f"SELECT {sel} FROM {reader} WHERE {nn}").to_arrow_table()
    finally:
        con.close()


def as_mapping(x: Any) -> Mapping:
    return x if isinstance(x, Mapping) else {}


__all__ = [
    "Report",
    "verify",
    "view_from_pane_log",
    "batch_view",
    "load_source_elements",
]
