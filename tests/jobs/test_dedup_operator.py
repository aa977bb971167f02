"""Duplicates dropped by id in the operator (jobs.executor.dedup_state, panes.dedup's rules),
without Spark: a shard's steps over duplicated records split into batches in any order, on each
of the operator's paths."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from jobs.executor.operator_input import blob_of  # noqa: E402
from tests.operator_fakes import T0_MS, ShardRun, clocks  # noqa: E402

T0_US = T0_MS * 1000
MINUTE_US = 60_000_000
SCHEMA = pa.schema(
    [
        ("user", pa.string()),
        ("ts_us", pa.int64()),
        ("n", pa.int64()),
        ("pst_dedup_id", pa.string()),
        ("pst_raw", pa.string()),
        ("pst_source_file", pa.string()),
    ]
)
PATHS = ("columnar", "lifted", "per element")


def config(path: str = "columnar", horizon: str | None = None, lateness: str = "0s"):
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config

    settings = {
        "name": "p",
        "lake": "/tmp/unused",
        "keys": ["user"],
        "event_time": "t",
        "window": "FixedWindows(1m)",
        "allowed_lateness": lateness,
        "aggregates": {"total": "sum(n)", "rows": "count()"},
        "dedup": "event_id",
        "source": {
            "path": "/tmp/unused",
            "schema": {"user": "string", "t": "timestamp", "n": "long", "event_id": "string"},
        },
    }
    if horizon is not None:
        settings["dedup_horizon"] = horizon
    conf = operator_config(pipeline_from_dict(settings))
    if path == "lifted":
        conf = replace(conf, columnar_windows=False)
    if path == "per element":
        conf = replace(conf, columnar_windows=False, lift_combiners=False)
    return conf


def record(user: str, event: str, ts_us: int, n: int, raw: str) -> dict:
    return {
        "user": user,
        "ts_us": ts_us,
        "n": n,
        "pst_dedup_id": None if event is None else f"{len(event)}:{event}",
        "pst_raw": raw,
        "pst_source_file": "f",
    }


def step(run: ShardRun, records: list[dict], watermark_ms: int = 0) -> list[dict]:
    blob = blob_of(pa.Table.from_pylist(records, SCHEMA)) if records else None
    return run.step(blob, clocks(watermark_ms))


def ids_kept(run: ShardRun) -> int:
    from jobs.executor.dedup_state import sizes

    return sizes(list(run.stored().values()))


def totals(out: list[dict]) -> dict:
    """Discarding panes summed per key and window: what the view folds."""
    got: dict = {}
    for r in out:
        if r["record_kind"] == "pane":
            at = (r["user"], r["window_start_us"])
            t, c = got.get(at, (0, 0))
            got[at] = (t + r["total"], c + r["rows"])
    return got


@pytest.mark.parametrize("path", PATHS)
def test_a_copy_in_the_same_or_a_later_batch_is_rejected_once_and_counted_once(path):
    run = ShardRun(config(path))
    assert run.processor().path.name.lower().replace("_", " ") == path
    first = step(
        run,
        [
            record("u", "e1", T0_US + 5, 10, "a"),
            record("u", "e1", T0_US + 5, 10, "b"),  # the same event twice in one file
            record("u", None, T0_US + 6, 1, "n1"),  # null ids are never deduplicated
            record("u", None, T0_US + 6, 1, "n2"),
        ],
    )
    second = step(run, [record("u", "e1", T0_US + 5, 10, "c"), record("u", "e2", T0_US, 3, "d")])
    drained = step(run, [], watermark_ms=T0_MS + 60_001)
    rejected = [r for r in first + second if r["record_kind"] == "rejected"]
    assert sorted(r["raw"] for r in rejected) == ["b", "c"]  # "a" < "b": the same time and value
    assert {r["reason"] for r in rejected} == {"DUPLICATE (key and event_id already counted)"}
    assert totals(first + second + drained) == {("u", T0_US): (10 + 1 + 1 + 3, 4)}
    assert ids_kept(run) == 0  # the window's end passed: no copy can be counted any more


def test_the_copy_taken_in_a_batch_is_the_earliest_whatever_the_rows_order():
    copies = [
        record("u", "e", T0_US + 30, 1, "late"),
        record("u", "e", T0_US + 20, 2, "z"),
        record("u", "e", T0_US + 20, 2, "y"),
        record("u", "e", T0_US + 20, 3, "x"),
    ]
    outcomes = set()
    for seed in range(6):
        rows = copies[:]
        random.Random(seed).shuffle(rows)
        out = step_drain(rows)
        rejected = sorted(r["raw"] for r in out if r["record_kind"] == "rejected")
        outcomes.add((tuple(rejected), tuple(totals(out).items())))
    # the earliest event time, then the smallest value, then the raw record's text
    assert outcomes == {(("late", "x", "z"), ((("u", T0_US), (2, 1)),))}


def step_drain(rows: list[dict]) -> list[dict]:
    """The panes of ``rows`` (a batch), then drained: the windows' totals."""
    run = ShardRun(config())
    return step(run, rows) + step(run, [], watermark_ms=T0_MS + 60_001)


def test_a_stated_horizon_forgets_the_id_once_the_watermark_passes_event_time_plus_it():
    run = ShardRun(config(horizon="10s", lateness="1h"))
    step(run, [record("u", "e", T0_US, 1, "a")])
    assert ids_kept(run) == 1
    assert run.stored()[3].timer_ms == T0_MS + 10_000 + 1  # its forget watermark, in Spark ms
    again = step(run, [record("u", "e", T0_US, 1, "b")], watermark_ms=T0_MS + 10_000)
    assert [r["raw"] for r in again if r["record_kind"] == "rejected"] == ["b"]
    forgotten = step(run, [], watermark_ms=T0_MS + 10_001)
    assert forgotten == [] and ids_kept(run) == 0  # the bucket's timer collected it
    counted = step(run, [record("u", "e", T0_US, 1, "c")], watermark_ms=T0_MS + 10_001)
    assert [r for r in counted if r["record_kind"] == "rejected"] == []


def test_a_copy_past_the_horizon_is_dropped_as_late_not_rejected():
    run = ShardRun(config())
    step(run, [record("u", "e", T0_US, 1, "a")])
    out = step(run, [record("u", "e", T0_US, 1, "b")], watermark_ms=T0_MS + 60_001)
    assert [r["record_kind"] for r in out if r["record_kind"] != "pane"] == ["late"]


def test_a_replayed_batch_decides_the_same(tmp_path):
    run = ShardRun(config(), str(tmp_path))
    step(run, [record("u", "e", T0_US, 1, "a")])
    second = step(run, [record("u", "e", T0_US, 1, "b"), record("u", "f", T0_US, 1, "c")])
    run.batch_id -= 1  # the same batch again, after a kill
    assert step(run, [record("u", "f", T0_US, 1, "c"), record("u", "e", T0_US, 1, "b")]) == second


events = st.lists(
    st.tuples(
        st.sampled_from(["u1", "u2", "u3"]),  # key
        st.integers(0, 5),  # id
        st.integers(0, 150),  # event time, seconds
        st.integers(1, 9),  # value
        st.integers(1, 3),  # copies
    ),
    max_size=25,
    unique_by=lambda e: (e[0], e[1]),
)


@settings(max_examples=25, deadline=None)
@given(
    events=events,
    seed=st.integers(0, 2**31),
    batches=st.integers(1, 4),
    path=st.sampled_from(PATHS),
)
@pytest.mark.heavy
def test_duplicated_input_in_any_batches_and_order_counts_each_event_once(
    events, seed, batches, path
):
    rng = random.Random(seed)
    copies = [
        record(user, f"e{i}", T0_US + t * 1_000_000, n, f"{user}/{i}#{c}")
        for user, i, t, n, k in events
        for c in range(k)
    ]
    rng.shuffle(copies)
    cuts = sorted(rng.randint(0, len(copies)) for _ in range(batches - 1))
    parts = [copies[a:b] for a, b in zip([0, *cuts], [*cuts, len(copies)], strict=True)]
    run = ShardRun(config(path))
    out = [r for part in parts for r in step(run, part)]
    assert ids_kept(run) == len(events)  # nothing forgotten before the watermark moves
    out += step(run, [], watermark_ms=T0_MS + 3 * 60_000 + 1)  # past every window's end
    expected: dict = {}
    for user, _, t, n, _ in events:
        at = (user, T0_US + (t * 1_000_000 // MINUTE_US) * MINUTE_US)
        total, rows = expected.get(at, (0, 0))
        expected[at] = (total + n, rows + 1)
    assert totals(out) == expected
    rejected = [r["raw"] for r in out if r["record_kind"] == "rejected"]
    assert len(rejected) == len(set(rejected)) == len(copies) - len(events)
    assert ids_kept(run) == 0  # the state shrinks once the watermark passed every horizon
