"""Runs that would lose or corrupt data are refused: a deleted checkpoint (and the documented
rebuild that recovers it), a lake another run holds."""

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


def test_panestore_run_of_a_busy_lake_exits_3_naming_the_holder(spark, tmp_path, capsys):
    from jobs.cli import EXIT_BUSY, main
    from tests.lock_holder import lock_held

    conf = tmp_path / "busy.toml"
    conf.write_text(
        f'name = "busy"\nlake = "{tmp_path / "lake"}"\nkeys = ["k"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1h)"\n[aggregates]\nn = "count()"\n[source]\n'
        f'path = "{tmp_path / "landing"}"\ncreate_path = true\n'
        'schema = { k = "string", ts = "timestamp" }\n'
    )
    with lock_held(tmp_path / "lake", "run") as pid:
        assert main(["run", str(conf), "-v"]) == EXIT_BUSY  # -v: stderr as it is
    err = capsys.readouterr().err
    assert f"another run of pipeline 'busy' is running (pid {pid}" in err
    assert sorted(x.name for x in (tmp_path / "lake").iterdir()) == ["_locks"]
