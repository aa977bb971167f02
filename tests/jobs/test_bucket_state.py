"""jobs.executor.bucket_state: a bucket's keys as a compressed Arrow table, read back exactly,
due keys found by their wake-ups."""

from __future__ import annotations

import datetime as dt
import pickle
import random

import pytest

pa = pytest.importorskip("pyarrow")

from jobs.executor.bucket_state import BucketState  # noqa: E402

ONE = (pa.field("key", pa.string()),)
TWO = (pa.field("user", pa.int64()), pa.field("day", pa.timestamp("us", tz="UTC")))


def reload(bucket: BucketState, fields=ONE) -> BucketState:
    return BucketState.load(bucket.save().blob, fields)


def test_states_and_wake_ups_survive_a_save_and_only_due_keys_are_picked():
    rng = random.Random(7)
    bucket = BucketState.load(None, ONE)
    wanted = {}
    for i in range(2_000):
        key = f"k{i}"
        event = rng.choice([None, rng.randrange(1_000)])
        processing = rng.choice([None, None, rng.randrange(1_000)])
        wanted[key] = (rng.randbytes(rng.randrange(1, 200)), event, processing)
        bucket.put(key, *wanted[key])
    saved = reload(bucket)
    assert saved.keys == 2_000
    assert all(saved.state_of(k) == v[0] for k, v in wanted.items())
    due = saved.due(watermark=500, processing_time=100)
    assert sorted(due) == sorted(
        k
        for k, (_, e, p) in wanted.items()
        if (e is not None and e <= 500) or (p is not None and p <= 100)
    )
    summary = bucket.save()
    assert summary.next_event_time == min(e for _, e, _ in wanted.values() if e is not None)
    assert summary.polls


def test_changes_replace_remove_and_add_keys_and_an_emptied_bucket_has_no_blob():
    bucket = BucketState.load(None, ONE)
    bucket.put("a", b"1", 10, None)
    bucket.put("b", b"2", 20, None)
    bucket = reload(bucket)
    bucket.put("a", b"1'", None, 5)
    bucket.remove("b")
    bucket.put("c", b"3", 30, None)
    again = reload(bucket)
    assert (again.state_of("a"), again.state_of("b"), again.state_of("c")) == (b"1'", None, b"3")
    assert again.keys == 2
    again.remove("a")
    again.remove("c")
    emptied = again.save()
    assert (emptied.blob, emptied.next_event_time, emptied.polls) == (None, None, False)


def test_a_visit_that_changes_nothing_hands_back_the_blob_it_loaded():
    bucket = BucketState.load(None, ONE)
    bucket.put("a", b"1", 10, None)
    blob = bucket.save().blob
    loaded = BucketState.load(blob, ONE)
    assert loaded.state_of("a") == b"1"
    assert loaded.save().blob is blob


def test_tuple_keys_of_typed_columns():
    day = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    bucket = BucketState.load(None, TWO)
    bucket.put((2**53 + 1, day), b"x", 1, None)
    bucket.put((7, None), b"y", None, None)
    again = reload(bucket, TWO)
    assert again.state_of((2**53 + 1, day)) == b"x"
    assert again.state_of((7, None)) == b"y"
    assert again.due(watermark=1, processing_time=0) == [(2**53 + 1, day)]


def test_the_stored_form_is_much_smaller_than_the_pickled_one():
    states = {
        f"key-{i:07d}": (pickle.dumps((2, i % 7, [(0, 60, False, (i,))])), 60, None)
        for i in range(5_000)
    }
    bucket = BucketState.load(None, ONE)
    for k, v in states.items():
        bucket.put(k, *v)
    assert len(bucket.save().blob) * 4 < len(pickle.dumps(states, protocol=5))
