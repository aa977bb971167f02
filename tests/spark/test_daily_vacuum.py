"""Runs vacuum their tables once a day on their own (sinks.upkeep.auto_vacuum): the first run starts
the clock, a run a day later vacuums, with each table's own retention (here lowered to zero so
that every file compaction replaced is old)."""

from __future__ import annotations

import io
import json

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark

T0 = 1_800_000_000.0


def test_a_run_a_day_later_vacuums_the_tables_it_writes(spark, tmp_path, monkeypatch):
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from sinks.fold.materializer import Materializer
    from sinks.lake.tables import existing_table
    from sinks.upkeep import auto_vacuum, compaction
    from sinks.upkeep.auto_vacuum import last_vacuum
    from tests.pipelines import small_pipeline

    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 2)
    now = [T0]
    monkeypatch.setattr(auto_vacuum, "clock", lambda: now[0])
    pipeline = small_pipeline("daily", tmp_path / "lake", tmp_path / "landing", create_path=True)
    spec = view_spec(pipeline)
    tables = ("panes", "late", "rejected", "runs")
    said = io.StringIO()
    results = []
    for i, hours in enumerate((0, 1, 2, 3, 25, 26)):
        now[0] = T0 + hours * 3600
        lines = [json.dumps({"k": f"k{j % 3}", "ts": iso(i * 3600 + j * 60)}) for j in range(5)]
        lines += [json.dumps({"k": "old", "ts": iso(i * 3600 - 30 * 86400)}), "not json"]
        put(tmp_path / "landing", f"f{i}.jsonl", lines)
        results.append(run(pipeline, spark=spark, progress=said))
        if i == 0:  # (the runs table is written at the run's end: its clock starts at run 2)
            expected = dict.fromkeys(tables, T0) | {"runs": None}
            assert {t: last_vacuum(spec, t) for t in tables} == expected
        if i == 1:
            assert last_vacuum(spec, "runs") == T0 + 3600
            zero = {"delta.deletedFileRetentionDuration": "interval 0 hours"}
            for t in tables:
                existing_table(spec, t).alter.set_table_properties(zero)
    vacuumed = [sorted(v.table for v in r.vacuums) for r in results]
    assert vacuumed == [[], [], [], [], ["late", "panes", "rejected"], ["runs"]], said.getvalue()
    day = results[4]
    assert not any(v.error for v in day.vacuums) and "vacuum" in day.phases
    assert "vacuumed panes: " in said.getvalue() and "WARNING" not in said.getvalue()
    assert {t: last_vacuum(spec, t) for t in tables} == dict.fromkeys(tables, T0 + 25 * 3600) | {
        "runs": T0 + 26 * 3600
    }
    assert sum(v.deleted for v in day.vacuums) > 0
    folded = Materializer(spec).run()
    assert folded.did_work and folded.vacuum is None  # the fold's clock starts at its first
