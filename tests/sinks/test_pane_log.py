"""Pane-log, late and rejected tables: schema round-trip, exactly-once appends (delta-rs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow not installed (runtime dependency of sinks)")
deltalake = pytest.importorskip(
    "deltalake", reason="deltalake not installed (runtime dep of sinks)"
)

from panes.combiners import mean  # noqa: E402
from sinks.lake.pane_log import (  # noqa: E402
    MAX_TIMESTAMP_US,
    PaneLog,
    PaneLogLayout,
    core_schema,
    finish_batch,
    pane_id,
    pane_log_schema,
    pane_record,
)
from sinks.lake.records import LateLog, RejectedLog  # noqa: E402

MIN = 60_000_000


class Timing(Enum):
    EARLY = 0
    ON_TIME = 1
    LATE = 2


@dataclass(frozen=True)
class W:
    start: int
    end: int


@dataclass(frozen=True)
class Info:
    index: int
    nonspeculative_index: int
    timing: Timing
    is_first: bool
    is_last: bool


@dataclass(frozen=True)
class FakePane:
    key: object
    window: W
    value: object
    timestamp: int
    pane: Info
    is_retraction: bool = False
    supersedes: tuple = ()
    watermark: int | None = None
    processing_time: int | None = None
    accumulator: object = None


@dataclass(frozen=True)
class FakeDropped:
    key: object
    value: object
    timestamp: int
    window: W | None
    reason: str
    watermark: int | None
    processing_time: int | None
    extra: dict = field(default_factory=dict)


def panes_batch0():
    w = W(0, 10 * MIN)
    return [
        FakePane("a", w, 3.0, w.end - 1, Info(0, -1, Timing.EARLY, True, False), False, (), 0, 5),
        FakePane("b", w, 1.0, w.end - 1, Info(0, 0, Timing.ON_TIME, True, False), False, (), 7, 9),
    ]


def panes_batch1():
    w = W(0, 10 * MIN)
    merged = W(0, 20 * MIN)
    return [
        FakePane("a", w, 3.0, w.end - 1, Info(1, 0, Timing.ON_TIME, False, False), True, (), 1, 6),
        FakePane(
            "a",
            merged,
            5.0,
            merged.end - 1,
            Info(1, 0, Timing.ON_TIME, False, False),
            False,
            (w,),
            1,
            6,
        ),
        # global-window-like bounds: not representable as a timestamp
        FakePane("c", W(-(2**62), 2**62), 2.0, 2**62 - 1, Info(0, 0, Timing.ON_TIME, True, True)),
    ]


def test_schema_round_trips_through_delta(tmp_path):
    log = PaneLog(tmp_path / "panes", "pipe")
    log.append(0, panes_batch0())
    dt = deltalake.DeltaTable(str(tmp_path / "panes"))
    got = pa.schema(dt.schema().to_arrow())
    want = pane_log_schema()
    assert got.names == want.names
    for name in want.names:
        assert got.field(name).type == want.field(name).type, name
    t = dt.to_pyarrow_table()
    assert t.num_rows == 2
    assert t.schema.field("window_start").type == pa.timestamp("us", tz="UTC")
    assert t.schema.field("supersedes").type.value_type == pa.struct(
        [("start_us", pa.int64()), ("end_us", pa.int64())]
    )


def test_rows_carry_pane_fields(tmp_path):
    log = PaneLog(tmp_path / "panes", "pipe")
    log.append(0, panes_batch0())
    log.append(1, panes_batch1())
    rows = sorted(log.read().to_pylist(), key=lambda r: (r["batch_id"], r["key"], r["pane_id"]))
    assert {r["pipeline_id"] for r in rows} == {"pipe"}
    b1 = [r for r in rows if r["batch_id"] == 1]
    retraction = next(r for r in b1 if r["is_retraction"])
    merged = next(r for r in b1 if r["key"] == "a" and not r["is_retraction"])
    assert retraction["window_end_us"] == 10 * MIN and retraction["value"] == 3.0
    assert merged["supersedes"] == [{"start_us": 0, "end_us": 10 * MIN}]
    assert merged["timing"] == "ON_TIME" and merged["nonspeculative_index"] == 0
    glob = next(r for r in b1 if r["key"] == "c")
    assert glob["window_start"] is None and glob["window_end"] is None
    assert glob["window_end_us"] == 2**62 and glob["timestamp"] is None
    early = next(r for r in rows if r["timing"] == "EARLY")
    assert early["nonspeculative_index"] == -1 and early["watermark_us"] == 0
    assert early["processing_time_us"] == 5
    assert len({r["pane_id"] for r in rows}) == len(rows)


def test_accumulator_is_written_only_when_the_layout_asks():
    pane = FakePane(
        "a", W(0, MIN), 0.5, MIN - 1, Info(0, -1, Timing.EARLY, True, False), accumulator=(1.0, 2)
    )
    assert pane_record(pane, PaneLogLayout(combine_fn=mean()))["accumulator"] == "[1.0,2]"
    assert pane_record(pane)["accumulator"] is None


def test_finish_batch_orders_rows_and_ids_them_by_pane_id():
    """Rows come out sorted by (keys, window, index, retraction first, null keys last) whatever
    the input order; each id is ``pane_id`` of the row, colliding rows numbered by ordinal."""
    import random

    lay = PaneLogLayout(key_fields=(("user", pa.string()), ("n", pa.int64())))
    rnd = random.Random(7)
    rows = [
        dict(
            user=rnd.choice(["a", 'q"é', None]),
            n=rnd.choice([1, None]),
            window_start_us=rnd.choice([0, MIN]),
            window_end_us=rnd.choice([MIN, 2 * MIN]),
            value=1.0,
            timestamp_us=0,
            pane_index=rnd.randint(0, 2),
            nonspeculative_index=-1,
            timing="EARLY",
            is_first=False,
            is_last=False,
            is_retraction=rnd.random() < 0.3,
            supersedes=[],
            watermark_us=None,
            processing_time_us=None,
            accumulator=None,
        )
        for _ in range(400)
    ]
    out = finish_batch(pa.Table.from_pylist(rows, schema=core_schema(lay)), "p", 4, lay)
    got = out.to_pylist()

    def order(r):
        keys = (r["user"] is None, r["user"] or "", r["n"] is None, r["n"] or 0)
        return (
            *keys,
            r["window_start_us"],
            r["window_end_us"],
            r["pane_index"],
            not r["is_retraction"],
        )

    assert [order(r) for r in got] == sorted(order(r) for r in rows)
    seen: dict = {}
    for r in got:
        ident = (
            r["user"],
            r["n"],
            r["window_start_us"],
            r["window_end_us"],
            r["pane_index"],
            r["is_retraction"],
        )
        ordinal = seen[ident] = seen.get(ident, -1) + 1
        keys = {"user": r["user"], "n": r["n"]}
        assert r["pane_id"] == pane_id("p", keys, *ident[2:], ordinal=ordinal)
    assert {r["batch_id"] for r in got} == {4} and {r["pipeline_id"] for r in got} == {"p"}
    assert len({r["pane_id"] for r in got}) == len(got)


@pytest.mark.parametrize(
    "field, choices",
    [
        (("k", pa.int64()), [-(2**63), -1, 0, 2**63 - 1, None]),
        (("k", pa.bool_()), [True, False, None]),
        (("k", pa.float64()), [-0.0, 0.5, 1e300, float("nan"), None]),
        (("k", pa.string()), ["", '\u00e9\\"', "x,y]", None]),
    ],
)
def test_finish_batch_ids_equal_pane_id_for_every_key_type_and_extreme_bounds(field, choices):
    """The ids built for all rows at once are :func:`pane_id`'s, text for text: key values of
    every kind, the global window's bounds, negative and large integers."""
    import random

    lay = PaneLogLayout(key_fields=(field,))
    rnd = random.Random(11)
    bounds = [-(2**63), -(2**62) + 7, -1, 0, MIN, 2**63 - 1]
    rows = [
        dict(
            k=rnd.choice(choices),
            window_start_us=rnd.choice(bounds),
            window_end_us=rnd.choice(bounds),
            value=1.0,
            timestamp_us=0,
            pane_index=rnd.choice([0, 1, 2**40]),
            nonspeculative_index=-1,
            timing="ON_TIME",
            is_first=False,
            is_last=False,
            is_retraction=rnd.random() < 0.5,
            supersedes=[],
            watermark_us=None,
            processing_time_us=None,
            accumulator=None,
        )
        for _ in range(300)
    ]
    got = finish_batch(pa.Table.from_pylist(rows, schema=core_schema(lay)), "pipe\u00e9", 0, lay)
    seen: dict = {}
    for r in got.to_pylist():
        ident = (r["window_start_us"], r["window_end_us"], r["pane_index"], r["is_retraction"])
        key = repr(r["k"])  # NaN equals itself here, as in the rows' order
        ordinal = seen[key, ident] = seen.get((key, ident), -1) + 1
        assert r["pane_id"] == pane_id("pipe\u00e9", {"k": r["k"]}, *ident, ordinal=ordinal)


def test_replayed_batch_is_skipped_and_txn_recorded(tmp_path):
    log = PaneLog(tmp_path / "panes", "pipe")
    assert log.committed_batch_id() is None
    assert log.append(0, panes_batch0()) is True
    assert log.committed_batch_id() == 0
    assert log.append(1, panes_batch1()) is True
    assert log.committed_batch_id() == 1
    dt = deltalake.DeltaTable(str(tmp_path / "panes"))
    assert dt.transaction_version("pipe") == 1
    version = dt.version()
    # replays, including an older batch id: nothing is written, the txn does not move back
    assert log.append(1, panes_batch1()) is False
    assert log.append(0, panes_batch0()) is False
    # a fresh writer (a new process after a crash) sees the same committed version
    again = PaneLog(tmp_path / "panes", "pipe")
    assert again.append(1, panes_batch1()) is False
    dt = deltalake.DeltaTable(str(tmp_path / "panes"))
    assert dt.version() == version
    assert dt.transaction_version("pipe") == 1
    assert dt.to_pyarrow_table().num_rows == 5


def test_txn_is_per_pipeline(tmp_path):
    a = PaneLog(tmp_path / "panes", "a")
    b = PaneLog(tmp_path / "panes", "b")
    assert a.append(3, panes_batch0())
    assert b.append(0, panes_batch0())  # other app id: not skipped
    assert a.committed_batch_id() == 3 and b.committed_batch_id() == 0


def test_empty_batch_commits_txn(tmp_path):
    log = PaneLog(tmp_path / "panes", "pipe")
    assert log.append(0, []) is True
    assert log.committed_batch_id() == 0
    assert log.read().num_rows == 0


def test_replay_is_byte_identical_content(tmp_path):
    one, two = PaneLog(tmp_path / "one", "p"), PaneLog(tmp_path / "two", "p")
    one.append(7, panes_batch1())
    two.append(7, list(reversed(panes_batch1())))  # another partition order
    assert one.read().to_pylist() == two.read().to_pylist()


def test_core_records_from_operator_table(tmp_path):
    layout = PaneLogLayout(
        key_fields=(("user", pa.string()), ("device", pa.int64())),
        value_fields=(("plays", pa.int64()), ("watched", pa.float64())),
    )
    w = W(0, MIN)
    pane = FakePane(("u1", 7), w, (2, 30.5), w.end - 1, Info(0, 0, Timing.ON_TIME, True, True))
    core = pa.Table.from_pylist([pane_record(pane, layout)], schema=core_schema(layout))
    log = PaneLog(tmp_path / "panes", "p", layout)
    log.append(0, core)
    (row,) = log.read().to_pylist()
    assert (row["user"], row["device"], row["plays"], row["watched"]) == ("u1", 7, 2, 30.5)


def test_late_and_rejected_tables(tmp_path):
    late = LateLog(tmp_path / "late", "pipe")
    d = FakeDropped(
        "a", {"seconds": 3}, 5, W(0, 10), "droppable: watermark past end+lateness", 99, 7
    )
    assert late.append(4, [d, d]) is True
    assert late.append(4, [d]) is False
    rows = late.read().to_pylist()
    assert len(rows) == 2 and len({r["record_id"] for r in rows}) == 2
    assert rows[0]["watermark_us"] == 99 and rows[0]["value_json"] == '{"seconds":3}'
    assert deltalake.DeltaTable(str(tmp_path / "late")).transaction_version("pipe") == 4
    # the window as panes and current have it, so one query reads all three tables
    window = (rows[0]["window_start"], rows[0]["window_end"])
    assert [int(t.timestamp() * 1_000_000) for t in window] == [0, 10]

    rej = RejectedLog(tmp_path / "rejected", "pipe")
    bad = [{"raw": "{not json", "source_file": "file:/in/f1.json", "reason": "unparseable"}]
    assert rej.append(0, bad, processing_time_us=MAX_TIMESTAMP_US + 1) is True
    assert rej.append(0, bad) is False
    (row,) = rej.read().to_pylist()
    assert row["raw"] == "{not json" and row["processing_time"] is None


def test_a_late_table_of_an_earlier_version_gets_the_window_timestamps_added(tmp_path):
    """A late table written before ``window_start``/``window_end`` existed: opening it adds
    them (null for its older rows); a missing column that is not a derived timestamp is refused."""
    from sinks.lake.delta_append import ExactlyOnceAppender
    from sinks.lake.errors import ConfigMismatch
    from sinks.lake.records import late_schema

    path = tmp_path / "late"
    schema = late_schema()
    old = pa.schema([f for f in schema if f.name not in ("window_start", "window_end")])
    ExactlyOnceAppender(path, "pipe", old, kind="late").table()
    late = LateLog(path, "pipe")
    d = FakeDropped("a", {"seconds": 3}, 5, W(0, 10), "droppable", 99, 7)
    assert late.append(0, [d]) is True
    (row,) = late.read().to_pylist()
    assert row["window_end"] is not None
    assert set(deltalake.DeltaTable(str(path)).schema().to_arrow().names) == set(schema.names)

    fewer = pa.schema([f for f in schema if f.name != "value_json"])
    ExactlyOnceAppender(tmp_path / "older", "pipe", fewer, kind="late").table()
    with pytest.raises(ConfigMismatch, match=r"no column\(s\) \['value_json'\]"):
        LateLog(tmp_path / "older", "pipe").append(0, [d])
