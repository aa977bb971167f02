"""Run after run, a pipeline's tables stay small without ``panestore optimize``: each run
compacts the tables it wrote, each fold the view, once their small files pass the threshold
(here lowered to 3); a replayed batch is still skipped and the view is still right."""

from __future__ import annotations

import io
import json
import os

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark

RUNS = 8


def test_runs_keep_their_tables_small_and_exactly_once(spark, tmp_path, monkeypatch):
    from jobs.config.sink_spec import view_spec
    from jobs.driver.runs import run
    from jobs.inspection.source_elements import load_source_elements
    from sinks.fold.materializer import Materializer
    from sinks.lake.tables import existing_table
    from sinks.upkeep import compaction
    from sinks.upkeep.compaction import mergeable_small_files
    from sinks.verification.view_check import verify
    from tests.pipelines import small_pipeline

    monkeypatch.setattr(compaction, "MAX_SMALL_FILES", 3)
    pipeline = small_pipeline("small", tmp_path / "lake", tmp_path / "landing", create_path=True)
    spec = view_spec(pipeline)
    said, compacted = io.StringIO(), set()
    for i in range(RUNS):  # an hour of events a run; a late event and a bad line in each
        lines = [json.dumps({"k": f"k{j % 3}", "ts": iso(i * 3600 + j * 60)}) for j in range(20)]
        lines += [json.dumps({"k": "old", "ts": iso(i * 3600 - 30 * 86400)}), "not json"]
        put(tmp_path / "landing", f"f{i}.jsonl", lines)
        result = run(pipeline, spark=spark, progress=said)
        folded = Materializer(spec).run()
        compacted |= {c.table for c in result.compactions if not c.error}
        if folded.compaction is not None and not folded.compaction.error:
            compacted.add("current")
        for name in ("panes", "current", "late", "rejected"):
            assert mergeable_small_files(existing_table(spec, name)) <= 3, (i, name)
        # (the run's own row goes in after its compaction)
        assert mergeable_small_files(existing_table(spec, "runs")) <= 4, i
    assert compacted == {"panes", "current", "late", "rejected", "runs"}
    assert "compacted panes: " in said.getvalue()

    # Spark loses its last commit: the next run replays that batch, which every table skips
    commits = os.path.join(pipeline.checkpoint_path, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        os.remove(os.path.join(commits, name))
    versions = {n: existing_table(spec, n).version() for n in ("panes", "late", "rejected")}
    replay = run(pipeline, spark=spark, progress=said)
    assert [b.batch_id for b in replay.batches] == [last] and replay.committed() == []
    assert {n: existing_table(spec, n).version() for n in versions} == versions

    # the view is the batch computation of every input, every row counted once
    Materializer(spec).run()
    report = verify(spec, elements=load_source_elements(pipeline))
    assert report.ok, str(report)
    late = existing_table(spec, "late").to_pyarrow_table()
    rejected = existing_table(spec, "rejected").to_pyarrow_table()
    # (the first run's old event is on time: no watermark yet)
    assert (late.num_rows, rejected.num_rows) == (RUNS - 1, RUNS)
