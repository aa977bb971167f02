"""DuckDB over the lake: views, history, output formats, time travel."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, FixedWindows, Sessions
from sinks.fold.materializer import Materializer
from sinks.lake.tables import open_view
from tests.sinks.lakes import (
    S,
    chunked,
    materialized_lake,
    random_run,
    view_dict,
    write_batches,
)


@pytest.mark.heavy
def test_duckdb_views_history_and_output_formats(tmp_path):
    from sinks.presentation import duck

    run = materialized_lake(
        tmp_path, 6, window_fn=Sessions(10 * S), mode=AccumulationMode.ACCUMULATING_AND_RETRACTING
    )
    con = duck.connect(run.spec)
    n = con.sql("SELECT count(*) FROM current").fetchone()[0]
    assert n == len(run.expected())
    assert con.sql("SELECT count(*) FROM panes").fetchone()[0] == len(run.panes)
    assert con.sql("SELECT count(*) FROM late").fetchone()[0] == len(run.dropped)
    csv = duck.query(run.spec, "SELECT * EXCLUDE (absorbed) FROM current", fmt="csv")
    assert csv.count("\n") == n + 1
    out = str(tmp_path / "c.parquet")
    duck.query(run.spec, "SELECT * FROM current", fmt="parquet", out=out)
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == n
    text = duck.history(run.spec, next(iter(run.expected()))[0][0])
    assert "retract" in text or "emit" in text


@pytest.mark.heavy
def test_time_travel_by_view_version_pane_log_version_and_time(tmp_path):
    from sinks.presentation.duck import connect, current_as_of

    run = random_run(
        4, str(tmp_path), mode=AccumulationMode.ACCUMULATING, window_fn=FixedWindows(10 * S)
    )
    batches = chunked(run, random.Random(4))
    mat = Materializer(run.spec)
    seen = []
    for i, b in enumerate(batches):
        write_batches(run, [b], start=i)
        mat.run()
        dt = open_view(run.spec)
        seen.append((dt.version(), dt.transaction_version(run.spec.app_id), view_dict(run.spec)))
    for view_version, pane_version, snapshot in seen:
        assert view_dict(run.spec, current_as_of(run.spec, view_version)) == snapshot
        assert view_dict(run.spec, current_as_of(run.spec, f"folded:{pane_version}")) == snapshot
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    assert view_dict(run.spec, current_as_of(run.spec, now.isoformat())) == seen[-1][2]
    con = connect(run.spec, as_of=f"view:{seen[0][0]}")
    assert con.sql("SELECT count(*) FROM current").fetchone()[0] == len(seen[0][2])
