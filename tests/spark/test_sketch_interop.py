"""Sketch aggregates and Spark: a pipeline's pane log, read by Spark's own sketch functions.

A pipeline over landing JSON files computes ``approx_count_distinct``, ``approx_percentile``,
``approx_quantiles`` and ``top_k`` per page and hour; Spark reads the pane log's Parquet files
(the files delta-rs lists) and its ``hll_sketch_estimate`` / ``kll_sketch_get_quantile_double``
give each pane's own answers, ``hll_union`` / ``kll_sketch_merge_double`` accept the sketches, and
``approx_top_k_estimate`` reads a ``top_k`` sketch wrapped as Spark's state (docs/aggregates.md).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark

HOUR = 3600


def _pipeline(tmp_path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "pages",
            "lake": str(tmp_path / "lake"),
            "keys": ["page"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "source": {
                "format": "jsonl",
                "path": str(tmp_path / "landing"),
                "schema": {"page": "string", "ts": "timestamp", "user": "string", "ms": "long"},
            },
            "aggregates": {
                "users": "approx_count_distinct(user)",
                "p95": "approx_percentile(ms, 0.95)",
                "qs": "approx_quantiles(ms, [0.5, 0.99])",
                "top": "top_k(user, 2)",
            },
        }
    )


def _events():
    """Two pages over two hours: users u0..u(n), latencies 1..; a null latency and user."""
    out = []
    for i in range(300):
        page = "home" if i % 3 else "cart"
        rec = {"page": page, "ts": iso((i % 2) * HOUR + i), "user": f"u{i % 37}", "ms": i % 101}
        if i == 5:
            rec["ms"] = None
        if i == 7:
            rec["user"] = None
        out.append(rec)
    return out


def test_spark_reads_the_pane_logs_sketches(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification.view_check import verify

    pipeline = _pipeline(tmp_path)
    events = _events()
    put(tmp_path / "landing", "a.jsonl", [json.dumps(e) for e in events[:150]])
    put(tmp_path / "landing", "b.jsonl", [json.dumps(e) for e in events[150:]])
    run(pipeline, spark=spark, progress=None)
    # a second run opens the lake again (its struct columns are the configuration's types)
    run(pipeline, spark=spark, drain=True, progress=None)
    materialize(pipeline)
    report = verify(view_spec(pipeline), elements=load_source_elements(pipeline))
    assert report.ok, str(report)

    files = DeltaTable(pipeline.table_path("panes")).file_uris()
    panes = spark.read.parquet(*files).where("NOT is_retraction")
    rows = panes.selectExpr(
        "page",
        "window_start_us",
        "users.estimate AS users",
        "hll_sketch_estimate(users.sketch) AS spark_users",
        "hll_sketch_estimate(hll_union(users.sketch, users.sketch)) AS spark_union",
        "p95.quantile AS p95",
        "kll_sketch_get_quantile_double(p95.sketch, 0.95) AS spark_p95",
        "qs.quantiles AS qs",
        "array(kll_sketch_get_quantile_double(qs.sketch, 0.5),"
        " kll_sketch_get_quantile_double(qs.sketch, 0.99)) AS spark_qs",
        "kll_sketch_get_quantile_double(kll_sketch_merge_double(qs.sketch, p95.sketch), 0.5)"
        " AS spark_merged",
        "kll_sketch_get_n_double(qs.sketch) AS spark_n",
        "top.items AS top",
        "approx_top_k_estimate(named_struct('sketch', concat(top.sketch, x'0000000000000000'),"
        " 'maxItemsTracked', 192, 'itemDataType', CAST(NULL AS STRING),"
        " 'itemDataTypeDDL', 'STRING'), 2) AS spark_top",
    ).collect()
    assert len(rows) == 4  # two pages, two hours, one on-time pane each
    for r in rows:
        window = [
            e
            for e in events
            if e["page"] == r["page"]
            and (e["ts"] >= iso(HOUR)) == (r["window_start_us"] % (2 * HOUR * 10**6) != 0)
        ]
        users = {e["user"] for e in window if e["user"] is not None}
        latencies = sorted(e["ms"] for e in window if e["ms"] is not None)
        assert r["users"] == r["spark_users"] == r["spark_union"] == len(users)
        assert r["p95"] == r["spark_p95"]
        assert r["qs"] == r["spark_qs"]
        assert r["spark_n"] == len(latencies)
        assert r["spark_merged"] == r["qs"][0]  # a sketch merged with itself: the same ranks
        assert r["qs"][0] == latencies[-(-len(latencies) // 2) - 1]  # inclusive rank 0.5
        # Spark breaks ties in its own order: the same counts, each the item's exact count
        counts = Counter(e["user"] for e in window if e["user"] is not None)
        assert [t["count"] for t in r["top"]] == [t["count"] for t in r["spark_top"]]
        for t in (*r["top"], *r["spark_top"]):
            assert counts[t["item"]] == t["count"]
    everyone = {e["user"] for e in events if e["user"] is not None}
    union = panes.selectExpr("hll_sketch_estimate(hll_union_agg(users.sketch)) AS n").first()
    assert union["n"] == len(everyone)
