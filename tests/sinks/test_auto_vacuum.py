"""Automatic vacuum (sinks.upkeep.auto_vacuum): the fold and the run vacuum each table once a day,
with the table's own retention (time travel inside it keeps working); a failure is a warning."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from sinks.fold.materializer import Materializer
from sinks.lake.records import LateLog
from sinks.lake.run_history import SUCCEEDED, RunRecord, append_run
from sinks.lake.tables import existing_table
from sinks.upkeep import auto_vacuum, compaction, maintenance
from sinks.upkeep.auto_vacuum import VACUUM_EVERY_S, last_vacuum, vacuum_after_run
from tests.sinks.lakes import S, view_dict
from tests.sinks.test_compaction import hourly_run, pane_log, rows_by_version

T0 = 1_800_000_000.0
HOUR = 3600.0


def disk_files(path: str) -> int:
    """The data files in a table's folder (referenced or not; the log and the change feed's
    files excluded)."""
    return sum(
        name.endswith(".parquet")
        for folder, _, names in os.walk(path)
        if "_delta_log" not in folder and "_change_data" not in folder
        for name in names
    )


def live_files(dt) -> int:
    return pa.table(dt.get_add_actions(flatten=True)).num_rows


@pytest.mark.heavy
def test_the_fold_vacuums_the_view_once_a_day_from_its_first_fold(tmp_path, monkeypatch):
    """Regression: before automatic vacuum, the files compaction replaced stayed on disk."""
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 2)  # (compact often)
    now = [T0]
    monkeypatch.setattr(auto_vacuum, "clock", lambda: now[0])
    run = hourly_run(str(tmp_path), 14)
    log = pane_log(run)
    mat = Materializer(run.spec)
    path = run.spec.table_path("current")
    vacuums = []
    for i, step in enumerate(run.steps):
        now[0] = T0 + i * 2 * HOUR  # a fold every two hours
        log.append(i, step)
        if i == 1:  # a table whose retention has passed for every replaced file
            props = {"delta.deletedFileRetentionDuration": "interval 0 hours"}
            existing_table(run.spec, "current").alter.set_table_properties(props)
        result = mat.run()
        assert result.did_work
        if i == 0:  # the first fold starts the clock: nothing is old yet
            assert result.vacuum is None and last_vacuum(run.spec, "current") == T0
        if result.vacuum is not None:
            assert not result.vacuum.error, result.vacuum
            assert "vacuumed current" in result.line()
            vacuums.append((i, result.vacuum))
            assert last_vacuum(run.spec, "current") == now[0]  # the clock restarts
            # the replaced files are gone: what is on disk is what the view reads
            assert disk_files(path) == live_files(existing_table(run.spec, "current"))
    # due only once more than a day has passed since the last: hours 26 and 52
    assert len(run.steps) < 39 and [i for i, _ in vacuums] == [13, 26]
    assert vacuums[0][1].deleted > 0 and vacuums[0][1].retention_hours == 0
    assert view_dict(run.spec) == run.expected()  # the view stays right, fold after fold


@pytest.mark.heavy
def test_a_run_vacuums_its_tables_once_a_day_keeping_time_travel(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 2)
    run = hourly_run(str(tmp_path), 4)
    log = pane_log(run)
    late = LateLog(run.spec.table_path("late"), run.spec.name, run.layout)
    for i, step in enumerate(run.steps):
        assert log.append(i, step) and late.append(
            i, [{"key": "k0", "timestamp_us": i, "reason": "late"}]
        )
        append_run(run.spec, RunRecord(f"r{i}", run.spec.name, i * S, i * S + 1, SUCCEEDED))
    # a compaction per table, so that every table has files only old versions need
    assert {c.table for c in compaction.compact_after_run(run.spec, {})} == {
        "panes",
        "late",
        "runs",
    }
    # a file no commit references, as an attempt that died leaves (the full vacuum's)
    live = pa.table(existing_table(run.spec, "panes").get_add_actions(flatten=True))
    folder = os.path.dirname(live.column("path")[0].as_py())  # (a partition's)
    stray = os.path.join(run.spec.table_path("panes"), folder, "part-00000-stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"PAR1")
    month_ago = time.time() - 30 * 24 * HOUR  # (delta-rs's clock is the real one)
    os.utime(stray, (month_ago, month_ago))
    tables = ("panes", "late", "runs")
    before = {t: rows_by_version(run.spec.table_path(t)) for t in tables}
    files = {t: disk_files(run.spec.table_path(t)) for t in tables}

    assert vacuum_after_run(run.spec, now=T0) == []  # the first run starts the clocks
    assert {t: last_vacuum(run.spec, t) for t in (*tables, "rejected", "current")} == {
        **dict.fromkeys(tables, T0),
        "rejected": None,  # no such table: no clock
        "current": None,  # the fold's
    }
    assert vacuum_after_run(run.spec, now=T0 + VACUUM_EVERY_S) == []  # a day, not more
    assert os.path.exists(stray)

    done = {v.table: v for v in vacuum_after_run(run.spec, now=T0 + VACUUM_EVERY_S + 1)}
    assert set(done) == set(tables)
    for name, v in done.items():
        assert not v.error and v.retention_hours == 168, v  # the table's own retention
        assert last_vacuum(run.spec, name) == T0 + VACUUM_EVERY_S + 1
    assert not os.path.exists(stray)  # older than the retention, never committed: deleted
    assert done["panes"].deleted == 1 and done["late"].deleted == done["runs"].deleted == 0
    # every version inside the retention (all of them here) reads the same rows; the vacuum's
    # own commits (VACUUM START, END) change none
    for t in tables:
        after = rows_by_version(run.spec.table_path(t))
        assert {v: after[v] for v in before[t]} == before[t]
        assert all(after[v] == after[len(before[t]) - 1] for v in after if v >= len(before[t]))
    # the files replaced inside the retention stay; the stray is gone
    assert {t: disk_files(run.spec.table_path(t)) for t in tables} == {
        **files,
        "panes": files["panes"] - 1,
    }
    # the clocks restarted: nothing is due an hour later
    assert vacuum_after_run(run.spec, now=T0 + VACUUM_EVERY_S + HOUR) == []


@pytest.mark.heavy
def test_a_failed_vacuum_is_a_warning_and_is_tried_again(tmp_path, monkeypatch):
    now = [T0]
    monkeypatch.setattr(auto_vacuum, "clock", lambda: now[0])
    run = hourly_run(str(tmp_path), 3)
    log = pane_log(run)
    mat = Materializer(run.spec)
    log.append(0, run.steps[0])
    assert mat.run().vacuum is None  # the clock starts

    def broken(*args, **kwargs):
        raise OSError("Permission denied")

    monkeypatch.setattr(maintenance, "vacuum", broken)
    now[0] = T0 + 2 * VACUUM_EVERY_S
    log.append(1, run.steps[1])
    result = mat.run()
    assert result.did_work and result.view_version is not None  # the fold committed
    assert result.vacuum is not None and result.vacuum.error
    assert "WARNING vacuum of current failed (Permission denied)" in result.line()
    assert last_vacuum(run.spec, "current") == T0  # not reset: the next fold tries again
    monkeypatch.undo()
    monkeypatch.setattr(auto_vacuum, "clock", lambda: now[0])
    for i in range(2, len(run.steps)):
        log.append(i, run.steps[i])
    again = mat.run()
    assert again.vacuum is not None and not again.vacuum.error
    assert last_vacuum(run.spec, "current") == now[0]
    assert view_dict(run.spec) == run.expected()


@pytest.mark.heavy
def test_a_fold_behind_by_more_than_the_retention_folds_right_after_a_vacuum(tmp_path, monkeypatch):
    """The fold reads the pane log's newest snapshot (live files) and the log entries of the
    versions it has not folded, neither of which a vacuum deletes."""
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 2)
    run = hourly_run(str(tmp_path), 12)
    log = pane_log(run)
    log.append(0, run.steps[0])
    first = Materializer(run.spec).run()  # the view, folded up to the first batch only
    for i in range(1, len(run.steps)):
        log.append(i, run.steps[i])
        if i % 4 == 0:  # compacted now and then: files only old versions need
            compaction.compact_after_run(run.spec, {})
    props = {"delta.deletedFileRetentionDuration": "interval 0 hours"}  # all of it expired
    existing_table(run.spec, "panes").alter.set_table_properties(props)
    assert vacuum_after_run(run.spec, now=T0) == []
    (done,) = vacuum_after_run(run.spec, now=T0 + 2 * VACUUM_EVERY_S)
    assert done.table == "panes" and done.deleted > 0 and not done.error
    panes = run.spec.table_path("panes")
    assert disk_files(panes) == live_files(existing_table(run.spec, "panes"))
    result = Materializer(run.spec).run()
    assert first.folded_to is not None and result.folded_from == first.folded_to + 1
    assert view_dict(run.spec) == run.expected()
