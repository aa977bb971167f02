"""Operator tasks that write their own data files (jobs.task_files) give the tables the writer
task alone gives: the same rows, in more files, every file committed complete.

The fault-tolerance tests emit few rows per task, so everything goes through the writer task
there; this test makes every task write its rows itself (at most one row sent on, files of two
rows) and compares with the default run of the same landing files.
"""

from __future__ import annotations

import pytest

from tests.spark.test_cluster import contents, land
from tests.spark.test_kill_safety import CONF

pytestmark = pytest.mark.spark


def test_tasks_writing_their_rows_themselves_give_the_same_tables(spark, tmp_path, monkeypatch):
    from deltalake import DeltaTable

    from jobs.job import BatchSink
    from jobs.pipeline import load_pipeline
    from jobs.run import run
    from jobs.task_files import TaskWriting

    pipelines = {}
    for name in ("default", "task_files"):
        conf = tmp_path / f"{name}.toml"
        conf.write_text(CONF.format(lake=tmp_path / name, landing=tmp_path / "landing"))
        pipelines[name] = load_pipeline(conf)
    land(tmp_path / "landing", range(4))
    run(pipelines["default"], spark=spark, progress=None, drain=True)
    monkeypatch.setattr(BatchSink, "task_writing", property(
        lambda sink: TaskWriting(sink.tables, rows_as_rows=1, rows_per_file=2)))  # fmt: skip
    run(pipelines["task_files"], spark=spark, progress=None, drain=True)

    got, want = contents(pipelines["task_files"]), contents(pipelines["default"])
    assert len(got["panes"]) > 10 and got == want
    files = {name: DeltaTable(p.table_path("panes")).file_uris() for name, p in pipelines.items()}
    written_by_tasks = [f for f in files["task_files"] if "-t0" in f.rsplit("/", 1)[-1]]
    assert len(written_by_tasks) > len(files["default"])
    assert not any("-t0" in f.rsplit("/", 1)[-1] for f in files["default"])
