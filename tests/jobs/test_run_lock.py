"""One run per lake: a second ``panestore run`` of a lake refuses, writing nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from jobs.pipeline import pipeline_from_dict
from sinks.errors import LakeBusy


def pipeline(tmp_path):
    return pipeline_from_dict({
        "name": "locked", "lake": str(tmp_path / "lake"), "keys": ["k"], "event_time": "ts",
        "window": "FixedWindows(1h)", "aggregates": {"n": "count()"},
        "source": {"path": str(tmp_path / "landing"), "create_path": True,
                   "schema": {"k": "string", "ts": "timestamp"}},
    })  # fmt: skip


def hold(lock, pid: int) -> None:
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "since": time.time()}))


def test_a_second_run_of_a_lake_is_refused_before_spark_and_writes_nothing(tmp_path):
    from jobs.run import run

    p = pipeline(tmp_path)
    lock = tmp_path / "lake" / "_locks" / "run.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        hold(lock, holder.pid)
        with pytest.raises(LakeBusy, match=rf"another run of pipeline 'locked' is running \(pid "
                                           rf"{holder.pid} on "):  # fmt: skip
            run(p, spark=None)  # refused before a Spark session is asked for
        assert sorted(x.name for x in (tmp_path / "lake").iterdir()) == ["_locks"]
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_dead_run_is_taken_over(tmp_path):
    from sinks.lock import LakeLock

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = tmp_path / "lake" / "_locks" / "run.lock"
    hold(lock, dead.pid)
    with LakeLock(str(tmp_path / "lake"), "run", "another run"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()
