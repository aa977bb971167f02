"""verify's batch without the copies a deduplicated pipeline rejects
(sinks.verification.batch_check.without_duplicates): the first copy of each key and id is kept; a
copy the late table reports as expired came past the id's horizon and is taken out by its late
row."""

from __future__ import annotations

import pyarrow as pa

from panes import AccumulationMode, FixedWindows
from panes.combiners import count
from sinks.lake.spec import ViewSpec
from sinks.verification.batch_check import DEDUP_GROUP, batch_view, without_duplicates

SPEC = ViewSpec(
    "p", "/tmp/unused", ("k",), (("n", count()),), FixedWindows(10), AccumulationMode.DISCARDING
)


def elements(rows: list[tuple]) -> pa.Table:
    """(key, ts, group) rows, in each group's canonical order."""
    k, ts, group = zip(*rows, strict=True)
    return pa.table(
        {"k": list(k), "ts_us": pa.array(ts, pa.int64()), DEDUP_GROUP: pa.array(group, pa.int64())}
    )


def late(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"k": k, "timestamp_us": ts, "window_start_us": 0, "window_end_us": 10, "reason": r}
            for k, ts, r in rows
        ]
    )


def test_the_first_copy_of_each_group_is_kept_and_null_ids_all_are():
    table = elements([("a", 1, 1), ("a", 1, 1), ("a", 2, 2), ("a", 3, None), ("a", 3, None)])
    kept = without_duplicates(SPEC, table, None)
    assert kept.column_names == ["k", "ts_us"] and kept.column("ts_us").to_pylist() == [1, 2, 3, 3]
    assert batch_view(SPEC, table)[0] == {(("a",), (0, 10)): {"n": 4}}


def test_a_copy_past_the_horizon_is_taken_out_by_its_late_row_not_the_counted_one():
    # the job counted the first copy; the second arrived after the window expired: late
    table = elements([("a", 1, 1), ("a", 1, 1)])
    expired = late([("a", 1, "expired: watermark passed ...")])
    assert batch_view(SPEC, table, expired)[0] == {(("a",), (0, 10)): {"n": 1}}
    # a copy dropped for another reason (its window closed) was the one the job took
    closed = late([("a", 1, "closed: the window's trigger finished")])
    assert batch_view(SPEC, table, closed)[0] == {}


def test_a_table_without_groups_is_left_as_it_is():
    table = pa.table({"k": ["a", "a"], "ts_us": [1, 1]})
    assert without_duplicates(SPEC, table, None) is table
