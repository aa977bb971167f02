"""Data files written outside delta-rs's writer and committed as add actions: the table's
schema and types in the files, statistics readers skip by, one commit per batch with the
application transaction, nothing from a replayed batch or an attempt that never committed."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytest.importorskip("deltalake")

from panes import AccumulationMode, FixedWindows, combiners
from sinks.lake.data_files import file_stats, split_rows, write_data_files
from sinks.lake.delta_append import ExactlyOnceAppender
from sinks.lake.lake_format import TIMESTAMP_TYPE
from sinks.lake.pane_log import finish_batch, pane_log_schema
from sinks.lake.spec import ViewSpec
from sinks.upkeep.maintenance import vacuum

S = 1_000_000


def core_panes(keys, start_us=0):
    n = len(keys)
    return pa.table(
        {
            "key": keys,
            "window_start_us": [start_us + i * 60 * S for i in range(n)],
            "window_end_us": [start_us + (i + 1) * 60 * S for i in range(n)],
            "value": [float(i) for i in range(n)],
            "timestamp_us": [start_us + (i + 1) * 60 * S - 1 for i in range(n)],
            "pane_index": [0] * n,
            "nonspeculative_index": [0] * n,
            "timing": ["ON_TIME"] * n,
            "is_first": [True] * n,
            "is_last": [True] * n,
            "is_retraction": [False] * n,
            "supersedes": [[] for _ in range(n)],
            "watermark_us": [start_us] * n,
            "processing_time_us": [start_us] * n,
            "accumulator": [None] * n,
        }
    )


def appender(path):
    return ExactlyOnceAppender(path, "p", pane_log_schema(), kind="pane_log")


def test_split_rows_makes_files_of_equal_sizes_within_the_bound():
    assert split_rows(0, 10) == []
    assert split_rows(10, 10) == [(0, 10)]
    assert split_rows(11, 10) == [(0, 6), (6, 5)]
    assert [n for _, n in split_rows(1_000_001, 500_000)] == [333_334, 333_334, 333_333]


def test_files_have_the_table_schema_with_microsecond_timestamps(tmp_path):
    log = appender(tmp_path / "panes")
    rows = finish_batch(core_panes(["a", "b", "c"]), "p", 0)
    files = write_data_files(log.table().table_uri, rows, log.schema, "part-x", 2)
    assert [f.rows for f in files] == [2, 1]
    for f in files:
        path = tmp_path / "panes" / f.path
        assert pq.read_schema(path).remove_metadata() == log.schema.remove_metadata()
        parquet = pq.ParquetFile(path).schema
        ts = parquet.column(parquet.names.index("timestamp"))
        assert ts.physical_type == "INT64" and f.size == os.path.getsize(path)
    assert log.schema.field("timestamp").type == TIMESTAMP_TYPE


def test_stats_bound_the_values_and_count_nulls():
    t = pa.table(
        {
            "n": pa.array([3, None, -1], pa.int64()),
            "s": ["b", "a", "x" * 100],
            "ts": pa.array([1_500, None, 2_000_001], TIMESTAMP_TYPE),
            "l": [[1], None, []],
        }
    )
    stats = json.loads(file_stats(t))
    assert stats["numRecords"] == 3
    assert stats["nullCount"] == {"n": 1, "s": 0, "ts": 1}
    assert stats["minValues"] == {"n": -1, "ts": "1970-01-01T00:00:00.001Z"}
    # the max is widened up to the next millisecond; a long string gets no bounds
    assert stats["maxValues"] == {"n": 3, "ts": "1970-01-01T00:00:02.001Z"}


def test_one_commit_per_batch_with_the_transaction_and_readers_skip_by_stats(tmp_path):
    log = appender(tmp_path / "panes")
    uri = log.table().table_uri
    for batch, keys in enumerate((["a", "b"], ["c"])):
        rows = finish_batch(core_panes(keys, start_us=batch * 3600 * S), "p", batch)
        files = write_data_files(uri, rows, log.schema, f"part-{batch}", 10)
        assert log.commit_files(batch, files)
        assert not log.commit_files(batch, files), "a replayed batch commits nothing"
    table = log.table()
    assert table.transaction_version("p") == 1 and table.version() == 2
    history = [h for h in table.history() if h["operation"] == "WRITE"]
    assert sorted(h["panestore.batchId"] for h in history) == ["0", "1"]
    assert sorted(log.read().column("key").to_pylist()) == ["a", "b", "c"]
    # the statistics prune: only batch 1's file can hold keys above "b"
    dataset = table.to_pyarrow_dataset()
    assert len(list(dataset.get_fragments(filter=pc.field("key") > "b"))) == 1


def test_files_of_an_attempt_that_never_committed_are_invisible_and_vacuumed(tmp_path):
    spec = ViewSpec(
        "p",
        str(tmp_path),
        ("key",),
        (("value", combiners.sum()),),
        FixedWindows(60 * S),
        AccumulationMode.DISCARDING,
    )
    log = appender(spec.table_path("panes"))
    uri = log.table().table_uri
    rows = finish_batch(core_panes(["a"]), "p", 0)
    crashed = write_data_files(uri, rows, log.schema, "part-crashed", 10)
    committed = write_data_files(uri, rows, log.schema, "part-retry", 10)
    assert log.commit_files(0, committed)
    assert log.read().num_rows == 1
    old = tmp_path / "panes" / crashed[0].path
    os.utime(old, (1, 1))
    (result,) = vacuum(spec, retention_hours=0, force=True, tables=("panes",))
    assert [os.path.basename(f) for f in result.details["files"]] == [crashed[0].path]
    assert not old.exists() and log.read().num_rows == 1
