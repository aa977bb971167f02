"""A pipeline on a real multi-process cluster: Spark's ``local-cluster[2,1,1024]`` master (a
standalone master and workers inside the driver's JVM, two executor JVMs with their own Python
workers), through the command line in subprocesses.

Two scheduled runs: the first is SIGKILLed (its whole process group: driver, cluster,
executors) after the pane log committed batch 0 but not the late and rejected tables; the
rerun, after more files landed, replays batch 0 (the pane log writes nothing, the other two
commit), takes the new files and drains. The three tables equal those of the same sequence
under ``local[2]`` (in this process), and ``panestore verify`` passes. What the executors write
lands in the tables' directories: a driver-local path or executor-local state would fail here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.support import put
from tests.spark.test_kill_safety import CONF, FILES

pytestmark = pytest.mark.spark

CLUSTER = "local-cluster[2,1,1024]"
# Columns that differ between two runs of the same batches: the batch timestamps, and the ids
# that hash the batch id.
RUN_DEPENDENT = {"processing_time_us", "processing_time", "batch_id", "record_id"}


def land(landing, files):
    for i in files:
        path = put(landing, f"views-{i}.jsonl", FILES[i])
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # Spark reads in mtime order


def cli(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def contents(pipeline):
    """Each table's rows without the run-dependent columns, sorted."""
    from deltalake import DeltaTable

    out = {}
    for t in ("panes", "late", "rejected"):
        rows = DeltaTable(pipeline.table_path(t)).to_pyarrow_table().to_pylist()
        out[t] = sorted(
            repr(sorted((k, v) for k, v in r.items() if k not in RUN_DEPENDENT)) for r in rows
        )
    return out


def unreferenced(pipeline, table):
    """Parquet files in the table's directory that no commit of the table references."""
    from deltalake import DeltaTable

    referenced = {os.path.basename(f) for f in DeltaTable(pipeline.table_path(table)).file_uris()}
    names = os.listdir(pipeline.table_path(table))
    return [n for n in names if n.endswith(".parquet") and n not in referenced]


@pytest.fixture
def executor_work_dirs():
    """Removes the executors' work directories (``SPARK_HOME/work/app-*``, where a local
    cluster's workers put them) that appeared during the test."""
    import pyspark

    work = Path(pyspark.__file__).parent / "work"
    before = set(work.iterdir()) if work.exists() else set()
    yield
    for d in (set(work.iterdir()) if work.exists() else set()) - before:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.usefixtures("executor_work_dirs")
def test_a_killed_rerun_drained_pipeline_on_a_cluster_equals_local(spark, tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run

    landing = tmp_path / "landing"
    confs = {}
    for name in ("cluster", "local"):
        confs[name] = tmp_path / f"{name}.toml"
        confs[name].write_text(CONF.format(lake=tmp_path / name, landing=landing))
    on_cluster, local = load_pipeline(confs["cluster"]), load_pipeline(confs["local"])

    land(landing, [0, 1])
    killed = cli(
        "run",
        str(confs["cluster"]),
        "--master",
        CLUSTER,
        "--no-materialize",
        "--kill-at",
        "between_tables:0",
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert unreferenced(on_cluster, "rejected"), "the killed attempt wrote its rejected files"
    run(local, spark=spark, progress=None)

    land(landing, [2, 3])
    rerun = cli("run", str(confs["cluster"]), "--master", CLUSTER, "--drain")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "replayed batch" not in rerun.stderr  # batch 0 was due for two of its tables
    assert not unreferenced(on_cluster, "panes"), "the replay wrote nothing into the pane log"
    run(local, spark=spark, progress=None, drain=True)

    got, want = contents(on_cluster), contents(local)
    assert len(got["panes"]) > 10 and len(got["late"]) == 1 and len(got["rejected"]) == 2
    assert got == want
    verified = cli("verify", str(confs["cluster"]), timeout=200)
    assert verified.returncode == 0, verified.stdout + verified.stderr
