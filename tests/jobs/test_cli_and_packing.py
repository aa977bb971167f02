"""Pure parts of the job: the CLI's configuration errors, packing rows per bucket, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DEMO = str(Path(__file__).resolve().parents[2] / "conf" / "demo.toml")

pa = pytest.importorskip("pyarrow")


def test_cli_check_and_config_errors(tmp_path, capsys):
    from jobs.cli import main

    assert main(["check", DEMO]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(DEMO).read_text().replace(
        'window = "Sessions(30m)"', 'window = "GlobalWindows()"'))  # fmt: skip
    bad.write_text(bad.read_text().replace(
        'trigger = "AfterWatermark(early=AfterAny(AfterCount(5), AfterProcessingTime(1m)), '
        'late=AfterCount(1))"', 'trigger = "DefaultTrigger()"'))  # fmt: skip
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "trigger:" in err and "never fires" in err


def test_pack_by_bucket_round_trips():
    from jobs.operator import pack_by_bucket

    batch = pa.RecordBatch.from_pydict({
        "pst_bucket": pa.array([3, 1, 3, -1, 1], pa.int32()),
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


def test_pending_watermark(tmp_path):
    from jobs.job import pending_watermark
    from jobs.pipeline import load_pipeline

    p = load_pipeline(DEMO, overrides={"lake": str(tmp_path)})
    ckpt = tmp_path / "_checkpoint"
    assert not pending_watermark(p)
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    (ckpt / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":100}\n{"logOffset":0}\n')
    (ckpt / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":100}')
    assert not pending_watermark(p)  # no advance
    (ckpt / "commits" / "0").write_text("v1\n" + json.dumps({"nextBatchWatermarkMs": 900}))
    assert pending_watermark(p)  # advanced, no batch ran with it
    (ckpt / "offsets" / "1").write_text('v1\n{"batchWatermarkMs":900}\n-\n')
    assert not pending_watermark(p)  # Spark will replay batch 1 itself
