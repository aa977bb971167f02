"""The materializer: fold the pane log into the ``current`` view with one Delta MERGE per run.

``Materializer(spec).run()`` reads the pane-log versions it has not folded yet, reduces them to one
change per (key, window), and applies the changes to the ``current`` Delta table in a single MERGE
commit. The commit carries an application transaction (``app id = "<pipeline>/materializer"``,
``version = the last pane-log version folded``), read back first on every run, so a re-run or a
crash-and-retry never folds a version twice; a commit conflict (a concurrent optimize, another
materializer on another machine) is retried from the start.

Fold rules (docs/semantics.md, :mod:`panes.fold`), per (key, window), whatever order the panes of
a window arrive in across pane-log versions:

* accumulating: the pane with the highest index wins;
* discarding: the panes' values merge (sum and count add, min and max take the extreme, lists
  concatenate); when an aggregate's value is not its accumulator (a mean), the panes'
  ``accumulator`` column is merged with the pipeline's combiner and extracted instead, and the
  view row keeps the merged accumulator in its own ``accumulator`` column;
* accumulating & retracting: as accumulating; a retraction withdraws the pane it names (the
  window disappears if that pane is the one the view shows and nothing newer came);
* every mode: a pane deletes the windows it ``supersedes`` (discarding: absorbs their values).
  The view row keeps the windows it absorbed (``absorbed``), so a pane of an absorbed window
  that arrives in a later version is routed to the window that absorbed it (discarding) or
  ignored (it is already part of the merged value), never resurrected.

Two reducers give the same changes: a Python one (any window function; it reads the view rows of
the keys it touches) and a vectorized one in DuckDB for non-merging window functions (fixed,
sliding, global), whose changes are applied by conditional MERGE clauses without reading the view.

View rows: key column(s), window bounds (µs and timestamps), ``window_day`` (the UTC date the
window starts on; the view is partitioned by it, so a MERGE rewrites only the days its changes
touch), the aggregate column(s), the pane
index and timing of the pane the row reflects, its output timestamp, ``pane_log_version`` (the
pane-log version of that pane; discarding: the latest version merged in), ``absorbed``, and
(when the pane log has the column) ``accumulator``, the JSON of the row's combiner accumulator
(set in discarding mode when folding needs it, else null).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from panes.combiners import Count, Max, Min, Sum, ToList
from panes.windowing import AccumulationMode
from sinks.delta_append import BATCH_ID_METADATA, commit_metadata
from sinks.pane_log import (
    ACCUMULATOR,
    FIXED_NAMES,
    TS,
    WINDOW_REF,
    accumulator_from_json,
    accumulator_json,
    with_timestamps,
)
from sinks.spec import (
    FINGERPRINT_PROPERTY,
    KIND_PROPERTY,
    PIPELINE_PROPERTY,
    ConfigMismatch,
    ForeignTable,
    LakeError,
    MaterializerBusy,
    TableMissing,
    ViewSpec,
    as_spec,
    check_key_columns,
    check_table_properties,
    mismatch_text,
    table_properties,
)

FOLDED_VERSION_METADATA = "panestore.paneLogVersion"
FOLDED_FROM_METADATA = "panestore.paneLogFrom"
VERSION = "_version"  # pane-log version of a pane row (added when reading)
OP = "_op"
UPSERT, DELETE = "upsert", "delete"
RETRIES = 5

VIEW_META = [
    ("pane_index", pa.int64()),
    ("timing", pa.string()),
    ("is_last", pa.bool_()),
    ("timestamp_us", pa.int64()),
    ("timestamp", TS),
    ("pane_log_version", pa.int64()),
    ("absorbed", pa.list_(WINDOW_REF)),
]
WINDOW_COLS = [
    ("window_start_us", pa.int64()),
    ("window_end_us", pa.int64()),
    ("window_start", TS),
    ("window_end", TS),
]
# The view is partitioned by the UTC day its windows start on (null: the global window), so a
# MERGE rewrites only the days its changes touch: the recent ones, in a streaming pipeline.
WINDOW_DAY = "window_day"
# A MERGE names the days it touches (partition pruning) up to this many; more: no filter.
MAX_PRUNED_DAYS = 1000
# Operations whose commits add no pane rows (maintenance, metadata).
NO_DATA_OPERATIONS = {
    "CREATE TABLE",
    "OPTIMIZE",
    "VACUUM START",
    "VACUUM END",
    "SET TBLPROPERTIES",
    "CHECKPOINT",
    "UPDATE METADATA",
    "ADD COLUMN",
    "RESTORE",
}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _plain(t: pa.DataType) -> pa.DataType:
    """string_view / binary_view (what delta-rs datasets give) -> string / binary."""
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_plain(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_plain(f.type)) for f in t])
    return t


def arrow_schema(dt) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


# -- tables ------------------------------------------------------------------------------------


def open_table(
    path: str,
    what: str,
    storage_options: Mapping[str, str] | None = None,
    version: int | None = None,
):
    """The Delta table at ``path``; :class:`TableMissing` / :class:`ForeignTable` otherwise."""
    from deltalake import DeltaTable

    opts = dict(storage_options) if storage_options else None
    if not DeltaTable.is_deltatable(path, storage_options=opts):
        if (
            is_local(path)
            and os.path.exists(path.removeprefix("file://"))
            and os.listdir(path.removeprefix("file://"))
        ):
            raise ForeignTable(f"{what} at {path} exists but is not a Delta table")
        raise TableMissing(f"{what} not found at {path}")
    return DeltaTable(path, version=version, storage_options=opts)


def open_pane_log(spec: ViewSpec, version: int | None = None):
    """The pane log, checked to be this pipeline's (columns, pipeline, fingerprint)."""
    path = spec.table_path("panes")
    try:
        dt = open_table(path, "pane log", spec.storage_options, version)
    except TableMissing:
        raise TableMissing(
            f"pane log not found at {path}: run the pipeline first (panestore run CONF)"
        ) from None
    names = arrow_schema(dt).names
    missing = [
        n
        for n in (
            "pipeline_id",
            "window_start_us",
            "window_end_us",
            "pane_index",
            "is_retraction",
            "supersedes",
            "batch_id",
        )
        if n not in names
    ]
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
    fields += [pa.field(n, t, nullable=False) for n, t in WINDOW_COLS[:2]]
    fields += [pa.field(n, t) for n, t in WINDOW_COLS[2:]]
    fields.append(pa.field(WINDOW_DAY, pa.date32()))
    fields += [pane_log_schema.field(v) for v in spec.value_names]
    fields += [
        pa.field(n, t, nullable=n not in ("pane_index", "pane_log_version")) for n, t in VIEW_META
    ]
    if ACCUMULATOR in pane_log_schema.names:
        fields.append(pa.field(ACCUMULATOR, pa.string()))
    return pa.schema([f.with_nullable(f.nullable) for f in fields])


def view_properties(spec: ViewSpec) -> dict[str, str]:
    return table_properties(spec, "current")


def open_view(
    spec: ViewSpec,
    pane_log_schema: pa.Schema | None = None,
    *,
    create: bool = False,
    version: int | str | None = None,
):
    """The ``current`` table (created empty when ``create`` and missing), checked to be this
    pipeline's view under this configuration."""
    from deltalake import DeltaTable

    path = spec.table_path("current")
    try:
        dt = open_table(path, "current view", spec.storage_options)
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


# -- reading new pane rows ---------------------------------------------------------------------


def pane_log_commits(dt, after: int, upto: int) -> dict[int, int | None]:
    """{version: batch id or None (no pane rows)} for pane-log versions ``after < v <= upto``."""
    from deltalake import DeltaTable

    if upto <= after:
        return {}
    # History from a table loaded at its newest version: delta-rs 1.6.6 numbers the entries of a
    # time-travelled table's history wrongly (the newest commits, labelled from its version down).
    fresh = DeltaTable(dt.table_uri)
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


def read_pane_rows(dt, commits: Mapping[int, int | None]) -> pa.Table:
    """The pane rows of the given commits, with their pane-log version in ``_version``."""
    batches = {b: v for v, b in commits.items() if b is not None}
    if not batches:
        schema = arrow_schema(dt)
        schema = pa.schema([*list(schema), pa.field(VERSION, pa.int64())])
        return schema.empty_table()
    ids = pa.array(sorted(batches), pa.int64())
    ds = dt.to_pyarrow_dataset()
    import pyarrow.dataset as pds

    table = ds.to_table(filter=pds.field("batch_id").isin(ids))
    table = table.cast(pa.schema([f.with_type(_plain(f.type)) for f in table.schema]))
    versions = pa.array([batches[b] for b in ids.to_pylist()], pa.int64())
    idx = pc.index_in(table.column("batch_id"), value_set=ids)
    return table.append_column(VERSION, pc.take(versions, idx))


def check_pane_rows(spec: ViewSpec, rows: pa.Table, path: str) -> None:
    """Refuse rows of another pipeline or of another window function (fixed/sliding shapes)."""
    if rows.num_rows == 0:
        return
    others = pc.unique(
        pc.filter(rows.column("pipeline_id"), pc.not_equal(rows.column("pipeline_id"), spec.name))
    )
    if len(others):
        raise ForeignTable(
            f"pane log at {path} holds rows of pipeline(s) {others.to_pylist()[:3]}, "
            f"not {spec.name!r}"
        )
    bad = window_shape_violations(spec, rows)
    if bad:
        raise ConfigMismatch(
            f"pane log at {path} holds windows that {spec.window_fn} cannot produce "
            f"(e.g. [{bad[0]}, {bad[1]})): it was written with another window function. "
            f"Nothing was written."
        )


def window_shape_violations(spec: ViewSpec, rows: pa.Table) -> tuple[int, int] | None:
    """A window of ``rows`` that the spec's window function cannot produce, or None."""
    from panes.window import GLOBAL_WINDOW
    from panes.windowfns import FixedWindows, GlobalWindows, Sessions, SlidingWindows

    fn = spec.window_fn
    pairs = (
        rows.select(["window_start_us", "window_end_us"])
        .group_by(["window_start_us", "window_end_us"])
        .aggregate([])
    )
    for s, e in zip(pairs.column(0).to_pylist(), pairs.column(1).to_pylist(), strict=True):
        if isinstance(fn, FixedWindows):
            ok = e - s == fn.size and (s - fn.offset) % fn.size == 0
        elif isinstance(fn, SlidingWindows):
            ok = e - s == fn.size and (s - fn.offset) % fn.period == 0
        elif isinstance(fn, Sessions):
            ok = e - s >= fn.gap
        elif isinstance(fn, GlobalWindows):
            ok = (s, e) == tuple(GLOBAL_WINDOW)
        else:
            return None
        if not ok:
            return s, e
    return None


# -- the reference reducer (Python) ------------------------------------------------------------


def _acc_of(spec: ViewSpec, name: str, value: Any) -> Any:
    fn = spec.fns[name]
    if isinstance(fn, ToList):
        return tuple(value or ())
    return value


def value_mergeable(spec: ViewSpec) -> list[str]:
    """Aggregates whose pane values are not their accumulators (discarding cannot fold them
    from the pane log's value columns alone: it merges the ``accumulator`` column instead)."""
    return [n for n, fn in spec.aggregates if not fn.value_is_accumulator]


def needs_accumulators(spec: ViewSpec) -> bool:
    """Whether folding merges accumulators (discarding mode with a not value-mergeable
    aggregate) rather than the value columns."""
    return spec.mode is AccumulationMode.DISCARDING and bool(value_mergeable(spec))


def _no_accumulator_text(spec: ViewSpec, path: str) -> str:
    return (
        f"discarding mode cannot fold {', '.join(value_mergeable(spec))} from the pane log at "
        f"{path}: its rows carry the aggregate's value, not its accumulator (a mean needs sum and "
        f"count), and it has no accumulator column (written before panestore recorded "
        f"accumulators). Nothing was written. Only sum, count, min, max and to_list fold from "
        f"such a pane log: use accumulating mode for these aggregates, add sum/count aggregates, "
        f"or rerun the pipeline into a new lake directory."
    )


def _part_accumulator(spec: ViewSpec, part: Mapping[str, Any]) -> Any:
    text = part.get(ACCUMULATOR)
    if text is None:
        raise LakeError(
            f"a pane-log row (or view row) of pipeline {spec.name!r} has no accumulator, "
            f"which discarding mode needs to fold {', '.join(value_mergeable(spec))}. Nothing "
            f"was written; rebuild the view (`panestore materialize --rebuild`)."
        )
    return accumulator_from_json(spec.combine_fn, text)


def _merge_accumulators(spec: ViewSpec, parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge the parts' accumulators with the pipeline's combiner: the value columns and the
    merged ``accumulator``."""
    fn = spec.combine_fn
    assert fn is not None
    accs = [_part_accumulator(spec, p) for p in parts]
    merged = accs[0] if len(accs) == 1 else fn.merge(accs)
    out = spec.values_of(fn.extract(merged))
    out[ACCUMULATOR] = accumulator_json(merged)
    return out


def _merge_values(spec: ViewSpec, parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if needs_accumulators(spec):
        return _merge_accumulators(spec, parts)
    out = {}
    for name, fn in spec.aggregates:
        accs = [_acc_of(spec, name, p[name]) for p in parts]
        merged = accs[0] if len(accs) == 1 else fn.merge(accs)
        out[name] = fn.extract(merged)
    return out


def _window_list(ws: Iterable[tuple[int, int]]) -> list[dict[str, int]]:
    return [{"start_us": s, "end_us": e} for s, e in ws]


class Reducer:
    """Applies pane rows to view rows of the keys they touch (the Python reference reducer).

    ``live``: (key tuple, (start, end)) -> view row dict, the view rows of the touched keys before
    the panes. After :meth:`apply`, :meth:`changes` gives the rows to upsert and the windows to
    delete relative to the rows given at the start.
    """

    def __init__(self, spec: ViewSpec, live: Mapping[tuple, dict[str, Any]] | None = None):
        self.spec = spec
        self.discarding = spec.mode is AccumulationMode.DISCARDING
        self.accumulators = needs_accumulators(spec)
        self.live: dict[tuple, dict[str, Any]] = dict(live or {})
        self.initial = set(self.live)
        self.owner: dict[tuple, tuple] = {}
        for at, row in self.live.items():
            for a in row.get("absorbed") or ():
                self.owner[(at[0], (a["start_us"], a["end_us"]))] = at
        self.retracted: dict[tuple, int] = {}
        self.changed: set[tuple] = set()

    def _root(self, at: tuple) -> tuple:
        seen = set()
        while at in self.owner and at not in seen:
            seen.add(at)
            at = self.owner[at]
        return at

    def _row(
        self,
        key: tuple,
        w: tuple[int, int],
        pane: Mapping[str, Any],
        values: Mapping,
        absorbed: list[tuple[int, int]],
        version: int,
    ) -> dict[str, Any]:
        row = dict(zip(self.spec.keys, key, strict=True))
        row.update(window_start_us=w[0], window_end_us=w[1])
        row.update(values)
        row.update(
            pane_index=pane["pane_index"],
            timing=pane["timing"],
            is_last=pane["is_last"],
            timestamp_us=pane["timestamp_us"],
            pane_log_version=version,
            absorbed=_window_list(absorbed),
        )
        return row

    def apply(self, panes: Iterable[Mapping[str, Any]]) -> None:
        spec = self.spec
        names = spec.value_names
        for p in panes:
            key = tuple(p[k] for k in spec.keys)
            w = (p["window_start_us"], p["window_end_us"])
            at = (key, w)
            idx = p["pane_index"]
            version = p.get(VERSION, 0)
            if p["is_retraction"]:
                if at in self.owner:
                    continue
                self.retracted[at] = max(self.retracted.get(at, -1), idx)
                row = self.live.get(at)
                if row is not None and row["pane_index"] <= idx:
                    del self.live[at]
                    self.changed.discard(at)
                continue
            absorbed_rows: list[dict[str, Any]] = []
            new_abs: list[tuple[int, int]] = []
            for s in p.get("supersedes") or ():
                sw = (s["start_us"], s["end_us"])
                sat = (key, sw)
                if sw == w:
                    continue
                new_abs.append(sw)
                srow = self.live.pop(sat, None)
                if srow is not None:
                    self.changed.discard(sat)
                    absorbed_rows.append(srow)
                    new_abs.extend((a["start_us"], a["end_us"]) for a in srow["absorbed"] or ())
            values = {n: p[n] for n in names}
            if self.accumulators:
                values[ACCUMULATOR] = p.get(ACCUMULATOR)
            root = self._root(at)
            if root != at:  # the window was absorbed earlier: its pane belongs to the absorber
                for sw in new_abs:
                    self.owner[(key, sw)] = root
                target = self.live.get(root)
                if target is None:
                    continue
                target["absorbed"] = _window_list(
                    _dedup([(a["start_us"], a["end_us"]) for a in target["absorbed"]] + new_abs)
                )
                if self.discarding:
                    merged = _merge_values(spec, [target, *absorbed_rows, values])
                    target.update(merged)
                    target["pane_log_version"] = max(target["pane_log_version"], version)
                self.changed.add(root)
                continue
            row = self.live.get(at)
            old_abs = [(a["start_us"], a["end_us"]) for a in row["absorbed"]] if row else []
            absorbed = _dedup(old_abs + new_abs)
            for sw in new_abs:
                self.owner[(key, sw)] = at
            if self.discarding:
                parts = [*absorbed_rows, *([row] if row else []), values]
                merged = _merge_values(spec, parts)
                if row is not None and row["pane_index"] > idx:
                    new = dict(row)
                    new.update(merged)
                    new["absorbed"] = _window_list(absorbed)
                    new["pane_log_version"] = max(row["pane_log_version"], version)
                else:
                    vers = max([version] + ([row["pane_log_version"]] if row else []))
                    new = self._row(key, w, p, merged, absorbed, vers)
            else:
                stale = (row is not None and row["pane_index"] >= idx) or (
                    self.retracted.get(at, -1) >= idx
                )
                if stale:
                    if row is not None and new_abs:
                        row["absorbed"] = _window_list(absorbed)
                        self.changed.add(at)
                    continue
                new = self._row(key, w, p, values, absorbed, version)
            self.live[at] = new
            self.changed.add(at)

    def changes(self) -> tuple[list[dict[str, Any]], list[tuple]]:
        upserts = [self.live[at] for at in self.changed if at in self.live]
        deletes = [at for at in self.initial if at not in self.live]
        return upserts, deletes


def _dedup(ws: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return sorted(set(ws))


def fold_rows(spec: ViewSpec, panes: pa.Table | Iterable[Mapping[str, Any]]) -> dict[tuple, dict]:
    """The view (``{(key tuple, (start, end)): row}``) of pane rows folded from nothing."""
    rows = panes.to_pylist() if isinstance(panes, pa.Table) else list(panes)
    rows.sort(key=lambda r: r.get(VERSION, 0))  # stable: keeps the log order within a version
    red = Reducer(spec)
    red.apply(rows)
    return red.live


# -- the vectorized reducer (DuckDB), non-merging window functions ------------------------------


def fast_path_ok(spec: ViewSpec, rows: pa.Table) -> bool:
    if spec.window_fn.is_merging:
        return False
    if spec.mode is AccumulationMode.DISCARDING and any(
        not isinstance(fn, (Sum, Count, Min, Max)) for _, fn in spec.aggregates
    ):
        return False
    return not (rows.num_rows and pc.max(pc.list_value_length(rows.column("supersedes"))).as_py())


def reduce_vectorized(spec: ViewSpec, rows: pa.Table) -> pa.Table:
    """One change per (key, window) of non-merging panes, in SQL (DuckDB over Arrow)."""
    import duckdb

    group = ", ".join([*map(_q, spec.keys), "window_start_us", "window_end_us"])
    vals = [_q(v) for v in spec.value_names]
    meta = "pane_index, timing, is_last, timestamp_us"
    con = duckdb.connect()
    con.register(
        "t",
        rows.drop_columns(
            [
                c
                for c in rows.column_names
                if c in ("supersedes", "timestamp", "window_start", "window_end")
            ]
        ),
    )
    if spec.mode is AccumulationMode.DISCARDING:
        aggs = []
        for name, fn in spec.aggregates:
            f = "sum" if isinstance(fn, (Sum, Count)) else "min" if isinstance(fn, Min) else "max"
            aggs.append(f"{f}({_q(name)}) AS {_q(name)}")
        sql = f"""
            SELECT {group}, {", ".join(aggs)}, max(pane_index) AS pane_index,
                   arg_max(timing, pane_index) AS timing, arg_max(is_last, pane_index) AS is_last,
                   arg_max(timestamp_us, pane_index) AS timestamp_us,
                   max({VERSION}) AS pane_log_version, '{UPSERT}' AS {OP}
            FROM t GROUP BY ALL"""
    else:
        latest = f"""
            SELECT {group}, {", ".join(vals)}, {meta}, {VERSION} AS pane_log_version
            FROM t WHERE NOT is_retraction
            QUALIFY row_number() OVER (PARTITION BY {group}
                                       ORDER BY pane_index DESC, {VERSION} DESC) = 1"""
        if spec.mode is AccumulationMode.ACCUMULATING:
            sql = f"SELECT *, '{UPSERT}' AS {OP} FROM ({latest})"
        else:
            nulls = ", ".join(f"NULL AS {v}" for v in vals)
            sql = f"""
                WITH p AS ({latest}),
                r AS (SELECT {group}, max(pane_index) AS ridx, max({VERSION}) AS rv
                      FROM t WHERE is_retraction GROUP BY ALL)
                SELECT p.*, '{UPSERT}' AS {OP} FROM p LEFT JOIN r USING ({group})
                WHERE r.ridx IS NULL OR p.pane_index > r.ridx
                UNION ALL BY NAME
                SELECT {group}, {nulls}, r.ridx AS pane_index, NULL AS timing, NULL AS is_last,
                       NULL AS timestamp_us, r.rv AS pane_log_version, '{DELETE}' AS {OP}
                FROM r LEFT JOIN p USING ({group})
                WHERE p.pane_index IS NULL OR p.pane_index <= r.ridx"""
    out = con.sql(sql).to_arrow_table()
    con.close()
    return out


# -- change tables and MERGE --------------------------------------------------------------------


def change_table(schema: pa.Schema, table: pa.Table) -> pa.Table:
    """``table`` (view columns, some missing, plus ``_op``) in the view schema plus ``_op``."""
    if "absorbed" not in table.column_names:
        table = table.append_column(
            "absorbed", pa.array([[]] * table.num_rows, pa.list_(WINDOW_REF))
        )
    table = with_view_derived(table)
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
    rows = [dict(r, **{OP: UPSERT}) for r in upserts]
    for key, (s, e) in deletes:
        row = dict(zip(keys, key, strict=True))
        row.update(window_start_us=s, window_end_us=e, pane_index=0, pane_log_version=0)
        row[OP] = DELETE
        rows.append(row)
    fields = [f.with_nullable(True) for f in schema] + [pa.field(OP, pa.string())]
    return with_view_derived(pa.Table.from_pylist(rows, schema=pa.schema(fields)))


def with_view_derived(table: pa.Table) -> pa.Table:
    """``table`` with the view's derived columns set: the timestamps of the ``*_us`` columns
    and ``window_day``, the UTC date of ``window_start`` (null when it is not a timestamp)."""
    table = with_timestamps(table)
    day = table.column("window_start").cast(pa.date32())
    if WINDOW_DAY in table.column_names:
        return table.set_column(table.column_names.index(WINDOW_DAY), WINDOW_DAY, day)
    return table.append_column(WINDOW_DAY, day)


def days_filter(dt, changes: pa.Table) -> str | None:
    """``t.window_day IN (...)`` naming the days of ``changes``, for a view partitioned by
    ``window_day`` (None: not partitioned so, or too many days to name)."""
    if WINDOW_DAY not in (dt.metadata().partition_columns or ()):
        return None
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
    parts = [f"t.{_q(k)} = s.{_q(k)}" for k in spec.keys]
    parts += ["t.window_start_us = s.window_start_us", "t.window_end_us = s.window_end_us"]
    return " AND ".join(parts)


def _combine_expr(fn: Any, col: str) -> str:
    t, s = f"t.{col}", f"s.{col}"
    if isinstance(fn, (Sum, Count)):
        return f"{t} + {s}"
    op = "<" if isinstance(fn, Min) else ">"
    return (
        f"CASE WHEN {t} IS NULL THEN {s} WHEN {s} IS NULL THEN {t} "
        f"WHEN {s} {op} {t} THEN {s} ELSE {t} END"
    )


def merge_changes(dt, spec: ViewSpec, changes: pa.Table, style: str, commit_properties) -> dict:
    """Apply a change table in one MERGE commit. ``style``: ``replace`` (rows are final),
    ``latest`` (keep the higher pane index; deletes name the retracted index) or ``combine``
    (discarding: merge values into the row)."""
    names = [n for n in changes.column_names if n != OP]
    all_cols = {_q(n): f"s.{_q(n)}" for n in names}
    predicate = _merge_predicate(spec)
    days = days_filter(dt, changes)
    if days is not None:  # each change's window is on its own day: no match is lost
        predicate = f"{predicate} AND {days}"
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
        upd = {_q(n): _combine_expr(fn, _q(n)) for n, fn in spec.aggregates}
        newer = "s.pane_index > t.pane_index"
        for n in ("pane_index", "timing", "is_last", "timestamp_us", "timestamp"):
            upd[_q(n)] = f"CASE WHEN {newer} THEN s.{_q(n)} ELSE t.{_q(n)} END"
        upd['"pane_log_version"'] = (
            "CASE WHEN s.pane_log_version > t.pane_log_version "
            "THEN s.pane_log_version ELSE t.pane_log_version END"
        )
        m = m.when_matched_update(upd)
    else:  # pragma: no cover
        raise ValueError(style)
    m = m.when_not_matched_insert(all_cols, f"s.{OP} = '{UPSERT}'")
    return m.execute()


# -- the materializer ---------------------------------------------------------------------------


@dataclass
class MaterializeResult:
    folded_from: int | None  # first pane-log version folded (None: nothing to do)
    folded_to: int | None  # last pane-log version folded
    pane_rows: int = 0
    changes: int = 0
    view_version: int | None = None
    path: str = ""  # "python" | "vectorized" | "" (nothing)
    metrics: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    seconds: float = 0.0

    @property
    def did_work(self) -> bool:
        return self.folded_to is not None

    def line(self) -> str:
        if not self.did_work:
            return "materialize: the current view is up to date"
        m = self.metrics
        return (
            f"materialize: folded pane-log versions {self.folded_from}..{self.folded_to} "
            f"({self.pane_rows} pane rows -> {self.changes} changes: "
            f"{m.get('num_target_rows_inserted', 0)} inserted, "
            f"{m.get('num_target_rows_updated', 0)} updated, "
            f"{m.get('num_target_rows_deleted', 0)} deleted) into view version "
            f"{self.view_version} in {self.seconds:.2f}s"
        )


class Lock:
    """A lock file ``<lake>/_control/materializer.lock`` (local lakes): one materializer at a
    time. A lock left by a dead process on this host is taken over."""

    def __init__(self, spec: ViewSpec) -> None:
        self.path = os.path.join(spec.control_path, "materializer.lock")
        self.enabled = is_local(spec.lake)
        self.held = False

    def __enter__(self) -> Lock:
        if not self.enabled:
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is not None and self._alive(holder):
                    since = time.strftime(
                        "%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0))
                    )
                    raise MaterializerBusy(
                        f"another materializer is running (pid {holder.get('pid')} on "
                        f"{holder.get('host')}, since {since}; lock {self.path}). Nothing was "
                        f"written; retry when it has finished."
                    ) from None
                with contextlib.suppress(FileNotFoundError):  # stale lock: take it over
                    os.unlink(self.path)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return self
        raise MaterializerBusy(f"could not take the materializer lock {self.path}")

    def _holder(self) -> dict | None:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    @staticmethod
    def _alive(holder: Mapping[str, Any]) -> bool:
        if holder.get("host") != socket.gethostname():
            return True  # cannot tell: assume it runs
        try:
            os.kill(int(holder.get("pid", -1)), 0)
        except ProcessLookupError:
            return False
        except (PermissionError, ValueError, TypeError):
            return True
        return True

    def __exit__(self, *exc: Any) -> None:
        if self.held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self.held = False


class Materializer:
    """Folds the pane log of a pipeline (a ``ViewSpec`` or a ``Pipeline``) into ``current``.

    ``vectorized``: None (default) uses the DuckDB reducer when it applies (non-merging window
    function); False forces the Python reducer. ``max_versions`` bounds how many pane-log
    versions one run folds (None: all). ``hook(point)`` is called at ``"before_merge"`` and
    ``"after_merge"`` (tests simulate crashes there).
    """

    def __init__(
        self,
        pipeline: Any,
        *,
        vectorized: bool | None = None,
        max_versions: int | None = None,
        hook: Any = None,
    ) -> None:
        self.spec = as_spec(pipeline)
        self.vectorized = vectorized
        self.max_versions = max_versions
        self.hook = hook

    def folded_version(self) -> int | None:
        """The last pane-log version folded into the view (None: none yet / no view)."""
        try:
            dt = open_view(self.spec)
        except TableMissing:
            return None
        return dt.transaction_version(self.spec.app_id)

    def run(self, *, upto: int | None = None) -> MaterializeResult:
        from deltalake.exceptions import CommitFailedError

        t0 = time.perf_counter()
        with Lock(self.spec):
            for attempt in range(RETRIES):
                try:
                    result = self._run_once(upto)
                except CommitFailedError:
                    if attempt == RETRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
                    continue
                result.retries = attempt
                result.seconds = time.perf_counter() - t0
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_once(self, upto: int | None) -> MaterializeResult:
        from deltalake import CommitProperties, Transaction, write_deltalake

        spec = self.spec
        panes = open_pane_log(spec)
        accs = needs_accumulators(spec)
        if accs and ACCUMULATOR not in arrow_schema(panes).names:
            raise LakeError(_no_accumulator_text(spec, spec.table_path("panes")))
        latest = panes.version()
        if upto is not None:
            latest = min(latest, upto)
        view = open_view(spec, arrow_schema(panes), create=True)
        if accs and ACCUMULATOR not in arrow_schema(view).names:
            raise LakeError(
                f"the current view at {spec.table_path('current')} has no accumulator column, "
                f"which discarding mode needs to fold {', '.join(value_mergeable(spec))}. Nothing "
                f"was written; rebuild the view (`panestore materialize --rebuild`)."
            )
        done = view.transaction_version(spec.app_id)
        after = -1 if done is None else done
        if self.max_versions is not None:
            latest = min(latest, after + self.max_versions)
        if latest <= after:
            return MaterializeResult(None, None)
        if latest != panes.version():
            panes.load_as_version(latest)
        commits = pane_log_commits(panes, after, latest)
        rows = read_pane_rows(panes, commits)
        check_pane_rows(spec, rows, spec.table_path("panes"))
        schema = arrow_schema(view)
        props = CommitProperties(
            app_transactions=[Transaction(spec.app_id, latest)],
            custom_metadata={
                FOLDED_VERSION_METADATA: str(latest),
                FOLDED_FROM_METADATA: str(after + 1),
                KIND_PROPERTY: "current",
                PIPELINE_PROPERTY: spec.name,
            },
        )
        result = MaterializeResult(after + 1, latest, pane_rows=rows.num_rows)
        use_fast = self.vectorized is not False and fast_path_ok(spec, rows)
        if rows.num_rows == 0:
            changes, style = None, ""
        elif use_fast:
            reduced = reduce_vectorized(spec, rows)
            changes = change_table(schema, reduced)
            style = "combine" if spec.mode is AccumulationMode.DISCARDING else "latest"
            result.path = "vectorized"
        else:
            changes = self._python_changes(view, schema, rows)
            style = "replace"
            result.path = "python"
        if self.hook:
            self.hook("before_merge")
        if changes is None or changes.num_rows == 0:
            write_deltalake(view, schema.empty_table(), mode="append", commit_properties=props)
        else:
            result.changes = changes.num_rows
            result.metrics = merge_changes(view, spec, changes, style, props)
        view.update_incremental()
        result.view_version = view.version()
        if self.hook:
            self.hook("after_merge")
        return result

    def _python_changes(self, view, schema: pa.Schema, rows: pa.Table) -> pa.Table:
        spec = self.spec
        live = load_view_rows(view, spec, rows)
        red = Reducer(spec, live)
        pane_rows = rows.to_pylist()
        pane_rows.sort(key=lambda r: r[VERSION])
        red.apply(pane_rows)
        upserts, deletes = red.changes()
        return rows_change_table(schema, upserts, deletes, spec.keys)


def load_view_rows(view, spec: ViewSpec, rows: pa.Table) -> dict[tuple, dict[str, Any]]:
    """The view rows of the keys in ``rows``: {(key tuple, (start, end)): row}."""
    if rows.num_rows == 0:
        return {}
    k0 = spec.keys[0]
    # (no filter pushdown: delta-rs datasets read strings as string_view, which pyarrow cannot
    # compare with the parquet statistics; the view is read and filtered in memory)
    table = view.to_pyarrow_dataset().to_table()
    table = table.cast(pa.schema([f.with_type(_plain(f.type)) for f in table.schema]))
    table = table.filter(pc.is_in(table.column(k0), value_set=pc.unique(rows.column(k0))))
    wanted = {tuple(r) for r in zip(*(rows.column(k).to_pylist() for k in spec.keys), strict=True)}
    out = {}
    for r in table.to_pylist():
        key = tuple(r[k] for k in spec.keys)
        if key in wanted:
            out[(key, (r["window_start_us"], r["window_end_us"]))] = r
    return out


def materialize(pipeline: Any, **kw: Any) -> MaterializeResult:
    """Fold what is new in the pane log into ``current`` (see :class:`Materializer`)."""
    return Materializer(pipeline, **kw).run()


__all__ = [
    "FIXED_NAMES",
    "Materializer",
    "MaterializeResult",
    "Reducer",
    "fold_rows",
    "materialize",
    "open_pane_log",
    "open_view",
]
