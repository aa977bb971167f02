"""jobs.executor.operator without Spark: a shard's steps over blobs and rows (its state in a
directory, as the batch sink runs it), replays, timers, clocks, and the canonical order of a
key's rows."""

from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from jobs.executor.operator_input import blob_of  # noqa: E402
from tests.operator_fakes import T0_MS, ShardRun, clocks  # noqa: E402

T0_US = 1_704_067_200 * 1_000_000
BIG = 2**53 + 1  # not a float64


def shard(root: str | None = None) -> ShardRun:
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config

    pipeline = pipeline_from_dict(
        {
            "name": "p",
            "lake": "/tmp/unused",
            "keys": ["user"],
            "event_time": "t",
            "window": "FixedWindows(1m)",
            "trigger": "AfterWatermark(early=AfterCount(1), late=AfterCount(1))",
            "accumulation_mode": "accumulating",
            "aggregates": {"ns": "to_list(n)"},
            "source": {
                "path": "/tmp/unused",
                "schema": {"user": "long", "t": "timestamp", "n": "long"},
            },
        }
    )
    return ShardRun(operator_config(pipeline), root)


def blob(rows: list[dict]) -> bytes:
    return blob_of(
        pa.Table.from_pylist(
            rows, pa.schema([("user", pa.int64()), ("ts_us", pa.int64()), ("n", pa.int64())])
        )
    )


def test_input_rows_of_both_encodings_keep_integers_exact_and_nulls():
    # pandas would hold integer columns with nulls as float64 (BIG + 1 == BIG there)
    blobs = [
        blob([{"user": BIG, "ts_us": T0_US + 1, "n": BIG}]),
        blob(
            [
                {"user": BIG, "ts_us": T0_US + 2, "n": BIG + 2},
                {"user": BIG, "ts_us": T0_US + 3, "n": None},
            ]
        ),
    ]
    # a row in the row encoding (a record Spark parsed, beside the decoder's blobs)
    rows = [f'{{"user":{BIG},"ts_us":{T0_US + 4},"n":{BIG + 4}}}'.encode()]
    panes = [r for r in shard().step(blobs, clocks(), rows=rows) if r["record_kind"] == "pane"]
    assert {p["user"] for p in panes} == {BIG}
    last = max(panes, key=lambda p: p["pane_index"])
    assert last["ns"] == [BIG, BIG + 2, None, BIG + 4]


def test_rejected_records_pass_through_stamped_with_the_batch_time():
    rejected = pa.table(
        {
            "pst_raw": ["{bad", "{}"],
            "pst_source_file": ["f1", "f2"],
            "pst_reason": ["malformed record", "missing key (user)"],
        }
    )
    out = shard().step(blob_of(rejected), clocks(), bucket=-1)
    assert [r["record_kind"] for r in out] == ["rejected", "rejected"]
    assert [r["raw"] for r in out] == ["{bad", "{}"]
    assert [r["source_file"] for r in out] == ["f1", "f2"]
    assert [r["reason"] for r in out] == ["malformed record", "missing key (user)"]
    assert {r["processing_time_us"] for r in out} == {T0_US}


@pytest.mark.parametrize("seed", range(5))
def test_any_arrival_order_gives_the_same_sequence(seed):
    from jobs.executor.operator import canonical_order

    rows = [({"s": v}, ts) for ts in (3, 5, 5, 5, 9) for v in (ts, ts + 1)]
    shuffled = rows[:]
    random.Random(seed).shuffle(shuffled)
    canonical_order(shuffled)
    expected = sorted(rows, key=lambda e: (e[1], repr(e[0])))
    assert shuffled == expected


def test_a_due_timer_fires_in_a_step_without_input_and_a_replayed_step_repeats_itself(tmp_path):
    """A step with no input rows still visits the buckets whose timer the watermark reached; a
    step run again (a retried task, a replayed batch) reads the state its first run read."""
    run = shard(str(tmp_path))
    early = run.step(blob([{"user": 7, "ts_us": T0_US + 5_000_000, "n": 1}]), clocks())
    assert [r["timing"] for r in early if r["record_kind"] == "pane"] == ["EARLY"]
    stored = run.stored()
    assert list(stored) == [3] and stored[3].timer_ms == T0_MS + 60_000  # the window's end
    assert run.step(None, clocks(T0_MS + 59_999)) == []  # not due: nothing fires
    fired = run.step(None, clocks(T0_MS + 60_000))
    assert [(r["timing"], r["ns"]) for r in fired] == [("ON_TIME", [1])]
    run.batch_id -= 1  # the same batch again
    assert run.step(None, clocks(T0_MS + 60_000)) == fired
    assert run.step(None, clocks(T0_MS + 3_600_000)) == []
    assert run.stored() == {}  # the window expired: nothing kept


def test_each_task_reports_the_largest_clock_of_its_input():
    from jobs.executor.operator import OperatorBatch
    from jobs.executor.operator_input import (
        BLOB,
        BUCKET,
        CLOCK,
        CONTROL_BUCKET,
        OPERATOR_INPUT_ARROW,
        ROW,
    )

    run = shard()
    batch = pa.RecordBatch.from_pydict(
        {
            BUCKET: [CONTROL_BUCKET, 3],
            BLOB: [None, blob([{"user": 1, "ts_us": T0_US, "n": 1}])],
            ROW: [None, None],
            CLOCK: [T0_US + 9, T0_US],
        },
        schema=OPERATOR_INPUT_ARROW,
    )
    out = pa.Table.from_batches(
        list(OperatorBatch(run.config, run.root, clocks(), 0)(iter([batch])))
    )
    kinds = out.column("record_kind").to_pylist()
    assert kinds.count("clock") == 1 and "pane" in kinds
    assert out.column("pst_clock").to_pylist()[kinds.index("clock")] == T0_US + 9


def test_each_task_reports_the_input_records_it_took():
    """A blob's elements, a row of the row encoding and rejected records are records; control
    and clock rows are not (the run history counts a batch's records from this)."""
    from jobs.executor.operator import OperatorBatch
    from jobs.executor.operator_input import (
        BLOB,
        BUCKET,
        CLOCK,
        CONTROL_BUCKET,
        OPERATOR_INPUT_ARROW,
        REJECTED_BUCKET,
        ROW,
        clock_buckets,
    )

    rejected = pa.table({"pst_raw": ["{bad"], "pst_source_file": ["f"], "pst_reason": ["bad"]})
    elements = [{"user": 1, "ts_us": T0_US, "n": 1}, {"user": 1, "ts_us": T0_US + 1, "n": 2}]
    run = shard()
    batch = pa.RecordBatch.from_pydict(
        {
            BUCKET: [CONTROL_BUCKET, clock_buckets(1)[0], 3, 3, REJECTED_BUCKET],
            BLOB: [None, None, blob(elements), None, blob_of(rejected)],
            ROW: [None, None, None, f'{{"user":1,"ts_us":{T0_US},"n":3}}'.encode(), None],
            CLOCK: [T0_US + 9, T0_US + 9, T0_US + 1, T0_US, None],
        },
        schema=OPERATOR_INPUT_ARROW,
    )
    out = pa.Table.from_batches(
        list(OperatorBatch(run.config, run.root, clocks(), 0)(iter([batch])))
    ).to_pylist()
    assert [r["pst_records"] for r in out if r["record_kind"] == "clock"] == [4]
    assert [r["record_kind"] for r in out].count("rejected") == 1


def test_a_batch_fires_the_watermark_after_it_in_the_same_task_from_the_batchs_largest_clock():
    """The shard's task reads its data at the batch's watermark, then fires the window the
    watermark after the batch closes, a watermark that a row of another shard makes (its clock
    row reached this one: jobs.executor.operator_input.with_clock_rows): one task, one state
    version, a replay writes the same."""
    from jobs.executor.operator import OperatorBatch
    from jobs.executor.operator_input import (
        BLOB,
        BUCKET,
        CLOCK,
        OPERATOR_INPUT_ARROW,
        ROW,
        clock_buckets,
        spark_partition_of_int,
    )
    from jobs.executor.state_store import ShardStore

    mine = next(b for b in range(64) if spark_partition_of_int(b, 2) == 0)
    data, theirs = T0_US + 5_000_000, T0_US + 70_000_000  # the other shard's row: its clock
    to_me = clock_buckets(2)[0]
    shard_0 = pa.RecordBatch.from_pydict(
        {
            BUCKET: [mine, to_me, to_me],
            BLOB: [blob([{"user": mine, "ts_us": data, "n": 1}]), None, None],
            ROW: [None, None, None],
            CLOCK: [data, data, theirs],
        },
        schema=OPERATOR_INPUT_ARROW,
    )
    run = shard()

    def batch() -> list[dict]:
        operator = OperatorBatch(run.config, run.root, clocks(T0_MS), 0, shards=2, delay_ms=5_000)
        return sorted(pa.Table.from_batches(list(operator(iter([shard_0])))).to_pylist(), key=repr)

    first = batch()
    panes = [(r["timing"], r["ns"]) for r in first if r["record_kind"] == "pane"]
    assert sorted(panes) == [("EARLY", [1]), ("ON_TIME", [1])]  # T0 + 65 s closed [T0, T0 + 1m)
    assert [r["pst_clock"] for r in first if r["record_kind"] == "clock"] == [theirs]
    assert ShardStore(run.root, 0).versions() == [1]  # the batch's one version
    assert batch() == first  # a replay reads what the first attempt read


def test_a_bucket_in_another_shards_task_stops_it_rather_than_start_it_anew():
    from jobs.executor.operator import OperatorBatch
    from jobs.executor.operator_input import (
        BLOB,
        BUCKET,
        CLOCK,
        OPERATOR_INPUT_ARROW,
        ROW,
        spark_partition_of_int,
    )

    run = shard()
    foreign = next(b for b in range(64) if spark_partition_of_int(b, 2) == 1)
    batch = pa.RecordBatch.from_pydict(
        {
            BUCKET: [foreign],
            BLOB: [blob([{"user": 1, "ts_us": T0_US, "n": 1}])],
            ROW: [None],
            CLOCK: [T0_US],
        },
        schema=OPERATOR_INPUT_ARROW,
    )
    step = OperatorBatch(run.config, run.root, clocks(), 0, shards=2)  # this task is shard 0
    with pytest.raises(RuntimeError, match=f"bucket {foreign} reached shard 0 of 2"):
        list(step(iter([batch])))


def test_a_task_collects_garbage_less_often_and_gives_its_worker_back_as_it_came(monkeypatch):
    """A worker runs the session's other Python tasks after the operator's (a caller's UDFs,
    under jobs.api): the thresholds are the task's own, on failure too."""
    import gc

    from jobs.executor.operator import BucketProcessor
    from jobs.startup.python_processes import GC_THRESHOLDS

    before = gc.get_threshold()
    assert before != GC_THRESHOLDS
    seen = []
    visit = BucketProcessor.visit

    def noting(self, *args):
        seen.append(gc.get_threshold())
        return visit(self, *args)

    monkeypatch.setattr(BucketProcessor, "visit", noting)
    run = shard()
    run.step(blob([{"user": 1, "ts_us": T0_US, "n": 1}]), clocks())
    assert seen == [GC_THRESHOLDS]
    assert gc.get_threshold() == before

    def failing(self, *args):
        raise ValueError("a visit that fails")

    monkeypatch.setattr(BucketProcessor, "visit", failing)
    with pytest.raises(ValueError, match="a visit that fails"):
        run.step(blob([{"user": 1, "ts_us": T0_US + 1, "n": 2}]), clocks())
    assert gc.get_threshold() == before
