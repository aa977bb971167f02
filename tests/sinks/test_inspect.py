"""verify, DuckDB views, history, time travel, plot, maintenance and error handling."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, FixedWindows, Sessions, SlidingWindows, combiners
from sinks.errors import ConfigMismatch, ForeignTable, MaterializerBusy, TableMissing
from sinks.materializer import Materializer
from sinks.records import LateLog
from sinks.tables import open_view
from tests.sinks.lakes import MODES, S, chunked, random_run, view_dict, window_fns, write_batches


def lake(tmp_path, seed=1, **kw):
    run = random_run(seed, str(tmp_path), **kw)
    write_batches(run, chunked(run, random.Random(seed)))
    LateLog(run.spec.table_path("late"), run.spec.name, run.layout).append(0, run.dropped)
    Materializer(run.spec).run()
    return run


@pytest.mark.parametrize("seed", range(8))
def test_verify_passes_on_random_pipelines_and_fails_on_a_tampered_view(tmp_path, seed):
    from sinks.verify import verify

    run = lake(tmp_path, seed, mode=MODES[seed % 3], window_fn=window_fns()[seed % 4])
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    if seed == 0:
        dt = open_view(run.spec)
        k = run.spec.value_names[0]
        dt.update({k: f"{k} + 1"})
        bad = verify(run.spec, elements=run.elements)
        assert not bad.ok and "differs" in str(bad)


def test_duckdb_views_history_and_output_formats(tmp_path):
    from sinks import duck

    run = lake(
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


def test_time_travel_by_view_version_pane_log_version_and_time(tmp_path):
    from sinks.duck import connect, current_as_of

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
        assert view_dict(run.spec, current_as_of(run.spec, f"panes:{pane_version}")) == snapshot
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    assert view_dict(run.spec, current_as_of(run.spec, now.isoformat())) == seen[-1][2]
    con = connect(run.spec, as_of=f"view:{seen[0][0]}")
    assert con.sql("SELECT count(*) FROM current").fetchone()[0] == len(seen[0][2])


def test_errors_leave_tables_untouched(tmp_path):
    run = lake(tmp_path, 2, mode=AccumulationMode.DISCARDING, window_fn=FixedWindows(10 * S))
    v = open_view(run.spec).version()
    with pytest.raises(TableMissing, match="pane log not found"):
        Materializer(replace(run.spec, lake=str(tmp_path / "nowhere"))).run()
    (tmp_path / "foreign" / "panes").mkdir(parents=True)
    (tmp_path / "foreign" / "panes" / "x.csv").write_text("a,b\n")
    with pytest.raises(ForeignTable, match="not a Delta table"):
        Materializer(replace(run.spec, lake=str(tmp_path / "foreign"))).run()
    # another configuration: other window function, other aggregate
    with pytest.raises(ConfigMismatch):
        Materializer(replace(run.spec, window_fn=SlidingWindows(20 * S, 10 * S))).run()
    other = replace(run.spec, aggregates=(("total", combiners.sum()),))
    with pytest.raises(ConfigMismatch, match="other keys or aggregates"):
        Materializer(other).run()
    with pytest.raises(ForeignTable, match="belongs to pipeline"):
        Materializer(replace(run.spec, name="other")).run()
    assert open_view(run.spec).version() == v


def test_a_concurrent_materializer_is_refused(tmp_path):
    import json
    import os
    import socket

    run = random_run(3, str(tmp_path))
    write_batches(run, chunked(run, random.Random(3)))
    os.makedirs(run.spec.control_path, exist_ok=True)
    lock = os.path.join(run.spec.control_path, "materializer.lock")
    with open(lock, "w") as f:  # a live holder: this very process
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "since": 0}, f)
    with pytest.raises(MaterializerBusy, match="another materializer"):
        Materializer(run.spec).run()
    with open(lock, "w") as f:  # a dead holder: taken over
        json.dump({"pid": 2**22 + 12345, "host": socket.gethostname(), "since": 0}, f)
    Materializer(run.spec).run()
    assert view_dict(run.spec) == run.expected()


def test_optimize_and_vacuum_keep_time_travel_and_folding(tmp_path):
    from sinks.duck import current_as_of
    from sinks.errors import LakeError
    from sinks.maintenance import optimize, vacuum

    run = random_run(
        8, str(tmp_path), mode=AccumulationMode.DISCARDING, window_fn=FixedWindows(10 * S)
    )
    batches = chunked(run, random.Random(8))
    half = len(batches) // 2
    write_batches(run, batches[:half])
    Materializer(run.spec).run()
    first = view_dict(run.spec)
    v = open_view(run.spec).version()
    optimize(run.spec)
    write_batches(run, batches[half:], start=half)
    Materializer(run.spec).run()  # skips the OPTIMIZE commits of the pane log
    assert view_dict(run.spec) == run.expected()
    with pytest.raises(LakeError, match="break time travel"):
        vacuum(run.spec, retention_hours=0)
    vacuum(run.spec)  # default retention: nothing recent goes
    assert view_dict(run.spec, current_as_of(run.spec, v)) == first


def test_plot_writes_a_png(tmp_path):
    from sinks.plot import plot

    run = lake(
        tmp_path, 6, window_fn=Sessions(10 * S), mode=AccumulationMode.ACCUMULATING_AND_RETRACTING
    )
    key = next(iter(run.expected()))[0][0]
    out = plot(run.spec, key, str(tmp_path / "k.png"))
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
