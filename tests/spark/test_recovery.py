"""A lake whose checkpoint was deleted is refused, and the documented rebuild recovers it."""

from __future__ import annotations

import shutil

import pytest

from tests.spark.support import put
from tests.spark.test_job import view
from tests.spark.test_landing_files import make_pipeline, view_and_verify

pytestmark = pytest.mark.spark


def test_a_deleted_checkpoint_is_refused_and_a_rebuild_recovers(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.checkpoint import CheckpointBehind
    from jobs.run import run

    pipeline = make_pipeline(tmp_path)
    put(tmp_path / "landing", "a.jsonl", [view("a", 10)])
    run(pipeline, spark=spark, progress=None)
    shutil.rmtree(pipeline.checkpoint_path)
    put(tmp_path / "landing", "b.jsonl", [view("b", 20)])
    versions = {t: DeltaTable(pipeline.table_path(t)).version() for t in ("panes", "rejected")}

    # Without the refusal, batch 0 of a new checkpoint (both files) would be skipped as
    # committed: b would be lost.
    with pytest.raises(CheckpointBehind, match="is missing, but the lake's tables hold batches"):
        run(pipeline, spark=spark, progress=None)
    assert {t: DeltaTable(pipeline.table_path(t)).version() for t in versions} == versions

    shutil.move(str(tmp_path / "lake"), str(tmp_path / "lake-aside"))  # the documented rebuild
    run(pipeline, spark=spark, drain=True, progress=None)
    assert view_and_verify(pipeline) == {"a": 1, "b": 1}
