"""Automatic compaction (sinks.upkeep.compaction): a fold after fold and a run after run keep few
small files, and compaction keeps exactly-once, time travel, the fold and the change feed; a failed
or killed compaction loses nothing."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, AfterWatermark, FixedWindows, Windowing
from sinks.fold.change_feed import read_changes
from sinks.fold.materializer import Materializer
from sinks.lake.pane_log import PaneLog
from sinks.lake.records import LateLog
from sinks.lake.run_history import SUCCEEDED, RunRecord, append_run, read_runs
from sinks.lake.tables import existing_table, open_view, table_identity
from sinks.upkeep import compaction
from sinks.upkeep.compaction import (
    compact_after_run,
    compact_if_due,
    mergeable_small_files,
)
from sinks.upkeep.maintenance import vacuum
from tests.sinks.lakes import Run, S, replay_changes, scripted_run, view_dict, view_rows

ACC = AccumulationMode.ACCUMULATING


def hourly_run(lake: str, steps: int) -> Run:
    """One element per step, each in a new 10 s window closed by the watermark at once: a fold
    per step inserts a row (new files in the view)."""
    script: list = []
    for i in range(steps):
        script += [[(f"k{i % 3}", i, i * 10 * S)], (i + 1) * 10 * S]
    windowing = Windowing(FixedWindows(10 * S), trigger=AfterWatermark(), accumulation_mode=ACC)
    return scripted_run(lake, windowing, script)


def pane_log(run: Run) -> PaneLog:
    identity = table_identity(run.spec, "panes", "pane log")
    return PaneLog(run.spec.table_path("panes"), run.spec.name, run.layout, **identity)


def files(dt) -> int:
    return pa.table(dt.get_add_actions(flatten=True)).num_rows


def rows_by_version(path: str) -> dict[int, list]:
    from deltalake import DeltaTable

    latest = DeltaTable(path).version()
    return {
        v: sorted(map(str, DeltaTable(path, version=v).to_pyarrow_table().to_pylist()))
        for v in range(latest + 1)
    }


@pytest.mark.heavy
def test_folds_keep_the_view_small_and_its_feed_time_travel_and_fold_right(tmp_path, monkeypatch):
    """Regression: before automatic compaction, every fold left its files in the view."""
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 4)  # (the rule as is, sooner)
    run = hourly_run(str(tmp_path), 14)
    log = pane_log(run)
    mat = Materializer(run.spec)
    views, compacted = {}, []
    for i, step in enumerate(run.steps):
        log.append(i, step)
        result = mat.run()
        if result.compaction is not None:
            compacted.append(result.compaction)
            assert not result.compaction.error
            assert "compacted current" in result.line()
        view = open_view(run.spec)
        assert mergeable_small_files(view) <= 4 + 2  # bounded, fold after fold
        views[view.version()] = view_rows(run.spec)
    assert compacted and all(c.added < c.removed for c in compacted)
    assert view_dict(run.spec) == run.expected()
    # every earlier version reads as it was committed (time travel)
    for v, rows in views.items():
        assert view_rows(run.spec, version=v) == rows
    # the change feed, replayed from version 0, gives the view at every version
    changes = read_changes(run.spec, 0).table.to_pylist()
    state: dict = {}
    done = -1
    for v in sorted(views):
        state = replay_changes(
            run.spec, [c for c in changes if done < c["_commit_version"] <= v], state
        )
        done = v
        assert state == views[v]
    # the view's transaction survived: nothing is folded twice
    assert not mat.run().did_work


@pytest.mark.heavy
def test_a_run_compacts_every_table_it_writes_and_replays_stay_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 4)
    run = hourly_run(str(tmp_path), 10)
    log = pane_log(run)
    late = LateLog(run.spec.table_path("late"), run.spec.name, run.layout)
    records = [
        RunRecord(f"r{i}", run.spec.name, i * S, i * S + 1, SUCCEEDED, batches=1)
        for i in range(len(run.steps))
    ]
    plain = hourly_run(str(tmp_path / "plain"), 10)  # the same batches, never compacted
    plain_log = pane_log(plain)
    for i, step in enumerate(run.steps):
        late_row = {"key": "k0", "timestamp_us": i, "reason": "late"}
        assert log.append(i, step) and late.append(i, [late_row])
        assert append_run(run.spec, records[i])  # the lake's run history: one row a run
        plain_log.append(i, step)
    before = {t: rows_by_version(run.spec.table_path(t)) for t in ("panes", "late", "runs")}
    # the tables the run has open; the others of the lake (runs) are opened
    written = {"panes": log.appender.table(), "late": late.appender.table()}
    done = {c.table: c for c in compact_after_run(run.spec, written)}
    assert set(done) == {"panes", "late", "runs"}  # rejected: no such table, skipped
    for name, c in done.items():
        assert not c.error and c.added < c.removed, c
        dt = existing_table(run.spec, name)
        assert dt.version() == c.version == len(before[name])  # one commit
        assert mergeable_small_files(dt) <= 1
        # every earlier version still reads the same rows; the new one too
        after = rows_by_version(run.spec.table_path(name))
        assert after == {**before[name], c.version: before[name][c.version - 1]}
    # exactly-once: a replayed batch is still skipped, the next one commits
    last = len(run.steps) - 1
    assert not log.append(last, run.steps[last]) and not late.append(last, [])
    assert not append_run(run.spec, records[last])  # a run's row is still added once
    assert read_runs(run.spec) == records
    assert log.committed_batch_id() == last
    # the fold skips the compaction commit: the view equals the uncompacted lake's
    Materializer(run.spec).run()
    Materializer(plain.spec).run()
    assert view_dict(run.spec) == view_dict(plain.spec) == run.expected()
    # nothing due: no commit, nothing read but the file list
    versions = {n: existing_table(run.spec, n).version() for n in done}
    assert compact_after_run(run.spec, {}) == []
    assert {n: existing_table(run.spec, n).version() for n in done} == versions


@pytest.mark.heavy
def test_a_failed_compaction_is_a_warning_and_the_fold_stands(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 2)

    def broken(dt, target_size=None):
        raise OSError("No space left on device")

    monkeypatch.setattr(compaction, "compact", broken)
    run = hourly_run(str(tmp_path), 8)
    log = pane_log(run)
    mat = Materializer(run.spec)
    warned = []
    for i, step in enumerate(run.steps):
        log.append(i, step)
        result = mat.run()
        assert result.did_work  # the fold committed all the same
        if result.compaction is not None:
            warned.append(result.line())
    assert warned and all("WARNING compaction of current failed" in w for w in warned)
    assert "No space left on device" in warned[0]
    assert view_dict(run.spec) == run.expected()


@pytest.mark.heavy
def test_a_compaction_killed_before_its_commit_loses_nothing(tmp_path, monkeypatch):
    """A kill between writing the merged files and committing them leaves those files and no
    log entry: made here by compacting a copy of the table and putting its new data files
    (not its log entry) into the table."""
    run = hourly_run(str(tmp_path / "lake"), 10)
    log = pane_log(run)
    for i, step in enumerate(run.steps):
        log.append(i, step)
    path = run.spec.table_path("panes")
    before = rows_by_version(path)
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    had = set(os.listdir(path))
    from deltalake import DeltaTable

    assert compact_if_due("panes", DeltaTable(copy), max_small=2) is not None
    orphans = [n for n in os.listdir(copy) if n not in had and n.endswith(".parquet")]
    assert orphans
    for name in orphans:
        shutil.copy(os.path.join(copy, name), os.path.join(path, name))
    assert rows_by_version(path) == before  # the table is as it was
    assert not log.append(len(run.steps) - 1, run.steps[-1])  # and its transaction too
    # the next compaction goes ahead; vacuum deletes the killed one's files
    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 2)
    assert compact_after_run(run.spec, {"panes": log.appender.table()})[0].added >= 1
    assert rows_by_version(path)[len(before)] == before[len(before) - 1]
    vacuum(run.spec, retention_hours=0, force=True, tables=("panes",))
    left = set(os.listdir(path))
    assert not left & set(orphans)
    assert (
        sorted(map(str, DeltaTable(path).to_pyarrow_table().to_pylist())) == before[len(before) - 1]
    )


def test_only_small_files_that_can_be_merged_count(tmp_path):
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    for day in ("a", "a", "b", "c", "c", "c"):  # partitions: a twice, b once, c three times
        write_deltalake(
            path, pa.table({"day": [day], "n": [1]}), mode="append", partition_by=["day"]
        )
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    assert mergeable_small_files(dt) == 5  # b's single file cannot be merged
    assert mergeable_small_files(dt, small_bytes=1) == 0  # none is smaller than a byte
    assert compact_if_due("t", dt, max_small=5) is None and dt.version() == 5
    done = compact_if_due("t", dt, max_small=4)
    assert done is not None and (done.removed, done.added) == (5, 2)
    assert mergeable_small_files(dt) == 0
