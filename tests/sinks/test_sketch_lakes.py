"""Sketch aggregates through the lake: random simulator runs of every window function and
accumulation mode written to a pane log, folded by the materializer, verified (against the pane
log refolded and the batch over the raw events), and read by DuckDB."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")
pytest.importorskip("datasketches")

import pyarrow as pa

from panes import combiners
from sinks.lake.column_types import arrow_type
from tests.sinks.lakes import MODES, materialized_lake, view_dict, window_fns

SKETCHES = {
    "users": (combiners.approx_count_distinct(), "struct<estimate: long, sketch: binary>"),
    "qs": (
        combiners.approx_quantiles(None, [0.5, 0.9]),
        "struct<quantiles: list<double>, sketch: binary>",
    ),
    "p95": (combiners.approx_percentile(None, 0.95), "struct<quantile: double, sketch: binary>"),
    "top": (
        combiners.top_k(None, 2),
        "struct<items: list<struct<item: long, count: long>>, sketch: binary>",
    ),
    "total": (combiners.sum(), "long"),
}


def _lake(tmp_path, seed):
    aggregates = {n: (fn, arrow_type(t)) for n, (fn, t) in SKETCHES.items()}
    return materialized_lake(
        tmp_path,
        seed,
        mode=MODES[seed % 3],
        window_fn=window_fns()[seed % 4],
        aggregates=aggregates,
    )


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(6))
def test_sketch_views_fold_and_verify_in_every_mode_and_window(tmp_path, seed):
    """The view of each window holds the sketch answers of all its elements (exact here: few
    values), whichever mode folded it, and verify agrees; a view whose distinct count is off by
    one is a difference."""
    from sinks.lake.tables import open_view
    from sinks.verification.view_check import final_windows, verify

    run = _lake(tmp_path, seed)
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    final, view, _ = final_windows(
        run.spec, run.expected_batch(), view_dict(run.spec), report.watermark_us
    )
    assert view, "windows were folded"
    for at, row in view.items():
        values = [v for (k, v, ts) in run.elements if (k,) == at[0]]
        assert row["users"]["estimate"] <= len(set(values))
        assert row["users"]["estimate"] == final[at]["users"]["estimate"]
        assert row["qs"]["quantiles"] == final[at]["qs"]["quantiles"]
        assert row["top"]["items"] == final[at]["top"]["items"]
    if seed == 0:
        dt = open_view(run.spec)
        table = dt.to_pyarrow_table()
        rows = table.to_pylist()
        rows[0]["users"] = {**rows[0]["users"], "estimate": rows[0]["users"]["estimate"] + 1}
        from deltalake import write_deltalake

        write_deltalake(dt, pa.Table.from_pylist(rows, schema=table.schema), mode="overwrite")
        bad = verify(run.spec, elements=run.elements)
        assert not bad.ok and "differs" in str(bad)


@pytest.mark.heavy
def test_duckdb_reads_the_sketch_struct_columns(tmp_path):
    """``panestore query``'s DuckDB reads a sketch column's answer and bytes."""
    from sinks.presentation.duck import connect

    run = _lake(tmp_path, 1)
    con = connect(run.spec)
    got = con.sql(
        "SELECT users.estimate, p95.quantile, octet_length(users.sketch) FROM current"
    ).fetchall()
    view = view_dict(run.spec)
    assert sorted(r[0] for r in got) == sorted(v["users"]["estimate"] for v in view.values())
    assert all(r[2] > 0 for r in got)
