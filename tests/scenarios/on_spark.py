"""Scenarios on the Spark job (``jobs.driver.runs.run``): one scheduled run per step.

* ``bundle``: the elements land as one JSON-lines file (``key``, ``v`` = the value, ``ts`` = the
  event time in epoch µs), then a run: one micro-batch, so one bundle per key.
* ``watermark``: a control row (``jobs.driver.control.write_control``) whose event time is the
  scenario's watermark plus the pipeline's watermark delay, then a run: Spark's watermark (largest
  event time seen minus the delay) becomes the scenario's, and the batch that took the row fires
  what it makes due.
* ``processing_time``: not supported: the job's processing time is Spark's batch timestamp.

The watermark delay is a day, and a first control row at the scenario's latest event time comes
with the first step: from then on, Spark's watermark is at least that time minus a day, which
no element moves (so no bundle's own batch moves the watermark) and which is before every window
of the scenario (its times lie within a day), so it
expires nothing and holds nothing back: it stands in for the beginning of time. Only the
``watermark`` steps' control rows move it further, to exactly the scenario's watermarks. Hence
a scenario runs here only if it has no processing-time steps or triggers, its watermarks are
whole milliseconds (Spark's are), its times lie within a day of each other, and it avoids the
global window (which closes only at the drain). Event times are shifted by ``T0`` (2024-01-01)
into Spark's timestamp range, and back when the pane log and late table are read.

Each step's panes are read back from the pane log (the rows of that run's batches) and its
dropped elements from the late table, written in the scenario format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from panes import parse_duration
from tests.scenarios.format import Scenario, Step, dropped_text, pane_text, window_text
from tests.spark.support import T0, put

T0_US = T0 * 1_000_000
DELAY = "1d"
KEY, VALUE, EVENT_TIME = "key", "v", "ts"


def check_runs_on_spark(sc: Scenario) -> None:
    """Raise if ``sc`` cannot run on the Spark job (see the module doc)."""
    watermarks = [s.time for s in sc.steps if s.action == "watermark"]
    times = watermarks + [t for s in sc.steps for _, _, t in s.elements]
    if sc.uses_processing_time:
        raise ValueError(f"{sc.name}: processing time is Spark's batch timestamp")
    if sc.window.startswith("GlobalWindows"):
        raise ValueError(f"{sc.name}: the global window closes only at the drain")
    if any(t % 1000 for t in watermarks):
        raise ValueError(f"{sc.name}: Spark's watermark is in whole milliseconds")
    if max(times) - min(times) >= parse_duration(DELAY):
        raise ValueError(f"{sc.name}: times must lie within {DELAY} of each other")


def pipeline_conf(sc: Scenario, root: Path) -> dict[str, Any]:
    """The job's configuration for ``sc``: one key column, the value, the event time in µs."""
    return {
        "name": "scenario",
        "lake": str(root / "lake"),
        "keys": [KEY],
        "event_time": EVENT_TIME,
        "window": sc.window,
        "trigger": sc.trigger,
        "accumulation_mode": sc.accumulation.lower(),
        "allowed_lateness": sc.allowed_lateness,
        "timestamp_combiner": sc.timestamp_combiner,
        "on_time_behavior": sc.on_time_behavior,
        "closing_behavior": sc.closing_behavior,
        "allow_finishing_trigger": True,
        "source": {
            "path": str(root / "landing"),
            "create_path": True,  # a scenario may move the watermark before its first bundle
            "schema": {KEY: "string", EVENT_TIME: "long", VALUE: "long"},
            "epoch_unit": "us",
        },
        "watermark": {"delay": DELAY},
        "state_buckets": 2,
        "aggregates": {"values": sc.combiner.replace("()", f"({VALUE})")},
    }


def _do(pipeline: Any, index: int, step: Step, spark: Any) -> list[int]:
    """Land or signal ``step``, run the job once; the ids of the batches the run committed."""
    from jobs.driver.control import write_control
    from jobs.driver.runs import run

    if step.action == "bundle":
        lines = [json.dumps({KEY: k, VALUE: v, EVENT_TIME: T0_US + t}) for k, v, t in step.elements]
        put(Path(pipeline.source.path), f"step-{index:03d}.jsonl", lines)
    elif step.action == "watermark":
        delay_us = parse_duration(DELAY)
        write_control(pipeline, "watermark", (T0_US + step.time + delay_us) // 1000)
    else:
        raise ValueError(f"{step.action} steps do not run on Spark")
    return [b.batch_id for b in run(pipeline, spark=spark, progress=None).batches]


def _shifted(start: int, end: int) -> tuple[int, int]:
    return (start - T0_US, end - T0_US)


def _pane(row: dict[str, Any]) -> str:
    assert row["is_first"] == (row["pane_index"] == 0), row
    return pane_text(
        row[KEY],
        _shifted(row["window_start_us"], row["window_end_us"]),
        row["values"],
        row["timestamp_us"] - T0_US,
        row["timing"],
        row["pane_index"],
        row["nonspeculative_index"],
        is_last=row["is_last"],
        is_retraction=row["is_retraction"],
        supersedes=[_shifted(w["start_us"], w["end_us"]) for w in row["supersedes"] or ()],
    )


def _dropped(row: dict[str, Any]) -> str:
    value = json.loads(row["value_json"])
    window = None
    if row["window_start_us"] is not None:
        window = window_text(_shifted(row["window_start_us"], row["window_end_us"]))
    return dropped_text(
        row[KEY],
        value[VALUE] if isinstance(value, dict) else value,
        row["timestamp_us"] - T0_US,
        row["reason"],
        window,
    )


def run(sc: Scenario, root: Path, spark: Any) -> list[tuple[list[str], list[str]]]:
    """Every step of ``sc`` on the Spark job with its lake under ``root``: per step, the panes
    and the dropped elements of the batches of its run, each sorted."""
    from deltalake import DeltaTable

    from jobs.config.load import pipeline_from_dict
    from jobs.driver.control import write_control

    check_runs_on_spark(sc)
    pipeline = pipeline_from_dict(pipeline_conf(sc, root))
    latest = max(t for s in sc.steps for _, _, t in s.elements)
    write_control(pipeline, "start", (T0_US + latest) // 1000)
    batches = [_do(pipeline, i, step, spark) for i, step in enumerate(sc.steps)]
    panes = DeltaTable(pipeline.table_path("panes")).to_pyarrow_table().to_pylist()
    late = DeltaTable(pipeline.table_path("late")).to_pyarrow_table().to_pylist()
    return [
        (
            sorted(_pane(r) for r in panes if r["batch_id"] in ids),
            sorted(_dropped(r) for r in late if r["batch_id"] in ids),
        )
        for ids in batches
    ]
