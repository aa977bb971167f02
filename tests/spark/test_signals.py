"""``panestore run --follow`` stopped by Ctrl-C (SIGINT to its process group, as a terminal sends
it) or by SIGTERM (to the process, as ``kill`` sends it): the run stops cleanly, folds, releases
the lake's lock and exits 0, and the next run has nothing to redo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from sinks.lake.lock import LakeLock
from tests.spark.support import put
from tests.spark.test_job import view

pytestmark = pytest.mark.spark

CONF = """\
name = "stopped"
lake = "{lake}"
keys = ["device_id"]
event_time = "ts"
window = "FixedWindows(1h)"
trigger = "AfterWatermark(early=AfterCount(1), late=AfterCount(1))"
state_buckets = 2

[source]
path = "{landing}"
schema = {{ device_id = "string", ts = "timestamp", seconds = "double" }}

[aggregates]
plays = "count()"
"""


def follow_until_a_batch_then(conf, send, sig, timeout=240):
    """Start ``panestore run CONF --follow``, wait for its first batch line, ``send`` it ``sig``;
    the exit status and stderr."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.cli.commands",
            "run",
            str(conf),
            "--follow",
            "--interval",
            "1s",
        ],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    batch_seen = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if ": batch " in line:
                batch_seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert batch_seen.wait(timeout), "".join(lines)[-3000:]
        send(proc.pid, sig)
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(10)
    return proc.returncode, "".join(lines)


def test_sigint_and_sigterm_stop_a_following_run_cleanly(spark, tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run
    from tests.spark.test_landing_files import view_and_verify

    conf = tmp_path / "stopped.toml"
    conf.write_text(CONF.format(lake=tmp_path / "lake", landing=tmp_path / "landing"))
    pipeline = load_pipeline(conf)
    lock = LakeLock(str(tmp_path / "lake"), "run", "the stopped run")
    rounds = [("a", signal.SIGINT, os.killpg), ("b", signal.SIGTERM, os.kill)]
    for device, sig, send in rounds:
        put(tmp_path / "landing", f"{device}.jsonl", [view(device, 10)])
        status, err = follow_until_a_batch_then(conf, send, sig)
        assert status == 0, err[-3000:]
        assert f"stopped on {sig.name}" in err, err[-3000:]
        assert "materialize: folded pane-log versions" in err, err[-3000:]
        assert "run failed" not in err and "Traceback" not in err, err[-3000:]
        with lock:  # released: another run may take it (LakeBusy otherwise)
            pass

    # Nothing to redo: no batch is replayed, no input is left, and the view holds both rounds.
    result = run(pipeline, spark=spark, progress=None)
    assert result.total("rows") == 0
    assert all(b.stats is None or b.stats.committed for b in result.batches)
    assert view_and_verify(pipeline) == {"a": 1, "b": 1}
