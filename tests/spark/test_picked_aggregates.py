"""``last(status)``, ``first(status)`` and ``max_by(page, seconds)`` end to end: JSON-lines files
landed over three runs, discarding panes (their accumulators folded from the pane log's JSON),
the view equal to the answer written out and ``verify`` agreeing with the batch over the raw
events, ties of event time and of ``seconds`` included (broken by the value)."""

from __future__ import annotations

import json

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark


def _line(device: str, at_s: float, status: str | None, page: str, seconds: int | None) -> str:
    return json.dumps(
        {"device_id": device, "ts": iso(at_s), "status": status, "page": page, "seconds": seconds}
    )


def test_last_first_and_max_by_run_fold_and_verify(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.load import pipeline_from_dict
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification.view_check import verify

    landing = tmp_path / "landing"
    pipeline = pipeline_from_dict(
        {
            "name": "devices",
            "lake": str(tmp_path / "lake"),
            "keys": ["device_id"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
            "accumulation_mode": "discarding",
            "source": {
                "format": "jsonl",
                "path": str(landing),
                "schema": {
                    "device_id": "string",
                    "ts": "timestamp",
                    "status": "string",
                    "page": "string",
                    "seconds": "long",
                },
            },
            "aggregates": {
                "status": "last(status)",
                "opening": "first(status)",
                "top": "max_by(page, seconds)",
                "n": "count()",
            },
            "state_buckets": 2,
        }
    )
    put(
        landing,
        "1.jsonl",
        [
            _line("a", 10, "up", "p1", 5),
            _line("a", 20, "down", "p2", 9),
            _line("a", 30, "up", "p3", 9),  # ties p2's seconds: the larger page wins
            _line("b", 15, None, "q1", None),  # no seconds: max_by skips it
        ],
    )
    run(pipeline, spark=spark, progress=None)
    put(
        landing,
        "2.jsonl",
        [
            _line("a", 5, "boot", "p0", 1),  # earlier than every other: first
            _line("a", 40, "idle", "p4", 2),
            _line("b", 50, "x", "q2", 3),
        ],
    )
    run(pipeline, spark=spark, progress=None)
    put(landing, "3.jsonl", [_line("b", 50, "y", "q3", 3)])  # ties b's latest time and seconds
    run(pipeline, spark=spark, drain=True, progress=None)

    materialize(pipeline)
    rows = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    view = {r["device_id"]: (r["status"], r["opening"], r["top"], r["n"]) for r in rows}
    assert view == {"a": ("idle", "boot", "p3", 5), "b": ("y", None, "q3", 3)}
    report = verify(view_spec(pipeline), elements=load_source_elements(pipeline))
    assert report.ok, str(report)
    assert report.checks[1].windows == 2 and report.checks[1].note == "DuckDB SQL"
