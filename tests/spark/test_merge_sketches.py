"""Downstream merges of an upstream's sketch columns, end to end: hourly sketches per country
(``approx_count_distinct``, ``approx_quantiles``) in a retracting pane log, read by a daily
pipeline (``approx_count_distinct(merge(users))``, ``approx_percentile(merge(ms), 0.5)``) through
the ``pane_log`` source; late data makes the upstream withdraw an hour's pane in its second run.

With few distinct users a day, the HLL sketch is exact (list/set mode) and the KLL sketch holds
every value (fewer than k), so the daily answers must *equal* the exact distinct count and the
exact median of the day's raw events, and a sketch built over them.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.spark

HLL = "struct<estimate: long, sketch: binary>"


def upstream(tmp_path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "hourly_users",
            "lake": str(tmp_path / "up"),
            "keys": ["country"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "trigger": "AfterWatermark(late=AfterCount(1))",
            "accumulation_mode": "accumulating_and_retracting",
            "allowed_lateness": "1d",
            "source": {
                "path": str(tmp_path / "landing"),
                "max_files_per_trigger": 1,
                "schema": {"user": "string", "country": "string", "ts": "timestamp", "ms": "long"},
            },
            "watermark": {"delay": "5m"},
            "aggregates": {
                "users": "approx_count_distinct(user)",
                "ms": "approx_quantiles(ms, [0.5, 0.9])",
            },
            "state_buckets": 2,
        }
    )


def downstream(tmp_path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "daily_users",
            "lake": str(tmp_path / "down"),
            "keys": ["country"],
            "window": "FixedWindows(1d)",
            "trigger": "AfterWatermark(late=AfterCount(1))",
            "accumulation_mode": "accumulating_and_retracting",
            "allowed_lateness": "1d",
            "source": {"format": "pane_log", "path": str(tmp_path / "up")},
            "aggregates": {
                "users": "approx_count_distinct(merge(users))",
                "median": "approx_percentile(merge(ms), 0.5)",
            },
            "state_buckets": 2,
        }
    )


def land(tmp_path, name, events):
    folder = tmp_path / "landing"
    folder.mkdir(exist_ok=True)
    lines = [
        json.dumps({"user": u, "country": c, "ts": f"2024-06-01T{t}:00Z", "ms": ms})
        for u, c, t, ms in events
    ]
    (folder / name).write_text("\n".join(lines) + "\n")


FIRST = [  # hours 8 and 9, then 12:00 and 12:30 close them (watermark delay 5 minutes)
    [(f"u{i}", "fr", f"08:{i:02d}", 10 * i) for i in range(8)]
    + [("u1", "fr", "09:10", 15), ("u9", "fr", "09:20", 95), ("v1", "de", "08:30", 7)],
    [("u10", "fr", "12:00", 300), ("v2", "de", "12:00", 40)],
    [("u2", "fr", "12:30", 20), ("v3", "de", "12:30", 11)],
]
LATE = [("u11", "fr", "08:40", 1000), ("u3", "fr", "08:45", 33), ("v1", "de", "08:50", 9)]


def test_daily_merges_of_hourly_sketches_equal_sketches_over_the_days_raw_events(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.checkpoint.logs import recorded_offsets
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from jobs.reading.pane_log.upstream import WEIGHT, latest_version, read_elements
    from panes.combiners import approx_count_distinct, approx_percentile
    from sinks.lake.column_types import arrow_type
    from sinks.verification.view_check import verify

    up = upstream(tmp_path)
    for i, events in enumerate(FIRST):
        land(tmp_path, f"r{i}.jsonl", events)
    run(up, spark=spark, progress=None)  # hours 8 and 9 fire on time
    down = downstream(tmp_path)
    assert down.weighted
    assert down.source.types["users"] == HLL
    run(down, spark=spark, progress=None)
    read = max(r.offset.version for r in recorded_offsets(down.checkpoint_path))

    land(tmp_path, "r9.jsonl", LATE)  # late for hour 8: its panes are withdrawn and replaced
    run(up, spark=spark, progress=None, drain=True)
    materialize(up)
    up_panes = DeltaTable(up.table_path("panes")).to_pyarrow_table().to_pylist()
    withdrawn = [p for p in up_panes if p["is_retraction"]]
    assert {p["country"] for p in withdrawn} == {"fr", "de"}
    path = up.table_path("panes")  # the withdrawals come after what the downstream has read
    unread = read_elements(path, up.name, read, latest_version(path), [("users", arrow_type(HLL))])
    assert unread.column(WEIGHT).to_pylist().count(-1) == len(withdrawn)
    run(down, spark=spark, progress=None, drain=True)  # the withdrawals reach the merges
    materialize(down)

    for stage in (up, down):
        report = verify(view_spec(stage), elements=load_source_elements(stage))
        assert report.ok, str(report)

    raw = [e for events in (*FIRST, LATE) for e in events]
    view = DeltaTable(str(down.lake_path / "current")).to_pyarrow_table().to_pylist()
    assert sorted(r["country"] for r in view) == ["de", "fr"]
    for row in view:
        day = [{"user": u, "ms": ms} for u, c, _, ms in raw if c == row["country"]]
        distinct = approx_count_distinct("user")
        direct = distinct.extract(distinct.add_all(distinct.create(), day))
        assert row["users"]["estimate"] == direct["estimate"] == len({e["user"] for e in day})
        median = approx_percentile("ms", 0.5)
        direct_median = median.extract(median.add_all(median.create(), day))
        assert row["median"]["quantile"] == direct_median["quantile"]
        values = sorted(e["ms"] for e in day)  # KLL's rank: the smallest value of rank >= 0.5
        assert row["median"]["quantile"] == values[(len(values) + 1) // 2 - 1]
