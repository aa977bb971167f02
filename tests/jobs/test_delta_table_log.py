"""Any Delta table read as an append-only stream by version (jobs.reading.delta_table.log), without
Spark: tables written by delta-rs, and commits of other writers written by hand."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from jobs.reading.delta_table.log import (
    SourceFile,
    plan_range,
    read_files,
    source_table_columns,
    version_at,
)
from sinks.lake.column_types import KNOWN, TYPES, arrow_type
from sinks.lake.errors import SourceTableChanged, SourceTableError, UpstreamChanged

UTC = dt.timezone.utc
TS = TYPES["timestamp"].arrow
SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
        ("value", pa.float64()),
        ("count", pa.int64()),
    ]
)
COLUMNS = [(f.name, f.type) for f in SCHEMA]


def rows(start: int, n: int) -> pa.Table:
    """``n`` rows numbered from ``start``, every fifth with nulls."""
    numbers = range(start, start + n)
    return pa.table(
        {
            "key": [None if i % 5 == 4 else f"k{i}" for i in numbers],
            "ts": [dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i) for i in numbers],
            "value": [None if i % 5 == 4 else i / 4 for i in numbers],
            "count": list(numbers),
        },
        schema=SCHEMA,
    )


def appended(path: Path, *sizes: int) -> list[pa.Table]:
    """One append per size (version 0, 1, ...); the tables appended."""
    out, start = [], 0
    for n in sizes:
        out.append(rows(start, n))
        write_deltalake(str(path), out[-1], mode="append")
        start += n
    return out


def read(path: Path, after: int, upto: int, columns=COLUMNS, **options) -> pa.Table:
    return read_files(str(path), plan_range(str(path), after, upto, **options), columns)


def newest(path: Path) -> int:
    return DeltaTable(str(path)).version()


def counts(table: pa.Table) -> list[int]:
    return table.column("count").to_pylist()


def commit(path: Path, version: int, *actions: dict) -> None:
    """A commit of another writer: ``actions`` as version ``version`` of the log."""
    lines = [json.dumps({"commitInfo": {"timestamp": 0, "operation": "WRITE"}})]
    lines += [json.dumps(a) for a in actions]
    (path / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def add(path: Path, name: str, table: pa.Table | None = None, **fields) -> dict:
    """An add action of the file ``name`` (written from ``table`` if given)."""
    if table is not None:
        pq.write_table(table, str(path / name), **fields.pop("parquet", {}))
    size = (path / name).stat().st_size if (path / name).exists() else 1
    action = {"path": name, "partitionValues": {}, "size": size, "dataChange": True}
    return {"add": {**action, "modificationTime": 0, **fields}}


# -- appends --------------------------------------------------------------------------------------


def test_appends_read_back_exactly_in_commit_order_with_their_types_and_nulls(tmp_path):
    written = appended(tmp_path, 7, 1, 12)
    got = read(tmp_path, -1, 2)
    assert got.schema == SCHEMA
    assert got.equals(pa.concat_tables(written))
    files = plan_range(str(tmp_path), -1, 2)
    assert [f.version for f in files] == [0, 1, 2]
    assert all(os.path.isabs(f.path) and os.path.exists(f.path) for f in files)
    # a replayed batch plans the same files
    assert plan_range(str(tmp_path), -1, 2) == files
    assert plan_range(str(tmp_path), 2, 2) == ()
    assert read_files(str(tmp_path), (), COLUMNS) == SCHEMA.empty_table()


@pytest.mark.heavy
def test_version_ranges_split_anywhere_read_the_rows_of_one_range(tmp_path):
    appended(tmp_path, 3, 4, 5, 6, 7)
    whole = counts(read(tmp_path, -1, 4))
    assert whole == list(range(25))
    for cut in range(-1, 5):
        for cut2 in range(cut, 5):
            parts = [read(tmp_path, -1, cut), read(tmp_path, cut, cut2), read(tmp_path, cut2, 4)]
            assert [c for p in parts for c in counts(p)] == whole, (cut, cut2)


def test_requested_columns_in_requested_types_and_the_file_column(tmp_path):
    appended(tmp_path, 3)
    files = plan_range(str(tmp_path), -1, 0)
    got = read_files(
        str(tmp_path),
        files,
        [("count", pa.int32()), ("key", pa.string()), ("absent", pa.float64())],
        file_column="_source_file",
    )
    assert got.schema.names == ["count", "key", "absent", "_source_file"]
    assert got.column("count").to_pylist() == [0, 1, 2]
    assert got.column("count").type == pa.int32()
    assert got.column("absent").null_count == 3
    assert set(got.column("_source_file").to_pylist()) == {files[0].path}


def test_a_table_given_as_a_file_uri_is_read_alike(tmp_path):
    written = appended(tmp_path, 4, 2)
    uri = tmp_path.as_uri()
    files = plan_range(uri, -1, 1)
    assert read_files(uri, files, COLUMNS).equals(pa.concat_tables(written))
    assert [f.path for f in files] == [f.path for f in plan_range(str(tmp_path), -1, 1)]


def test_insert_only_merge_is_read_as_an_append(tmp_path):
    appended(tmp_path, 3)
    DeltaTable(str(tmp_path)).merge(
        rows(2, 3), "s.count = t.count", source_alias="s", target_alias="t"
    ).when_not_matched_insert_all().execute()
    assert counts(read(tmp_path, 0, 1)) == [3, 4]


# -- commits that add no rows ---------------------------------------------------------------------


def test_optimize_vacuum_and_properties_commits_add_no_rows(tmp_path):
    appended(tmp_path, 2, 3, 4)
    DeltaTable(str(tmp_path)).optimize.compact()  # version 3
    DeltaTable(str(tmp_path)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )  # versions 4, 5
    DeltaTable(str(tmp_path)).alter.set_table_properties({"delta.appendOnly": "false"})  # 6
    write_deltalake(str(tmp_path), rows(9, 1), mode="append")  # 7
    assert newest(tmp_path) == 7
    assert plan_range(str(tmp_path), 2, 6) == ()
    assert counts(read(tmp_path, 2, 7)) == [9]
    # the appended files were vacuumed after the compaction: their versions cannot be read
    with pytest.raises(SourceTableError) as e:
        read(tmp_path, -1, 7)
    message = str(e.value)
    assert "added by version 0 of the Delta table" in message and "vacuumed" in message
    assert "source.starting_version" in message and "\n" not in message


def test_a_file_vacuumed_before_it_was_read_stops_naming_its_version(tmp_path):
    appended(tmp_path, 2, 3)
    files = plan_range(str(tmp_path), -1, 1)  # planned before the maintenance
    DeltaTable(str(tmp_path)).optimize.compact()
    DeltaTable(str(tmp_path)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    with pytest.raises(SourceTableError, match=r"added by version 0 .* vacuumed before"):
        read_files(str(tmp_path), files, COLUMNS)


# -- commits that delete or update rows -----------------------------------------------------------


def changed_table(path: Path) -> dict[int, str]:
    """Appends and a change of each kind; {version: operation} of the changes."""
    appended(path, 4)  # 0
    DeltaTable(str(path)).delete("count = 1")  # 1
    write_deltalake(str(path), rows(10, 2), mode="append")  # 2
    DeltaTable(str(path)).update({"value": "0.5"}, predicate="count = 2")  # 3
    DeltaTable(str(path)).merge(
        rows(11, 2), "s.count = t.count", source_alias="s", target_alias="t"
    ).when_matched_update_all().when_not_matched_insert_all().execute()  # 4
    write_deltalake(str(path), rows(20, 2), mode="overwrite")  # 5
    write_deltalake(str(path), rows(30, 1), mode="append")  # 6
    return {1: "DELETE", 3: "UPDATE", 4: "MERGE", 5: "WRITE"}


def test_delete_update_merge_and_overwrite_stop_naming_the_version_and_the_option(tmp_path):
    changes = changed_table(tmp_path)
    for version, operation in changes.items():
        with pytest.raises(SourceTableError) as e:
            plan_range(str(tmp_path), version - 1, version)
        message = str(e.value)
        assert f"version {version} ({operation}) of the Delta table at {tmp_path}" in message
        assert "source.skip_change_commits = true" in message and "\n" not in message
    # a range stops at its first change, whatever comes before
    with pytest.raises(SourceTableError, match="version 1 "):
        plan_range(str(tmp_path), -1, 6)


def test_skip_change_commits_skips_them_whole_added_rows_included(tmp_path):
    changed_table(tmp_path)
    got = read(tmp_path, -1, 6, skip_change_commits=True)
    assert counts(got) == [0, 1, 2, 3, 10, 11, 30]


def deletion_vector_commit(path: Path) -> None:
    """Version 1: Spark's DELETE with deletion vectors (the file re-added with one)."""
    DeltaTable(str(path)).alter.set_table_properties({"delta.enableDeletionVectors": "true"})
    version = newest(path) + 1
    name = DeltaTable(str(path)).file_uris()[0].rsplit("/", 1)[1]
    dv = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f", "offset": 1}
    commit(
        path,
        version,
        {"remove": {"path": name, "dataChange": True, "deletionTimestamp": 0}},
        add(path, name, deletionVector={**dv, "sizeInBytes": 36, "cardinality": 1}),
    )


def test_a_commit_with_deletion_vectors_is_a_change_commit(tmp_path):
    appended(tmp_path, 3)
    deletion_vector_commit(tmp_path)
    write_deltalake(str(tmp_path), rows(3, 1), mode="append")
    with pytest.raises(SourceTableError, match=r"version 2 .*deletion vectors"):
        plan_range(str(tmp_path), -1, 3)
    assert counts(read(tmp_path, -1, 3, skip_change_commits=True)) == [0, 1, 2, 3]


# -- partitions, schema evolution, timestamps -----------------------------------------------------


def test_partition_columns_are_filled_from_partition_values_in_their_types(tmp_path):
    table = pa.table(
        {
            "key": ["a b/%c=é", "x", None, "x"],
            "day": pa.array([1, 2, None, 2], pa.int32()),
            "flag": [True, False, None, False],
            "at": pa.array(
                [dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), None, None, None],
                pa.timestamp("us", "UTC"),
            ),
            "value": [1.5, 2.5, 3.5, 4.5],
        }
    )
    write_deltalake(str(tmp_path), table, partition_by=["key", "day", "flag", "at"])
    write_deltalake(str(tmp_path), table.slice(0, 1), mode="append")
    columns = [("value", pa.float64()), ("key", pa.string()), ("day", pa.int32())]
    columns += [("flag", pa.bool_()), ("at", TS)]
    got = read(tmp_path, -1, 1, columns).sort_by("value")
    expected = pa.concat_tables([table, table.slice(0, 1)]).select([c for c, _ in columns])
    assert got.equals(expected.sort_by("value"))
    # another writer's values: ISO 8601 with a zone, an empty value (null)
    values = {"key": "z", "day": "", "flag": "false", "at": "2024-01-02T03:04:05.5+01:00"}
    commit(
        tmp_path,
        2,
        add(tmp_path, "other.parquet", pa.table({"value": [9.5]}), partitionValues=values),
    )
    assert read(tmp_path, 1, 2, columns).to_pylist() == [
        {
            "value": 9.5,
            "key": "z",
            "day": None,
            "flag": False,
            "at": dt.datetime(2024, 1, 2, 2, 4, 5, 500000, tzinfo=UTC),
        }
    ]
    # a column no file has is null; the partition values become the requested types
    assert counts(read(tmp_path, -1, 0, [("count", pa.int64())])) == [None] * 4
    as_long = read(tmp_path, 0, 1, [("day", pa.int64()), ("at", pa.timestamp("ms", "UTC"))])
    assert as_long.to_pylist() == [
        {"day": 1, "at": dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)}
    ]


def test_a_column_added_by_a_later_append_is_null_in_older_files(tmp_path):
    appended(tmp_path, 2)
    later = rows(2, 2).append_column("extra", pa.array(["e", None], pa.string()))
    write_deltalake(str(tmp_path), later, mode="append", schema_mode="merge")
    assert ("extra", "string") in source_table_columns(str(tmp_path)).columns
    got = read(tmp_path, -1, 1, [*COLUMNS, ("extra", pa.string())])
    assert got.column("extra").to_pylist() == [None, None, "e", None]
    assert counts(got) == [0, 1, 2, 3]


def test_timestamp_ntz_is_read_as_utc_wall_time(tmp_path):
    wall = [dt.datetime(2024, 5, 6, 7, 8, 9, 1), dt.datetime(1969, 12, 31, 23, 59, 59), None]
    table = pa.table(
        {
            "ntz": pa.array(wall, pa.timestamp("us")),
            "tz": pa.array(wall, pa.timestamp("us")).cast(pa.timestamp("us", "UTC")),
        }
    )
    write_deltalake(str(tmp_path), table)
    assert source_table_columns(str(tmp_path)).columns == (
        ("ntz", "timestamp"),
        ("tz", "timestamp"),
    )
    got = read(tmp_path, -1, 0, [("ntz", TS), ("tz", TS)])
    assert got.column("ntz").type == TS
    utc = [None if w is None else w.replace(tzinfo=UTC) for w in wall]
    assert got.column("ntz").to_pylist() == utc == got.column("tz").to_pylist()


def test_int96_and_nanosecond_parquet_timestamps_are_microseconds_rounded_down(tmp_path):
    write_deltalake(str(tmp_path), pa.table({"at": pa.array([], TS)}))
    ns = [1_700_000_000_123_456_789, -1_500, None]  # ns since the epoch
    nanos = pa.table({"at": pa.array(ns, pa.timestamp("ns"))})
    int96 = pa.table({"at": pa.array([1_700_000_000_123_456, None], pa.timestamp("us"))})
    commit(
        tmp_path,
        1,
        add(tmp_path, "nanos.parquet", nanos, parquet={"version": "2.6"}),
        add(tmp_path, "int96.parquet", int96, parquet={"use_deprecated_int96_timestamps": True}),
    )
    assert pq.read_schema(tmp_path / "nanos.parquet").field("at").type == pa.timestamp("ns")
    got = read(tmp_path, 0, 1, [("at", TS)]).column("at").cast(pa.int64()).to_pylist()
    assert got == [1_700_000_000_123_456, -2, None, 1_700_000_000_123_456, None]


# -- paths of other writers -----------------------------------------------------------------------


def test_encoded_relative_paths_and_absolute_uris_of_other_writers(tmp_path):
    write_deltalake(str(tmp_path), rows(0, 0))
    (tmp_path / "a dir").mkdir()
    pq.write_table(rows(0, 2), str(tmp_path / "a dir" / "f%.parquet"))
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere.parquet"
    pq.write_table(rows(5, 1), str(outside))
    commit(
        tmp_path,
        1,
        add(tmp_path, "a%20dir/f%25.parquet"),  # URL-encoded, as the protocol says
        add(tmp_path, outside.as_uri(), size=outside.stat().st_size),
    )
    files = plan_range(str(tmp_path), 0, 1)
    assert [f.path for f in files] == [str(tmp_path / "a dir" / "f%.parquet"), str(outside)]
    assert counts(read_files(str(tmp_path), files, COLUMNS)) == [0, 1, 5]


# -- another table, a cleaned-up log, features this reader cannot read ----------------------------


def test_a_table_created_anew_at_the_same_path_is_refused(tmp_path):
    appended(tmp_path, 2, 2)
    old = DeltaTable(str(tmp_path)).metadata().id
    assert counts(read(tmp_path, -1, 1, table=old)) == [0, 1, 2, 3]
    shutil.rmtree(tmp_path)
    with pytest.raises(SourceTableChanged, match=f"no Delta table at {tmp_path} any more"):
        plan_range(str(tmp_path), 1, 2, table=old)
    appended(tmp_path, 1, 1, 1)
    with pytest.raises(UpstreamChanged) as e:
        plan_range(str(tmp_path), 1, 2, table=old)
    assert isinstance(e.value, SourceTableError)
    assert f"not table {old} whose versions 2..2" in str(e.value) and "\n" not in str(e.value)
    assert counts(read(tmp_path, 1, 2, table=DeltaTable(str(tmp_path)).metadata().id)) == [2]


def test_a_version_cleaned_up_from_the_log_stops_naming_it_and_the_option(tmp_path):
    write_deltalake(
        str(tmp_path), rows(0, 1), configuration={"delta.logRetentionDuration": "interval 0 days"}
    )
    appended(tmp_path, 1, 1, 1)  # versions 1..3
    DeltaTable(str(tmp_path)).create_checkpoint()
    time.sleep(0.01)
    DeltaTable(str(tmp_path)).cleanup_metadata()
    assert not (tmp_path / "_delta_log" / f"{0:020d}.json").exists()
    with pytest.raises(SourceTableError) as e:
        plan_range(str(tmp_path), -1, 3)
    message = str(e.value)
    assert "version 0 of the Delta table" in message and "no longer in the table's log" in message
    assert "the oldest there is 3" in message and "set source.starting_version" in message
    assert counts(read(tmp_path, 2, 3)) == [2]


def test_a_range_beyond_the_newest_version_is_refused(tmp_path):
    appended(tmp_path, 1)
    with pytest.raises(SourceTableError, match=r"version 2 of the Delta table .* does not exist"):
        plan_range(str(tmp_path), -1, 2)


def test_column_mapping_is_refused_naming_it(tmp_path):
    config = {"delta.columnMapping.mode": "name"}
    write_deltalake(str(tmp_path), rows(0, 1), configuration=config)
    for call in (
        lambda: source_table_columns(str(tmp_path)),
        lambda: plan_range(str(tmp_path), -1, 0),
    ):
        with pytest.raises(SourceTableError, match=r"column mapping \(delta.columnMapping.mode"):
            call()


def test_a_reader_feature_this_reader_does_not_know_is_refused_naming_it(tmp_path):
    appended(tmp_path, 1)
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
    features = {"readerFeatures": ["futureFeature"], "writerFeatures": ["futureFeature"]}
    commit(tmp_path, 1, {"protocol": {**protocol, **features}})
    for call in (
        lambda: source_table_columns(str(tmp_path)),
        lambda: plan_range(str(tmp_path), 0, 1, table="any"),
    ):
        with pytest.raises(SourceTableError, match=r"cannot be read .*'futureFeature'") as e:
            call()
        assert not isinstance(e.value, SourceTableChanged)


def test_a_reader_feature_delta_rs_reads_but_this_reader_does_not_is_refused(tmp_path):
    from jobs.reading.delta_table import log as delta_source

    write_deltalake(str(tmp_path), pa.table({"ntz": pa.array([0], pa.timestamp("us"))}))
    assert DeltaTable(str(tmp_path)).protocol().reader_features == ["timestampNtz"]
    readable = delta_source.READABLE_FEATURES
    try:
        delta_source.READABLE_FEATURES = readable - {"timestampNtz"}
        with pytest.raises(SourceTableError, match="needs the reader feature timestampNtz"):
            plan_range(str(tmp_path), -1, 0)
    finally:
        delta_source.READABLE_FEATURES = readable


# -- columns, starting timestamps ------------------------------------------------------------------


def test_the_columns_of_a_table_and_those_of_types_panestore_does_not_read(tmp_path):
    table = pa.table(
        {
            "s": pa.array(["a"], pa.large_string()),
            "b": pa.array([1], pa.int8()),
            "i": pa.array([1], pa.int32()),
            "l": pa.array([1], pa.int64()),
            "f": pa.array([1], pa.float32()),
            "d": pa.array([1], pa.float64()),
            "ok": [True],
            "ts": pa.array([0], pa.timestamp("us", "UTC")),
            "money": pa.array([1], pa.decimal128(10, 2)),
            "day": pa.array([dt.date(2024, 1, 1)]),
            "raw": [b"x"],
            "nested": [{"x": 1}],
            "many": [[1]],
        }
    )
    write_deltalake(str(tmp_path), table, partition_by=["s"])
    schema = source_table_columns(str(tmp_path))
    assert schema.columns == (
        ("s", "string"),
        ("b", "int"),
        ("i", "int"),
        ("l", "long"),
        ("f", "float"),
        ("d", "double"),
        ("ok", "boolean"),
        ("ts", "timestamp"),
        ("money", "decimal(10,2)"),
        ("day", "date"),
    )
    assert dict(schema.unsupported) == {
        "raw": "binary",
        "nested": "struct<x:long>",
        "many": "array<long>",
    }
    assert schema.partition_columns == ("s",)
    assert schema.column_error("l") is None
    assert schema.column_error("raw") == (
        f"column raw of the Delta table at {tmp_path} is binary, not a type panestore "
        f"reads ({KNOWN})"
    )
    assert "has no column nope" in (schema.column_error("nope") or "")
    # every column it offers reads in its configuration type
    got = read(tmp_path, -1, 0, [(n, arrow_type(t)) for n, t in schema.columns])
    assert got.to_pylist()[0]["s"] == "a" and got.to_pylist()[0]["b"] == 1
    assert got.to_pylist()[0]["money"] == Decimal("1.00")
    assert got.to_pylist()[0]["day"] == dt.date(2024, 1, 1)


def test_a_missing_table_is_refused(tmp_path):
    with pytest.raises(SourceTableError, match=f"no Delta table at {tmp_path / 'none'}"):
        source_table_columns(str(tmp_path / "none"))
    with pytest.raises(SourceTableError, match="no Delta table"):
        plan_range(str(tmp_path / "none"), -1, 0)


def test_version_at_is_the_first_version_committed_at_or_after_a_time(tmp_path):
    for i in range(4):
        write_deltalake(str(tmp_path), rows(i, 1), mode="append")
        time.sleep(0.005)
    times = {e["version"]: e["timestamp"] for e in DeltaTable(str(tmp_path)).history()}
    assert [version_at(str(tmp_path), times[v]) for v in range(4)] == [0, 1, 2, 3]
    assert [version_at(str(tmp_path), times[v] + 1) for v in range(4)] == [1, 2, 3, 4]
    assert version_at(str(tmp_path), 0) == 0
    # after the newest commit: the next version, nothing old
    assert version_at(str(tmp_path), times[3] + 60_000) == 4


def test_source_files_survive_pickling_as_a_spark_partition_does(tmp_path):
    import pickle

    appended(tmp_path, 2)
    files = plan_range(str(tmp_path), -1, 0)
    assert pickle.loads(pickle.dumps(files)) == files
    assert isinstance(files[0], SourceFile)
