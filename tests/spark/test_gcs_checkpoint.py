"""Spark's checkpoint in a ``gs://`` bucket (the GCS emulator the tests start,
``tests/gcs_server.py``, through Google's Hadoop connector jar) and at a ``file://`` URI, the lake
local: the runs read and write the checkpoint and their own files through
:class:`jobs.checkpoint.files.CheckpointFiles` (the JVM's Hadoop filesystem while Spark runs, the
Python filesystem in Spark's Python workers and in the commands that start no Spark).

One scheduled run SIGKILLed in the middle of a batch and a rerun that drains end with the tables
of the same runs over a ``file://`` checkpoint (exactly once: the killed batch replayed from the
bucket's offsets and state, nothing counted twice); ``status``, which starts no Spark, reads the
bucket's checkpoint and operator state as the local one.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.spark.test_bucket_lake import command, ok
from tests.spark.test_cluster import contents
from tests.spark.test_kill_safety import land

pytestmark = [pytest.mark.spark, pytest.mark.gcs]


def placed(conf: Path, to: Path, lake: Path, checkpoint: str) -> Path:
    """A copy of the configuration ``conf`` at ``to`` with its lake and checkpoint set."""
    place = f'lake = "{lake}"\ncheckpoint = "{checkpoint}"'
    to.write_text(re.sub('^lake = ".*"$', place, conf.read_text(), count=1, flags=re.M))
    return to


def bucket_names(bucket: str, prefix: str) -> list[str]:
    """Every object name under ``prefix`` in the emulator's ``bucket`` (``gs://NAME``)."""
    from pyarrow import fs as pafs

    from jobs.checkpoint.files import arrow_filesystem

    gcs, root, _ = arrow_filesystem(bucket)
    infos = gcs.get_file_info(pafs.FileSelector(f"{root}/{prefix}", recursive=True))
    return sorted(i.path.removeprefix(f"{root}/{prefix}/") for i in infos if i.is_file)


def test_a_checkpoint_in_a_gcs_bucket_survives_a_kill_and_reads_back_without_spark(
    spark, tmp_path, gcs_bucket
):
    from jobs import api
    from jobs.config.load import load_pipeline

    conf = land(tmp_path)  # four landing files, a batch each
    here = placed(conf, tmp_path / "file.toml", tmp_path / "lake-f", (tmp_path / "ck").as_uri())
    there = placed(conf, tmp_path / "gs.toml", tmp_path / "lake-g", f"{gcs_bucket}/runs/kills")
    local, remote = load_pipeline(here), load_pipeline(there)

    # file:// URI: the checkpoint and the run's files in that directory, none in the lake
    api.run(local, spark=spark, progress=None, drain=True)
    assert (tmp_path / "ck" / "_checkpoint" / "commits").is_dir()
    assert (tmp_path / "ck" / "_fingerprint.json").is_file()
    assert not (tmp_path / "lake-f" / "_checkpoint").exists()

    # gs://: killed in the middle of batch 1 (its state written, nothing committed), then rerun
    killed = command("run", str(there), "--no-materialize", "--kill-at", "before_commit:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    outputs = [ok(command("run", str(there), "--drain"))]
    want = contents(local)
    assert len(want["panes"]) > 5 and want["late"] and want["rejected"]
    assert contents(remote) == want  # every pane once: the killed batch replayed from the bucket

    names = bucket_names(gcs_bucket, "runs/kills")
    for expected in (
        "_checkpoint/metadata",
        "_checkpoint/commits/4",  # four files, then the drain's batch
        "_fingerprint.json",
        "_state_layout.json",
        "_lake_identity.json",
    ):
        assert expected in names, (expected, names)
    assert any(n.startswith("_checkpoint/state/shard-") for n in names), names
    assert not any(n.endswith(".tmp") for n in names), names
    assert sorted(p.name for p in (tmp_path / "lake-g").iterdir()) == sorted(
        p.name for p in (tmp_path / "lake-f").iterdir()
    )  # the lake holds the tables and locks only, as beside a file:// checkpoint

    # status starts no Spark: it reads the bucket through the Python filesystem
    status = [json.loads(ok(command("status", str(c), "--json"))) for c in (here, there)]
    same = ("last_batch_id", "watermark", "backlog", "operator_state", "pane_log_version")
    assert {k: status[1][k] for k in same} == {k: status[0][k] for k in same}
    assert status[1]["last_batch_id"] == 4  # the drain's batch
    assert status[1]["operator_state"]["batch_id"] == 4  # read from the bucket's state files
    outputs.append(ok(command("check", str(there))))
    for said in outputs:
        assert "Traceback" not in said, said[-4000:]


def test_the_hadoop_store_answers_as_the_local_one(spark, tmp_path):
    """The driver's store during a run (the JVM's Hadoop filesystem, here the local one behind
    ``file://``): written whole by a rename over the old file, created once, listed, read."""
    from jobs.checkpoint.files import CheckpointFiles, HadoopStore
    from tests.jobs.test_checkpoint_files import _exercise

    root = (tmp_path / "run").as_uri()
    files = CheckpointFiles(root, HadoopStore(spark, root))
    _exercise(files)
    assert not [p for p in (tmp_path / "run").rglob("*.tmp")]
