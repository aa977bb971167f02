"""A lake keeps the configuration it was written with (jobs.driver.fingerprint): through the command
line, a run that changes a value column's type or the trigger while windows are held in state is
refused before Spark starts, naming the setting on one line, and commits nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark

CONF = """
name = "bound"
lake = "{lake}"
keys = ["device_id"]
event_time = "ts"
window = "FixedWindows(1h)"
trigger = "{trigger}"
[source]
path = "{landing}"
schema = {{ device_id = "string", ts = "timestamp", seconds = "{seconds}" }}
[aggregates]
watched = "sum(seconds)"
"""
TRIGGER = "DefaultTrigger()"


def record(device: str, at_s: float, seconds: float) -> str:
    return json.dumps({"device_id": device, "ts": iso(at_s), "seconds": seconds})


def test_a_changed_value_type_or_trigger_is_refused_naming_it(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    def conf(name: str, trigger: str = TRIGGER, seconds: str = "long"):
        path = tmp_path / name
        path.write_text(
            CONF.format(
                lake=tmp_path / "lake",
                landing=tmp_path / "landing",
                trigger=trigger,
                seconds=seconds,
            )
        )
        return path

    def run_cli(path):
        return subprocess.run(
            [sys.executable, "-m", "jobs.cli.commands", "run", str(path), "--no-materialize"],
            capture_output=True,
            text=True,
            timeout=240,
        )

    put(tmp_path / "landing", "a.jsonl", [record("a", 10, 1), record("b", 20, 2)])
    pipeline = load_pipeline(conf("bound.toml"))
    run(pipeline, spark=spark, progress=None)  # the windows of hour 0 stay open, in state
    panes = DeltaTable(pipeline.table_path("panes"))
    version = panes.version()
    # for a held window: a value both configurations read, and one only a double column holds
    put(tmp_path / "landing", "b.jsonl", [record("a", 30, 2), record("a", 40, 1.5)])

    early = "AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))"
    for changed, setting, was in [
        (conf("trigger.toml", trigger=early), "trigger", TRIGGER),
        (conf("double.toml", seconds="double"), "source.schema.seconds", "long"),
    ]:
        proc = run_cli(changed)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert proc.stderr.strip() == proc.stderr.strip().splitlines()[0]  # one line
        assert proc.stderr.startswith(
            f"panestore: invalid configuration {changed}: {setting}: the lake "
            f"{pipeline.lake_path} was written with {was}, the configuration says "
        )
        assert "Traceback" not in proc.stderr
        assert DeltaTable(pipeline.table_path("panes")).version() == version  # nothing committed
