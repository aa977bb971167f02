"""panes.dedup: which copies of a record are duplicates, batch after batch, whatever the order of
a batch's rows; when an id is forgotten."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panes import FixedWindows, Sessions, SlidingWindows, Windowing
from panes.dedup import Copy, copy_order, forget, id_hash, take
from panes.window import Window

MINUTE = 60_000_000


def test_the_default_horizon_is_when_the_record_is_late_in_every_window():
    # Beam's rule: dropped once watermark > end + allowed lateness, for each of its windows
    for fn in (FixedWindows(MINUTE), SlidingWindows(MINUTE, MINUTE // 4), Sessions(MINUTE)):
        for ts in (0, 7, MINUTE - 1, 5 * MINUTE + 3):
            at = Windowing(fn, allowed_lateness=30).rules.forget_at(ts, None)
            ends = [w.end for w in fn.assign(ts, None)]
            assert at == max(ends) + 30 + 1
    # for non-merging windows that is when the engine lets the last window go
    w = Window(0, MINUTE)
    rules = Windowing(FixedWindows(MINUTE), allowed_lateness=30).rules
    forgotten = rules.forget_at(5, None)
    assert forgotten is not None
    assert not rules.gone(w, forgotten - 1)
    assert rules.gone(w, forgotten)


def test_a_stated_horizon_counts_from_the_event_time():
    rules = Windowing(FixedWindows(MINUTE), allowed_lateness=30).rules
    assert rules.forget_at(5, 100) == 106


def test_a_copy_past_its_horizon_is_not_checked_nor_remembered():
    ids = {id_hash("k", "1:e"): 10}
    duplicate, after = take(ids, [Copy(id_hash("k", "1:e"), 10)], watermark=10)
    assert duplicate == [False] and after == {}


def test_null_ids_are_never_duplicates():
    assert take({}, [Copy(None, 10), Copy(None, 10)], watermark=0) == ([False, False], {})


records = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 50), st.integers(1, 3)),  # id, time, copies
    max_size=20,
    unique_by=lambda r: r[0],
)


@pytest.mark.heavy
@settings(max_examples=60, deadline=None)
@given(records=records, seed=st.integers(0, 2**31), batches=st.integers(1, 4))
def test_each_id_is_taken_once_in_any_batches_and_orders_then_forgotten(records, seed, batches):
    rng = random.Random(seed)
    rules = Windowing(FixedWindows(100)).rules
    # copies of one id may differ in event time: the taken one is the first of its batch
    copies = [
        (f"{i}:{c}", i, ts + c, rules.forget_at(ts + c, None))
        for i, ts, k in records
        for c in range(k)
    ]
    rng.shuffle(copies)
    cuts = sorted(rng.randint(0, len(copies)) for _ in range(batches - 1))
    ids: dict = {}
    taken: dict[int, list] = {}
    for lo, hi in zip([0, *cuts], [*cuts, len(copies)], strict=True):
        part = copies[lo:hi]
        judged = [Copy(id_hash("key", str(i)), f) for _, i, _, f in part]
        orders = [copy_order(ts, [], name) for name, _, ts, _ in part]
        duplicate, ids = take(ids, judged, 0, orders.__getitem__)
        batch_taken = [c for c, d in zip(part, duplicate, strict=True) if not d]
        for name, i, ts, _ in batch_taken:
            taken.setdefault(i, []).append((ts, name))
        if batch_taken:
            first_ids = {i for _, i, _, _ in batch_taken}
            for i in first_ids:  # taken: the earliest of its batch's copies
                mine = [(ts, name) for name, j, ts, _ in part if j == i]
                assert taken[i][-1] == min(mine)
    assert sorted(taken) == sorted(i for i, _, _ in records)
    assert all(len(t) == 1 for t in taken.values())  # each id counted once
    assert len(ids) == len(records)
    assert forget(ids, 10**9) == {}  # the state shrinks once the watermark passes every horizon
