"""jobs.executor.operator_input: the packed and the row encoding of the operator's input, and
reading both back."""

from __future__ import annotations

import datetime as dt

import pytest

pa = pytest.importorskip("pyarrow")

from jobs.executor.operator_input import (  # noqa: E402
    CONTROL_BUCKET,
    InputSchema,
    balanced_bucket_ids,
    blob_of,
    elements_by_key,
    input_table,
    lane_marker,
    pack_by_bucket,
    read_rows,
    rejected_records,
    spark_partition_of_int,
)
from jobs.executor.record_rules import KeyBuckets  # noqa: E402
from panes import Retracted  # noqa: E402


def test_pack_by_bucket_round_trips():
    batch = pa.RecordBatch.from_pydict(
        {
            "pst_bucket": pa.array([3, 1, 3, -1, 1], pa.int32()),
            "pst_clock": pa.array([7, None, 9, None, 2], pa.int64()),
            "k": ["a", "b", "c", None, "e"],
            "ts_us": pa.array([5, 4, 3, None, 1], pa.int64()),
        }
    )
    out = list(pack_by_bucket([batch, batch.slice(0, 0)]))
    assert len(out) == 1
    packed = out[0].to_pydict()
    assert packed["pst_bucket"] == [-1, 1, 3]
    assert packed["pst_row"] == [None, None, None]  # the packed encoding only
    assert packed["pst_clock"] == [None, 2, 9]  # the largest clock of each blob's rows
    rows = {
        b: pa.ipc.open_stream(blob).read_all().to_pydict()
        for b, blob in zip(packed["pst_bucket"], packed["pst_blob"], strict=True)
    }
    assert sorted(rows[3]["k"]) == ["a", "c"] and sorted(rows[1]["ts_us"]) == [1, 4]
    assert rows[-1] == {"k": [None], "ts_us": [None]}


def test_rows_of_several_inputs_pack_their_clocks_by_lane():
    """Rows with a lane (their input's index): a blob mixes inputs and carries no clock of
    theirs (only a control row's, which has no lane); each lane's largest clock is on a row of
    the lane's marker bucket, which every shard then reads (with_clock_rows)."""
    batch = pa.RecordBatch.from_pydict(
        {
            "pst_bucket": pa.array([3, 3, 1, CONTROL_BUCKET], pa.int32()),
            "pst_clock": pa.array([7, 9, 4, 100], pa.int64()),
            "pst_lane": pa.array([0, 1, 1, None], pa.int32()),
            "k": ["a", "b", "c", None],
        }
    )
    (out,) = pack_by_bucket([batch])
    packed = out.to_pydict()
    clocks = dict(zip(packed["pst_bucket"], packed["pst_clock"], strict=True))
    assert clocks == {CONTROL_BUCKET: 100, 1: None, 3: None, lane_marker(0): 7, lane_marker(1): 9}
    blobs = dict(zip(packed["pst_bucket"], packed["pst_blob"], strict=True))
    assert blobs[lane_marker(0)] is None and blobs[lane_marker(1)] is None
    assert pa.ipc.open_stream(blobs[3]).read_all().column("k").to_pylist() == ["a", "b"]


BIG = 2**53 + 1  # not a float64
TYPED = InputSchema(
    keys=("k",),
    values=("n", "t", "f"),
    types=(
        ("k", pa.int64()),
        ("n", pa.int64()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("f", pa.float32()),
    ),
)


def test_the_row_encoding_reads_every_value_exactly():
    # what Spark's to_json writes (jobs.executor.operator_input.row_expression): nulls left out,
    # timestamps as µs, floats as doubles
    rows = [
        b'{"k":9007199254740993,"ts_us":253402300799998999,"n":-9007199254740993,'
        b'"t":1704067200000001,"f":1.100000023841858}',
        b'{"k":1,"ts_us":2}',
    ]
    table = read_rows(rows, TYPED)
    assert table.schema == TYPED.arrow_schema()
    first, second = table.to_pylist()
    assert (first["k"], first["ts_us"], first["n"]) == (BIG, 253402300799998999, -BIG)
    assert first["t"] == dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc)
    assert first["f"] == pa.array([1.1], pa.float32())[0].as_py()
    assert second == {
        "k": 1,
        "ts_us": 2,
        "n": None,
        "t": None,
        "f": None,
        "pst_raw": None,
        "pst_source_file": None,
        "pst_reason": None,
    }
    assert read_rows([], TYPED) is None


def test_a_group_of_both_encodings_is_one_table():
    blob = blob_of(
        pa.table(
            {
                "k": pa.array([7], pa.int64()),
                "ts_us": pa.array([3], pa.int64()),
                "n": pa.array([BIG], pa.int64()),
            }
        )
    )
    table = input_table([blob], [b'{"k":7,"ts_us":1,"n":5}'], TYPED)
    assert elements_by_key(table, TYPED) == {
        7: [({"n": 5, "t": None, "f": None}, 1), ({"n": BIG, "t": None, "f": None}, 3)]
    }
    assert input_table([], [], TYPED) is None


def test_elements_by_key_reads_columns_by_name():
    schema = InputSchema(keys=("u", "d"), values=("x",))
    table = pa.table(
        {"x": [1.0, 2.0, 3.0], "ts_us": [30, 10, 20], "d": ["p", "p", "q"], "u": [1, 1, 1]}
    )
    assert elements_by_key(table, schema) == {
        (1, "p"): [({"x": 2.0}, 10), ({"x": 1.0}, 30)],
        (1, "q"): [({"x": 3.0}, 20)],
    }
    assert elements_by_key(None, schema) == {}


def test_weighted_rows_withdraw_their_value_when_their_weight_is_negative():
    schema = InputSchema(keys=("k",), values=("x",), weighted=True)
    assert schema.element_columns == ("k", "ts_us", "x", "pst_weight")
    table = pa.table(
        {
            "k": ["a", "a"],
            "ts_us": [5, 5],
            "x": [2.0, 2.0],
            "pst_weight": pa.array([1, -1], pa.int32()),
        }
    )
    assert elements_by_key(table, schema) == {"a": [({"x": 2.0}, 5), (Retracted({"x": 2.0}), 5)]}


def test_rejected_records_are_read_by_name():
    table = pa.table({"pst_reason": ["r"], "pst_source_file": ["f"], "pst_raw": ["x"]})
    assert rejected_records(table) == {"raw": ["x"], "source_file": ["f"], "reason": ["r"]}
    assert rejected_records(None) == {"raw": [], "source_file": [], "reason": []}


def test_key_buckets_are_stable_and_in_range():
    hasher = KeyBuckets(("string", "int"), 8)
    keys = [(f"k{i}", i) for i in range(100)]
    assert hasher.buckets_of(keys) == [KeyBuckets(("string", "int"), 8).bucket(k) for k in keys]
    assert set(hasher.buckets_of(keys)) <= set(range(8))
    with pytest.raises(ValueError, match="no Python bucket function"):
        KeyBuckets(("double",), 8)


def test_balanced_bucket_ids_spread_evenly():
    ids = balanced_bucket_ids(64, 2)
    assert len(set(ids)) == 64
    assert [spark_partition_of_int(i, 2) for i in ids].count(0) == 32
