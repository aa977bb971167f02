"""jobs.operator_input: packing element rows into key-bucket blobs, and reading them back."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from jobs.operator_input import (  # noqa: E402
    InputSchema,
    KeyBuckets,
    balanced_bucket_ids,
    blob_of,
    elements_by_key,
    pack_by_bucket,
    rejected_records,
    spark_partition_of_int,
    unpack,
)
from panes import Retracted  # noqa: E402


def test_pack_by_bucket_round_trips():
    batch = pa.RecordBatch.from_pydict({
        "pst_bucket": pa.array([3, 1, 3, -1, 1], pa.int32()),
        "pst_blob": pa.nulls(5, pa.binary()),
        "k": ["a", "b", "c", None, "e"],
        "ts_us": pa.array([5, 4, 3, None, 1], pa.int64()),
    })  # fmt: skip
    out = list(pack_by_bucket([batch, batch.slice(0, 0)]))
    assert len(out) == 1
    packed = out[0].to_pydict()
    assert packed["pst_bucket"] == [-1, 1, 3]
    rows = {b: pa.ipc.open_stream(blob).read_all().to_pydict()
            for b, blob in zip(packed["pst_bucket"], packed["pst_blob"], strict=True)}  # fmt: skip
    assert sorted(rows[3]["k"]) == ["a", "c"] and sorted(rows[1]["ts_us"]) == [1, 4]
    assert rows[-1] == {"k": [None], "ts_us": [None]}


def test_blobs_pass_through_packing_unchanged():
    decoded = blob_of(pa.table({"k": ["z"], "ts_us": pa.array([7], pa.int64())}))
    batch = pa.RecordBatch.from_pydict({
        "pst_bucket": pa.array([2, 2], pa.int32()),
        "pst_blob": pa.array([decoded, None], pa.binary()),
        "k": [None, "y"],
        "ts_us": pa.array([None, 8], pa.int64()),
    })  # fmt: skip
    packed = next(pack_by_bucket([batch])).to_pydict()
    assert packed["pst_bucket"] == [2, 2]
    assert packed["pst_blob"][0] == decoded
    schema = InputSchema(keys=("k",), values=())
    assert elements_by_key(unpack(packed["pst_blob"]), schema) == {"z": [({}, 7)], "y": [({}, 8)]}


def test_elements_by_key_reads_columns_by_name():
    schema = InputSchema(keys=("u", "d"), values=("x",))
    table = pa.table({"x": [1.0, 2.0, 3.0], "ts_us": [30, 10, 20], "d": ["p", "p", "q"],
                      "u": [1, 1, 1]})  # fmt: skip
    assert elements_by_key(table, schema) == {
        (1, "p"): [({"x": 2.0}, 10), ({"x": 1.0}, 30)],
        (1, "q"): [({"x": 3.0}, 20)],
    }
    assert elements_by_key(None, schema) == {}


def test_weighted_rows_withdraw_their_value_when_their_weight_is_negative():
    schema = InputSchema(keys=("k",), values=("x",), weighted=True)
    assert schema.element_columns == ("k", "ts_us", "x", "pst_weight")
    table = pa.table({"k": ["a", "a"], "ts_us": [5, 5], "x": [2.0, 2.0],
                      "pst_weight": pa.array([1, -1], pa.int32())})  # fmt: skip
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
