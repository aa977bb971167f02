"""Lakes in an S3 bucket, end to end through the command line, against a real S3 server process
(moto's server mode, started by the tests on the loopback address: ``tests/s3_server.py``).

Each command runs in a child process that inherits the standard AWS environment naming the
server, as a user's scheduled job would; Spark's checkpoint stays in a local directory apart from
the lake (``checkpoint``). The tables a bucket lake ends with equal those of the same runs on a
local lake; the credentials appear in no output and no object.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.spark.test_cluster import contents
from tests.spark.test_delta_source import CONF as SPEND_CONF
from tests.spark.test_kill_safety import land

pytestmark = pytest.mark.spark

SECRET = "AWS_SECRET_ACCESS_KEY"


def command(*args: str, timeout: float = 300, wait: bool = True, env=None):
    argv = [sys.executable, "-m", "jobs.cli.commands", *args]
    if not wait:
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, start_new_session=True, env=env
    )


def ok(proc) -> str:
    assert proc.returncode == 0, (proc.args, proc.returncode, proc.stderr[-3000:])
    return proc.stdout + proc.stderr


def bucket_objects(lake: str) -> dict[str, bytes]:
    """Every object under the lake's bucket: key -> content."""
    import boto3

    bucket = lake.removeprefix("s3://").split("/")[0]
    s3 = boto3.client("s3")
    keys = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", ())
    ]
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def in_bucket(conf: Path, lake: str, checkpoint: Path) -> None:
    """Point the configuration ``conf`` at a lake in the bucket, its checkpoint apart."""
    place = f'lake = "{lake}"\ncheckpoint = "{checkpoint}"'
    conf.write_text(re.sub('^lake = ".*"$', place, conf.read_text(), count=1, flags=re.M))


@dataclass
class StoreRuns:
    """What :func:`runs_on_a_store_lake` leaves: the configurations of the lake in the store and
    of the same pipeline on a local lake, the tables the local runs wrote, and what each command
    said."""

    conf: Path
    local_conf: Path
    pipeline: Any
    want: dict[str, Any]
    outputs: list[str]


def runs_on_a_store_lake(
    spark, tmp_path: Path, lake: str, objects: Callable[[str], dict[str, bytes]]
) -> StoreRuns:
    """What a lake on an object store (``lake``; ``objects``: its objects by key, from the
    bucket's or container's root) passes as a local lake does: a run SIGKILLed in the middle of
    batch 1, a second run refused meanwhile (the lake's lock, by the store's conditional
    writes), a rerun that takes over the dead run's lock and drains; the tables then equal those
    of the same runs on a local lake (every pane once), ``verify`` passes and ``query`` answers
    as on the local lake."""
    from jobs import api
    from jobs.config.load import load_pipeline

    local_conf = land(tmp_path)  # the landing files, and a pipeline of them on a local lake
    local = load_pipeline(local_conf)
    conf = tmp_path / "store.toml"
    conf.write_text(local_conf.read_text())
    in_bucket(conf, lake, tmp_path / "checkpoint")
    pipeline = load_pipeline(conf)
    outputs: list[str] = []

    killed = command(
        "run", str(conf), "--no-materialize", "--kill-at", "before_commit:1", wait=False
    )
    lock = f"{lake.split('://', 1)[1].split('/', 1)[1]}/_locks/run.lock"
    deadline = time.monotonic() + 120
    while lock not in objects(lake):
        assert killed.poll() is None and time.monotonic() < deadline, killed.communicate()
        time.sleep(0.2)
    second = command("run", str(conf), "--no-materialize")
    assert second.returncode == 3, second.stderr[-2000:]
    assert "another run of pipeline 'kills' is running" in second.stderr
    outputs.append(second.stdout + second.stderr)
    out, err = killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL, err[-3000:]
    outputs.append(out + err)

    outputs.append(ok(command("run", str(conf), "--drain")))
    api.run(local, spark=spark, progress=None, drain=True)  # and the fold
    want = contents(local)
    assert len(want["panes"]) > 10 and want["late"] and want["rejected"]
    assert contents(pipeline) == want  # none lost, none twice

    outputs.append(ok(command("verify", str(conf))))
    sql = "SELECT device_id, plays, watched FROM current ORDER BY ALL"
    answer = ok(command("query", str(conf), sql))
    assert answer == ok(command("query", str(local_conf), sql))
    outputs.append(answer)
    return StoreRuns(conf, local_conf, pipeline, want, outputs)


def assert_said_nowhere(
    secret: str, runs: StoreRuns, objects: dict[str, bytes], checkpoint: Path
) -> None:
    """``secret`` is in no output of ``runs``, no object of the lake, no file of the
    checkpoint."""
    for text in runs.outputs:
        assert secret not in text
    for key, body in objects.items():
        assert secret.encode() not in body, key
    for path in checkpoint.rglob("*"):
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path


def test_scheduled_runs_killed_and_refused_then_every_command_on_a_bucket_lake(
    spark, tmp_path, bucket_lake
):
    runs = runs_on_a_store_lake(spark, tmp_path, bucket_lake, bucket_objects)
    conf, outputs = str(runs.conf), runs.outputs
    outputs.append(ok(command("changes", conf, "--since", "0")))
    outputs.append(ok(command("history", conf, "--key", "a")))
    outputs.append(ok(command("plot", conf, "--key", "a", "--out", str(tmp_path / "a.png"))))
    outputs.append(ok(command("optimize", conf)))
    outputs.append(ok(command("vacuum", conf, "--retention-hours", "0", "--force")))
    assert contents(runs.pipeline) == runs.want  # compacted and vacuumed: the same rows
    secret = os.environ[SECRET]
    assert_said_nowhere(secret, runs, bucket_objects(bucket_lake), tmp_path / "checkpoint")


DOWNSTREAM = """\
name = "daily"
lake = "{lake}"
checkpoint = "{checkpoint}"
keys = ["user"]
window = "FixedWindows(1d)"
trigger = "AfterWatermark(late=AfterCount(1))"
accumulation_mode = "accumulating_and_retracting"
allowed_lateness = "1d"
state_buckets = 4
[source]
format = "pane_log"
path = "{upstream}"
[aggregates]
windows = "count()"
total = "sum(total)"
"""


def test_a_delta_table_in_a_bucket_feeds_a_chain_of_bucket_lakes(tmp_path, bucket_lake):
    """A Delta source table in the bucket, its pipeline's lake in the bucket, and a downstream
    whose upstream is that lake: drained, each verifies against its batch answer."""
    bronze, upstream, downstream = (f"{bucket_lake}/{n}" for n in ("bronze", "spend", "daily"))
    writer = [sys.executable, "-m", "tests.spark.delta_writer", bronze, "append", "0", "300", "3"]
    subprocess.run(writer, check=True, capture_output=True, timeout=120)
    spend = tmp_path / "spend.toml"
    spend.write_text(SPEND_CONF.format(lake=upstream, table=bronze, extra=""))
    in_bucket(spend, upstream, tmp_path / "spend-checkpoint")
    daily = tmp_path / "daily.toml"
    daily.write_text(
        DOWNSTREAM.format(lake=downstream, checkpoint=tmp_path / "daily-ckpt", upstream=upstream)
    )
    for conf in (spend, daily):
        ok(command("run", str(conf), "--drain"))
        assert "verify: OK" in ok(command("verify", str(conf)))
    # credentials in the AWS shared files only: every library of every command finds them
    (tmp_path / "credentials").write_text(
        f"[lakes]\naws_access_key_id = {os.environ['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {os.environ[SECRET]}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", SECRET)}
    env.update(AWS_PROFILE="lakes", AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"))
    assert "verify: OK" in ok(command("verify", str(daily), env=env))
    sql = "SELECT sum(total) AS total, sum(windows) AS windows FROM current"
    answer = command("query", str(daily), sql, "--format", "json", env=env)
    ok(answer)
    view = json.loads(answer.stdout)  # one row: one JSON line
    assert view["total"] == sum(float(i % 11) for i in range(300) if i % 53 != 52)
