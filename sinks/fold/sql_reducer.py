"""The vectorized reducer: one change per (key, window) of non-merging panes, in DuckDB SQL.

It gives the same changes as the reference reducer (:mod:`sinks.fold.reducer`) for non-merging
window functions (fixed, sliding, global) without reading the view: its change table is applied by
the conditional MERGE clauses of :func:`sinks.fold.view_merge.merge_changes` (``latest``: the higher
pane index wins; ``combine``: discarding mode merges values in the MERGE).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from panes.combiners import CombineFn
from panes.windowing import AccumulationMode
from sinks.lake import DELETE, OP, PANE_LOG_VERSION, UPSERT, ViewSpec


def quote_name(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def merge_aggregate(fn: CombineFn) -> str:
    """The SQL aggregate (sum, min, max) that merges ``fn``'s values of parts of a window."""
    form = fn.sql
    if form is None or form.merge is None:
        raise ValueError(f"{fn!r} values do not merge in SQL")
    return form.merge


def vectorized_applies(spec: ViewSpec, rows: pa.Table) -> bool:
    """Whether :func:`reduce_vectorized` folds ``rows``: a non-merging window function, no pane
    superseding a window, and in discarding mode aggregates whose values merge in SQL, none of
    them a decimal sum (the reference reducer sums those exactly and names a window whose sum
    its column cannot hold; DuckDB's and the MERGE's decimal overflow say neither)."""
    if spec.window_fn.is_merging:
        return False
    if spec.mode is AccumulationMode.DISCARDING and any(
        (form := fn.sql) is None
        or form.merge is None
        or (
            form.merge == "sum"
            and name in rows.column_names
            and pa.types.is_decimal(rows.schema.field(name).type)
        )
        for name, fn in spec.aggregates
    ):
        return False
    return not (rows.num_rows and pc.max(pc.list_value_length(rows.column("supersedes"))).as_py())


def reduce_vectorized(spec: ViewSpec, rows: pa.Table) -> pa.Table:
    """One change per (key, window) of non-merging panes, in SQL (DuckDB over Arrow)."""
    import duckdb

    group = ", ".join([*map(quote_name, spec.keys), "window_start_us", "window_end_us"])
    vals = [quote_name(v) for v in spec.value_names]
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
        aggs = [
            f"{merge_aggregate(fn)}({col}) AS {col}"
            for col, fn in ((quote_name(n), fn) for n, fn in spec.aggregates)
        ]
        sql = f"""
            SELECT {group}, {", ".join(aggs)}, max(pane_index) AS pane_index,
                   arg_max(timing, pane_index) AS timing, arg_max(is_last, pane_index) AS is_last,
                   arg_max(timestamp_us, pane_index) AS timestamp_us,
                   max({PANE_LOG_VERSION}) AS pane_log_version, '{UPSERT}' AS {OP}
            FROM t GROUP BY ALL"""
    else:
        latest = f"""
            SELECT {group}, {", ".join(vals)}, {meta}, {PANE_LOG_VERSION} AS pane_log_version
            FROM t WHERE NOT is_retraction
            QUALIFY row_number() OVER (PARTITION BY {group}
                                       ORDER BY pane_index DESC, {PANE_LOG_VERSION} DESC) = 1"""
        if spec.mode is AccumulationMode.ACCUMULATING:
            sql = f"SELECT *, '{UPSERT}' AS {OP} FROM ({latest})"
        else:
            nulls = ", ".join(f"NULL AS {v}" for v in vals)
            sql = f"""
                WITH p AS ({latest}),
                r AS (SELECT {group}, max(pane_index) AS ridx, max({PANE_LOG_VERSION}) AS rv
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
