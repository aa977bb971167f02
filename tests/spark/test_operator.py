"""The panes engine in the batch sink's operator steps, into the Delta pane log, vs the simulator
driven by Spark's offset and commit logs."""

from __future__ import annotations

import calendar
import json
import os
import time

import pytest

from tests.spark.support import next_watermarks

pytestmark = pytest.mark.spark

T0 = 1_704_067_200  # 2024-01-01T00:00:00Z
DELAY = "10s"
TRIGGER = "AfterWatermark(early=AfterCount(2), late=AfterCount(1))"
FILES = [
    [("a", 1, 1.0), ("a", 2, 2.0), ("b", 3, 5.0)],  # early pane for a (count 2)
    [("a", 70, 1.0), ("b", 100, 1.0), ("c", 5, 1.0)],  # watermark moves: on-time panes
    [("a", 200, 1.0), ("a", 30, 7.0)],  # a@30: late, within allowed lateness
    [("b", 400, 1.0), ("a", 50, 3.0), ("c", 300, 2.0)],  # a@50: expired -> late table
]


def _iso(s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + s))


def _put(directory, name, recs, value_type: str = "double"):
    tmp = directory / f"{name}.tmp"
    cast = int if value_type == "long" else float
    tmp.write_text(
        "".join(json.dumps({"key": k, "ts": _iso(s), "value": cast(v)}) + "\n" for k, s, v in recs)
    )
    os.rename(tmp, directory / f"{name}.json")


def _offset_log(ckpt):
    """[(batch id, watermark ms, batch timestamp ms, file-source log offset)] per batch."""
    out = []
    for p in sorted(
        (ckpt / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1
    ):
        if not p.name.isdigit():
            continue
        lines = p.read_text().splitlines()
        meta = json.loads(lines[1])
        out.append(
            (
                int(p.name),
                meta["batchWatermarkMs"],
                meta["batchTimestampMs"],
                json.loads(lines[2])["logOffset"],
            )
        )
    return out


def _pipeline(tmp_path, value_type: str = "double"):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "t",
            "lake": str(tmp_path / "lake"),
            "keys": ["key"],
            "event_time": "ts",
            "window": "FixedWindows(1m)",
            "trigger": TRIGGER,
            "accumulation_mode": "accumulating_and_retracting",
            "allowed_lateness": "30s",
            "watermark": {"delay": DELAY},
            "aggregates": {"total": "sum(value)"},
            "state_buckets": 4,
            "source": {
                "path": str(tmp_path / "in"),
                "schema": {"key": "string", "ts": "timestamp", "value": value_type},
            },
        }
    )


@pytest.mark.parametrize("value_type", ["double", "long"])
def test_pane_log_equals_simulator(spark, tmp_path, value_type):
    """The operator as the job runs it (packed key buckets), fed by a plain streaming frame: a
    sum of doubles element by element, a sum of longs lifted (combined in Arrow per window)."""
    from pathlib import Path

    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from jobs.driver.batch_sink import BatchSink
    from jobs.driver.plan import build_job, layout, operator_config
    from panes import Simulator
    from panes.engines import EngineKind
    from sinks.lake.pane_log import pane_record

    pipeline = _pipeline(tmp_path, value_type)
    inp, ckpt = tmp_path / "in", Path(pipeline.checkpoint_path)
    inp.mkdir()
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("ts", TimestampType()),
            StructField("value", LongType() if value_type == "long" else DoubleType()),
        ]
    )
    cfg = operator_config(pipeline)
    path = cfg.engines().kind
    assert (path is not EngineKind.PER_ELEMENT) == (value_type == "long")
    sink = BatchSink(pipeline)
    sink.create_tables()

    def run():
        src = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(inp))
        writer = build_job(spark, pipeline, src).writeStream.foreachBatch(sink)
        q = writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        q.awaitTermination()

    for i, recs in enumerate(FILES):  # one scheduled run per landed file
        _put(inp, f"f{i}", recs, value_type)
        run()

    # Replay the same batches through the simulator: watermark and batch time from the offset log,
    # the watermark after each batch (fired in it) from the commit log.
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())
    expected, prev, after = [], -1, next_watermarks(ckpt)
    for batch_id, wm_ms, pt_ms, log_offset in _offset_log(ckpt):
        rows = []
        for lo in range(prev + 1, log_offset + 1):
            listing = ckpt / "sources" / "0" / str(lo)
            for line in listing.read_text().splitlines()[1:] if listing.exists() else []:
                path = json.loads(line)["path"].removeprefix("file://")
                for rec in open(path).read().splitlines():  # noqa: SIM115
                    r = json.loads(rec)
                    ts = calendar.timegm(time.strptime(r["ts"], "%Y-%m-%dT%H:%M:%SZ"))
                    rows.append((r["key"], {"value": r["value"]}, ts * 1_000_000))
        prev = log_offset
        # One micro-batch == advance both clocks, add the batch's rows as one bundle, then advance
        # to the watermark Spark computed after the batch.
        out = sim.advance(cfg.model_watermark(wm_ms), pt_ms * 1000)
        out += sim.add_elements(sorted(rows, key=lambda e: (e[0], e[2], repr(e[1]))))
        assert sink.stats[batch_id].watermark_ms == wm_ms
        assert sink.stats[batch_id].watermark_after_ms == after[batch_id]  # Spark's own rule
        if after[batch_id] > wm_ms:
            out += sim.advance(cfg.model_watermark(after[batch_id]), pt_ms * 1000)
        expected += [dict(pane_record(p, layout(pipeline)), batch_id=batch_id) for p in out]

    def norm(r):  # every column, processing_time_us included
        return tuple(
            tuple((s["start_us"], s["end_us"]) for s in v or ()) if k == "supersedes" else v
            for k, v in sorted(r.items())
            if k in expected[0]
        )

    got = sink.pane_log.read().to_pylist()
    assert sorted(map(norm, got)) == sorted(map(norm, expected))
    assert len(got) == 11
    late = sink.late_log.read().to_pylist()
    assert [(r["key"], r["timestamp_us"]) for r in late] == [("a", (T0 + 50) * 1_000_000)]
    assert [d.timestamp for d in sim.dropped] == [(T0 + 50) * 1_000_000]
    assert late[0]["reason"].startswith("expired")
    assert sink.pane_log.committed_batch_id() == _offset_log(ckpt)[-1][0]


def test_every_shard_gets_each_clock_and_each_blob_stays_in_its_own_bucket(spark):
    """The operator's input with its clock rows (jobs.executor.operator_input.with_clock_rows):
    a row with a clock also sends it to each shard's clock bucket; the rows keep their blob or
    row in their own bucket only; a row without a clock sends nothing."""
    from jobs.executor.operator_input import (
        BLOB,
        BUCKET,
        CLOCK,
        CONTROL_BUCKET,
        OPERATOR_INPUT,
        REJECTED_BUCKET,
        ROW,
        clock_buckets,
        spark_partition_of_int,
        with_clock_rows,
    )

    rows = [
        (5, b"blob", None, 30),
        (CONTROL_BUCKET, None, None, 90),
        (REJECTED_BUCKET, None, b"r", None),
    ]
    got = with_clock_rows(spark.createDataFrame(rows, OPERATOR_INPUT), 3).collect()
    to_shards = clock_buckets(3)
    assert sorted(tuple(r) for r in got) == sorted(
        [*rows, *[(b, None, None, c) for b in to_shards for c in (30, 90)]]
    )
    assert [spark_partition_of_int(b, 3) for b in to_shards] == [0, 1, 2]
    assert {r[BUCKET] for r in got if r[BLOB] is not None or r[ROW] is not None} == {5, -1}
    assert all(r[CLOCK] is not None for r in got if r[BUCKET] in to_shards)
