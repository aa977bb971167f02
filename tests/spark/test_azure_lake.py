"""A lake on Azure storage (``az://container/prefix``), end to end through the command line,
against the Azurite emulator the tests start (``tests/azurite_server.py``).

As for a lake in a bucket (``tests/spark/test_bucket_lake.py``): each command runs in a child
process that inherits the standard Azure environment naming the emulator, as a scheduled job
would; Spark's checkpoint stays in a local directory apart from the lake. A run killed in the
middle of a batch, a second run refused meanwhile (the lake's lock, by Azure's conditional
writes) and a rerun that drains leave the tables a local lake has after the same runs (exactly
once); ``verify``, ``query`` and ``status`` read them; the account key appears in no output and no
object of the container.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.azurite_server import container_objects
from tests.spark.test_bucket_lake import command, in_bucket, ok
from tests.spark.test_cluster import contents
from tests.spark.test_kill_safety import land

pytestmark = pytest.mark.spark


def test_scheduled_runs_killed_and_refused_then_commands_on_an_azure_lake(
    spark, tmp_path, azure_lake
):
    from jobs import api
    from jobs.config.load import load_pipeline

    local_conf = land(tmp_path)  # the landing files, and a pipeline of them on a local lake
    local = load_pipeline(local_conf)
    conf = tmp_path / "azure.toml"
    conf.write_text(local_conf.read_text())
    in_bucket(conf, azure_lake, tmp_path / "checkpoint")
    pipeline = load_pipeline(conf)
    outputs: list[str] = []

    # a run SIGKILLed in the middle of batch 1; a second run started meanwhile is refused
    killed = command(
        "run", str(conf), "--no-materialize", "--kill-at", "before_commit:1", wait=False
    )
    deadline = time.monotonic() + 120
    while "prod/sessions/_locks/run.lock" not in container_objects(azure_lake):
        assert killed.poll() is None and time.monotonic() < deadline, killed.communicate()
        time.sleep(0.2)
    second = command("run", str(conf), "--no-materialize")
    assert second.returncode == 3, second.stderr[-2000:]
    assert "another run of pipeline 'kills' is running" in second.stderr
    outputs.append(second.stdout + second.stderr)
    out, err = killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL, err[-3000:]
    outputs.append(out + err)

    # the rerun takes over the dead run's lock at once (same host, its process gone) and ends it
    outputs.append(ok(command("run", str(conf), "--drain")))
    api.run(local, spark=spark, progress=None, drain=True)  # and the fold
    want = contents(local)
    assert len(want["panes"]) > 10 and want["late"] and want["rejected"]
    assert contents(pipeline) == want  # every pane once: none lost, none twice

    outputs.append(ok(command("verify", str(conf))))
    sql = "SELECT device_id, plays, watched FROM current ORDER BY ALL"
    answer = ok(command("query", str(conf), sql))
    assert answer == ok(command("query", str(local_conf), sql))
    outputs.append(answer)
    status = command("status", str(conf), "--json")
    outputs.append(ok(status))
    said = json.loads(status.stdout)
    assert said["lake"] == azure_lake and said["last_batch_id"] is not None, said

    key = os.environ["AZURE_STORAGE_ACCOUNT_KEY"]
    for text in outputs:
        assert key not in text
    for name, body in container_objects(azure_lake).items():
        assert key.encode() not in body, name
    for path in (tmp_path / "checkpoint").rglob("*"):
        assert not path.is_file() or key.encode() not in path.read_bytes(), path
