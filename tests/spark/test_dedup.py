"""Duplicates dropped by id (``dedup = "event_id"``) through the whole job: records landed twice,
within a file and across files, are counted once, each extra copy is in ``rejected`` once with
reason DUPLICATE, ``verify`` agrees; and after a SIGKILL mid-batch the rerun writes what an
uninterrupted run writes."""

from __future__ import annotations

import json
import signal
from collections import Counter

import pytest

from tests.spark.support import T0, iso, land_in_order
from tests.spark.test_kill_safety import run_cli, tables

pytestmark = pytest.mark.spark

US = 1_000_000
MINUTE_US = 60 * US


def event(device, s, n, event_id):
    return json.dumps({"device_id": device, "ts": iso(s), "n": n, "event_id": event_id})


E1 = event("a", 1, 1, "e1")
E3 = event("b", 3, 4, "e3")
E5 = event("b", 100, 16, "e5")
NULL_ID = event("c", 7, 64, None)
FILES = [
    [E1, E1, event("a", 20, 2, "e2"), E3, NULL_ID, NULL_ID, "garbage"],
    [E1, E5, E3],
    # e1 again after its window's end passed (watermark 90 s): late, as e7, not checked
    [event("a", 200, 8, "e6"), E5, event("a", 35, 32, "e7"), E1],
]


def make_pipeline(tmp_path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "dedup",
            "lake": str(tmp_path / "lake"),
            "keys": ["device_id"],
            "event_time": "ts",
            "window": "FixedWindows(1m)",
            "dedup": "event_id",
            "source": {
                "path": str(tmp_path / "landing"),
                "max_files_per_trigger": 1,
                "schema": {
                    "device_id": "string",
                    "ts": "timestamp",
                    "n": "long",
                    "event_id": "string",
                },
            },
            "watermark": {"delay": "10s"},
            "aggregates": {"rows": "count()", "total": "sum(n)"},
            "state_buckets": 4,
        }
    )


def test_duplicates_are_counted_once_rejected_once_and_verified(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification.view_check import verify

    pipeline = make_pipeline(tmp_path)
    land_in_order(tmp_path / "landing", FILES, "events-{}.jsonl")  # one batch per file
    result = run(pipeline, spark=spark, progress=None)
    run(pipeline, spark=spark, drain=True, progress=None)
    assert result.total("rejected") == 5  # the run's count: the 4 duplicates and "garbage"

    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    reasons = Counter((r["raw"], r["reason"]) for r in rejected)
    duplicate = "DUPLICATE (key and event_id already counted)"
    assert reasons == {(E1, duplicate): 2, (E3, duplicate): 1, (E5, duplicate): 1} | {
        ("garbage", "malformed record (not one strict JSON object of the source schema)"): 1
    }
    assert all(r["source_file"].endswith(".jsonl") for r in rejected)
    late = DeltaTable(pipeline.table_path("late")).to_pyarrow_table().to_pylist()
    assert sorted(r["timestamp_us"] for r in late) == [(T0 + 1) * US, (T0 + 35) * US]

    materialize(pipeline)
    view = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    start = T0 * US - (T0 * US) % MINUTE_US
    windows = {
        (r["device_id"], (r["window_start_us"] - start) // MINUTE_US): (r["rows"], r["total"])
        for r in view
    }
    # each event once; the record without an id counted each time it came
    assert windows == {
        ("a", 0): (2, 1 + 2),
        ("a", 3): (1, 8),
        ("b", 0): (1, 4),
        ("b", 1): (1, 16),
        ("c", 0): (2, 128),
    }
    report = verify(view_spec(pipeline), elements=load_source_elements(pipeline))
    assert report.ok, str(report)
    assert (
        "duplicates: the batch left out 4 copies of records; the rejected table holds 4 "
        "DUPLICATE rows"
    ) in str(report).splitlines()


CSV_CONF = """\
name = "dedup_kills"
lake = "{lake}"
keys = ["device_id"]
event_time = "ts"
window = "FixedWindows(1m)"
allowed_lateness = "30s"
dedup = ["producer", "seq"]
state_buckets = 4

[source]
format = "csv"
path = "{landing}"
max_files_per_trigger = 1
schema = {{ device_id = "string", ts = "timestamp", n = "long", producer = "string", seq = "long" }}

[watermark]
delay = "10s"

[aggregates]
rows = "count()"
total = "sum(n)"
"""


def line(device, s, n, producer, seq):
    return f"{device},{iso(s)},{n},{producer},{seq}"


CSV_FILES = [
    [line("a", 1, 1, "p", 1), line("a", 1, 1, "p", 1), line("b", 3, 2, "p", 2)],
    [line("a", 1, 1, "p", 1), line("a", 50, 4, "q", 1), line("b", 70, 8, "p", 3)],
    [line("b", 3, 2, "p", 2), line("a", 50, 4, "q", 1), line("a", 130, 16, "p", 4)],
    [line("b", 70, 8, "p", 3), line("a", 52, 4, "q", 2), line("a", 200, 32, "p", 5)],
]


def land_csv(root):
    land_in_order(root / "landing", CSV_FILES, "events-{}.csv")
    conf = root / "dedup.toml"
    conf.write_text(CSV_CONF.format(lake=root / "lake", landing=root / "landing"))
    return conf


def test_a_run_killed_mid_batch_with_duplicates_reruns_to_the_uninterrupted_pane_log(
    spark, tmp_path
):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    base = load_pipeline(land_csv(tmp_path / "base"))
    run(base, spark=spark, progress=None)
    want = tables(base)

    conf = land_csv(tmp_path / "killed")
    pipeline = load_pipeline(conf)
    # batch 2: its copies of earlier batches' records decided, its state and files written,
    # nothing committed
    proc = run_cli(conf, "before_commit:2")
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-3000:])
    proc = run_cli(conf)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = tables(pipeline)

    def panes(rows):
        skip = {"processing_time_us", "pane_id"}
        return sorted(tuple(sorted((k, v) for k, v in r.items() if k not in skip)) for r in rows)

    assert got["panes"] and panes(got["panes"]) == panes(want["panes"])
    duplicates = [r["raw"] for r in got["rejected"] if r["reason"].startswith("DUPLICATE")]
    assert sorted(duplicates) == sorted(
        r["raw"] for r in want["rejected"] if r["reason"].startswith("DUPLICATE")
    )
    lines = [x for f in CSV_FILES for x in f]
    extra = Counter(lines) - Counter(set(lines))  # every copy after the first
    assert Counter(duplicates) == extra  # each duplicate in rejected exactly once
    assert sorted(r["timestamp_us"] for r in got["late"]) == sorted(
        r["timestamp_us"] for r in want["late"]
    )
