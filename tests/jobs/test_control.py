"""jobs.driver.control: a checkpoint tells whether a watermark advance is pending."""

from __future__ import annotations

import json
from pathlib import Path

DEMO = str(Path(__file__).resolve().parents[2] / "conf" / "demo.toml")


def test_pending_watermark(tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.control import pending_watermark

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
