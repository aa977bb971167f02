"""Each table's Delta log read once per run (:mod:`sinks.lake.snapshot_sharing`): inside the scope
a table opened again is the same snapshot brought up to date, a kept table's existence needs no
request, and a table loaded at another version is never the shared one."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sinks.lake.delta_append import ExactlyOnceAppender
from sinks.lake.snapshot_sharing import shared_snapshots
from sinks.lake.tables import is_table, open_table

ROWS = pa.table({"a": pa.array([1, 2], pa.int64())})


def _table(tmp_path) -> str:
    path = str(tmp_path / "t")
    write_deltalake(path, ROWS)
    return path


def counted_updates(monkeypatch) -> list[int]:
    """From here on, one entry for each ``update_incremental`` of any table (a read of its log)."""
    reads: list[int] = []
    update = DeltaTable.update_incremental

    def counted(self):
        reads.append(1)
        return update(self)

    monkeypatch.setattr(DeltaTable, "update_incremental", counted)
    return reads


def test_outside_a_run_every_opening_reads_the_log(tmp_path):
    path = _table(tmp_path)
    assert open_table(path, "t") is not open_table(path, "t")


def test_inside_a_run_a_table_is_opened_once_and_kept_up_to_date(tmp_path, monkeypatch):
    path = _table(tmp_path)
    with shared_snapshots():
        first = open_table(path, "t")
        write_deltalake(path, ROWS, mode="append")  # another writer's commit
        again = open_table(path, "t")
        assert again is first and again.version() == 1
        assert again.to_pyarrow_table().num_rows == 4

        def no_request(*args, **kwargs):
            raise AssertionError("the log was read again")

        monkeypatch.setattr(DeltaTable, "is_deltatable", staticmethod(no_request))
        assert is_table(path, "t")
        pinned = open_table(path, "t", version=0)
        assert pinned is not first and pinned.version() == 0 and first.version() == 1
    monkeypatch.undo()
    assert open_table(path, "t") is not first  # the scope is over


def test_an_appender_inside_a_run_shares_the_snapshot_and_commits_once(tmp_path):
    path = str(tmp_path / "t")
    schema = ROWS.schema
    with shared_snapshots():
        appender = ExactlyOnceAppender(path, "p", schema, kind="test")
        assert appender.append(0, ROWS)  # created (version 0), then batch 0 (version 1)
        opened = open_table(path, "t")
        assert opened is appender.table() and opened.version() == 1
        assert not ExactlyOnceAppender(path, "p", schema, kind="test").append(0, ROWS)
        assert ExactlyOnceAppender(path, "p", schema, kind="test").append(1, ROWS)
        assert open_table(path, "t").version() == 2  # batch 0 once, batch 1 once


@pytest.mark.parametrize("nested", [False, True])
def test_the_scope_is_reentrant(tmp_path, nested):
    path = _table(tmp_path)
    with shared_snapshots():
        first = open_table(path, "t")
        if nested:
            with shared_snapshots():
                assert open_table(path, "t") is first
        assert open_table(path, "t") is first


def test_inside_a_run_an_appender_reads_the_log_once_and_its_commits_move_the_snapshot(
    tmp_path, monkeypatch
):
    """Under the run lock the run's appends are a table's only ones: after its first opening an
    appender does not read the log again at each use (two requests each on a store), and each
    of its commits, appended rows or files written by the executors, moves the shared snapshot
    (a stale one would refuse the next batch's commit as a concurrent transaction)."""
    from sinks.lake.data_files import write_data_files

    path = str(tmp_path / "t")
    schema = ROWS.schema
    with shared_snapshots():
        appender = ExactlyOnceAppender(path, "p", schema, kind="test")
        assert appender.append(0, ROWS)
        reads = counted_updates(monkeypatch)
        for _ in range(5):
            assert appender.is_committed(0) and not appender.is_committed(1)
        assert reads == []  # no use read the log again
        for batch in (1, 2):
            files = write_data_files(path, ROWS, schema, f"b{batch}", 10)
            assert appender.commit_files(batch, files)
            assert appender.is_committed(batch)
        assert appender.append(3, ROWS)
        assert appender.table().version() == 4 and len(reads) == 2  # one a write transaction
    assert DeltaTable(path).to_pyarrow_table().num_rows == 8
    assert DeltaTable(path).transaction_version("p") == 3


def test_inside_a_run_a_tables_transactions_are_read_once_a_version(tmp_path, monkeypatch):
    """delta-rs reads every commit since the last Delta checkpoint again for each
    ``transaction_version``: the run's checks (before Spark, is the batch committed, the commit's
    own check) ask once per table version, and a commit's new version is read afresh."""
    path = str(tmp_path / "t")
    schema = ROWS.schema
    asked: list[str] = []
    answer = DeltaTable.transaction_version

    def counted(self, app_id):
        asked.append(app_id)
        return answer(self, app_id)

    monkeypatch.setattr(DeltaTable, "transaction_version", counted)
    with shared_snapshots():
        appender = ExactlyOnceAppender(path, "p", schema, kind="test")
        assert appender.committed_batch_id() is None
        assert not appender.is_committed(0) and not appender.is_committed(0)
        assert appender.append(0, ROWS)  # its check: the answer at the same version
        assert asked == ["p"]
        assert appender.is_committed(0) and appender.committed_batch_id() == 0
        assert len(asked) == 2  # the commit's version read once
        write_deltalake(path, ROWS, mode="append")  # another application's commit
        assert open_table(path, "t").version() == 2 and appender.committed_batch_id() == 0
        assert len(asked) == 3
    assert ExactlyOnceAppender(path, "p", schema, kind="test").committed_batch_id() == 0
    assert ExactlyOnceAppender(path, "p", schema, kind="test").committed_batch_id() == 0
    assert len(asked) == 5  # outside a run: read at each question


def test_an_appender_takes_the_table_its_run_opened_as_it_is(tmp_path, monkeypatch):
    """The run's checks open its tables under the run lock; the batches' appenders take those
    snapshots without reading the log again (two requests a table on a store)."""
    path = str(tmp_path / "t")
    ExactlyOnceAppender(path, "p", ROWS.schema, kind="test").table()  # created (version 0)
    with shared_snapshots():
        opened = open_table(path, "t")  # the checks before Spark
        reads = counted_updates(monkeypatch)
        appender = ExactlyOnceAppender(path, "p", ROWS.schema, kind="test")
        assert appender.table() is opened and not appender.is_committed(0)
        assert reads == []
        assert appender.append(0, ROWS) and opened.version() == 1
