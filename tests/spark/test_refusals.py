"""Runs that would lose or corrupt data are refused: a deleted checkpoint (and the documented
rebuild that recovers it), a lake another run holds."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.spark.support import put
from tests.spark.test_job import view
from tests.spark.test_landing_files import make_pipeline, view_and_verify

pytestmark = pytest.mark.spark


def test_a_deleted_checkpoint_is_refused_and_a_rebuild_recovers(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.checkpoint.logs import CheckpointBehind
    from jobs.driver.runs import run

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
    from jobs.cli.commands import EXIT_BUSY, main
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


def test_a_copied_or_moved_project_is_refused_before_spark(spark, tmp_path):
    """Spark's checkpoint names landing files and operator state by absolute path: run in a
    ``cp -a`` copy, every landing file was taken again (each event counted twice, exit 0); run
    after ``mv``, the operator created directories at the old place and failed. Both are now
    refused before Spark starts (exit 2, naming the lake), and neither lake changes."""
    import subprocess
    import sys

    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    proj = tmp_path / "proj"
    conf = proj / "p.toml"
    put(proj / "landing", "a.jsonl", [view("a", 10), view("b", 20)])
    put(proj / "landing", "b.jsonl", [view("a", 30)])
    conf.write_text(  # a project as users keep one: relative paths
        'name = "moves"\nlake = "lake"\nkeys = ["device_id"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1h)"\n[aggregates]\nplays = "count()"\n[source]\n'
        'path = "landing"\n'
        'schema = { device_id = "string", ts = "timestamp", seconds = "double" }\n'
    )
    # the first run, in this process's session: as a run in proj names the paths
    here = {"lake": str(proj / "lake"), "source": {"path": str(proj / "landing")}}
    run(load_pipeline(conf, overrides=here), spark=spark, progress=None)

    def tree(lake):
        return sorted(str(p.relative_to(lake)) for p in lake.rglob("*"))

    def run_in(root):
        return subprocess.run(
            [sys.executable, "-m", "jobs.cli.commands", "run", "p.toml", "--no-materialize"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(proj), str(copy)], check=True)
    before = tree(copy / "lake")
    proc = run_in(copy)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        f"lake: the lake {copy / 'lake'} was created at {proj / 'lake'}: it was copied or moved"
    ) in proc.stderr
    assert tree(copy / "lake") == before  # nothing taken again, nothing written

    moved = tmp_path / "moved"
    proj.rename(moved)
    proc = run_in(moved)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"lake: the lake {moved / 'lake'} was created at {proj / 'lake'}" in proc.stderr
    assert not proj.exists()  # nothing created at the old place
    assert tree(moved / "lake") == before


def test_tables_restored_under_a_live_checkpoint_are_refused_before_spark(spark, tmp_path):
    """A lake whose checkpoint is apart (as bucket lakes need): its tables restored from an older
    backup, or deleted, while the checkpoint survived. The run went on at the checkpoint's next
    batch into the older tables (exit 0), and the batches in between were gone from the pane
    log, ``late`` and ``rejected`` for good. Now refused before Spark starts (exit 2, naming
    both places and the rebuild); the documented rebuild recovers every event."""
    import subprocess
    import sys

    from deltalake import DeltaTable

    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    conf = tmp_path / "p.toml"
    conf.write_text(
        f'name = "restored"\nlake = "{tmp_path / "lake"}"\n'
        f'checkpoint = "{tmp_path / "ckpt"}"\nkeys = ["device_id"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1h)"\n[aggregates]\nplays = "count()"\n[source]\n'
        f'path = "{tmp_path / "landing"}"\n'
        'schema = { device_id = "string", ts = "timestamp", seconds = "double" }\n'
    )
    pipeline = load_pipeline(conf)
    put(tmp_path / "landing", "a.jsonl", [view("a", 10)])
    run(pipeline, spark=spark, progress=None)
    shutil.copytree(tmp_path / "lake", tmp_path / "backup")
    put(tmp_path / "landing", "b.jsonl", [view("b", 20)])
    run(pipeline, spark=spark, progress=None)  # b: only in the tables the backup lacks

    def run_command():
        return subprocess.run(
            [sys.executable, "-m", "jobs.cli.commands", "run", str(conf), "--no-materialize"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )

    shutil.rmtree(tmp_path / "lake")
    shutil.copytree(tmp_path / "backup", tmp_path / "lake")
    versions = {t: DeltaTable(pipeline.table_path(t)).version() for t in ("panes", "rejected")}
    offsets = sorted(os.listdir(tmp_path / "ckpt" / "_checkpoint" / "offsets"))
    put(tmp_path / "landing", "c.jsonl", [view("c", 30)])
    proc = run_command()
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"the checkpoint {tmp_path / 'ckpt' / '_checkpoint'} has committed batches" in err
    assert f"{tmp_path / 'lake' / 'panes'} ends at batch" in err
    assert "move its lake" in err and str(tmp_path / "ckpt") in err
    assert sorted(os.listdir(tmp_path / "ckpt" / "_checkpoint" / "offsets")) == offsets
    assert {t: DeltaTable(pipeline.table_path(t)).version() for t in versions} == versions

    shutil.rmtree(tmp_path / "lake" / "late")  # a deleted table: refused as well
    proc = run_command()
    assert proc.returncode == 2 and f"{tmp_path / 'lake' / 'late'} holds no batch" in proc.stderr

    # the rebuild the message names: lake and checkpoint aside, every landed file again
    shutil.move(str(tmp_path / "lake"), str(tmp_path / "lake-aside"))
    shutil.move(str(tmp_path / "ckpt"), str(tmp_path / "ckpt-aside"))
    run(pipeline, spark=spark, drain=True, progress=None)
    assert view_and_verify(pipeline) == {"a": 1, "b": 1, "c": 1}
