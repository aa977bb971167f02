"""The fold's worker processes (:mod:`sinks.fold.piece_workers`): each task in a fresh process,
its result or its exception back, and nothing left running when the materializer dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sinks.fold.piece_workers import PieceWorkers, WorkerDied
from sinks.lake.errors import FoldValueOutOfRange

REPO = Path(__file__).resolve().parents[2]


def _window_beyond_its_column() -> None:
    raise FoldValueOutOfRange("key ('u1',), window [10, 20): total beyond int64")


def _noisy() -> int:
    print("a task's own output")  # (on the server's standard output: not a reply)
    sys.stdout.flush()
    return 5


def _killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_each_task_runs_in_a_fresh_process_and_its_result_comes_back():
    workers = PieceWorkers.shared()
    first, second = workers.run(os.getpid), workers.run(os.getpid)
    assert len({first, second, os.getpid()}) == 3
    assert workers.run(sorted, [3, 1, 2]) == [1, 2, 3]
    assert workers.run(_noisy) == 5
    assert PieceWorkers.shared() is workers


def test_a_task_sees_the_environment_of_the_moment_it_is_sent(monkeypatch):
    """Credentials set after the server started (a lake in a bucket) reach the task."""
    PieceWorkers.shared()
    monkeypatch.setenv("PANESTORE_TEST_LATE_SETTING", "set after the server started")
    got = PieceWorkers.shared().run(os.environ.get, "PANESTORE_TEST_LATE_SETTING")
    assert got == "set after the server started"


def test_a_task_s_exception_is_raised_as_itself():
    with pytest.raises(FoldValueOutOfRange, match="beyond int64"):
        PieceWorkers.shared().run(_window_beyond_its_column)


def test_a_worker_killed_is_reported_and_the_next_task_runs():
    workers = PieceWorkers.shared()
    with pytest.raises(WorkerDied, match="killed by signal 9"):
        workers.run(_killed)
    assert workers.run(sum, [1, 2]) == 3


def processes_marked(mark: str) -> list[int]:
    """The processes whose environment holds ``PANESTORE_TEST_MARK=<mark>``."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        if f"PANESTORE_TEST_MARK={mark}".encode() in environ.split(b"\0"):
            found.append(int(d))
    return found


def wait_until_gone(mark: str, seconds: float = 10.0) -> list[int]:
    """The processes of ``mark`` still alive after waiting up to ``seconds`` for them to end."""
    deadline = time.monotonic() + seconds
    while (left := processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


_BUSY = """
import sys, time
from pathlib import Path
from sinks.fold.piece_workers import PieceWorkers

def busy(flag):
    Path(flag).write_text("folding")
    time.sleep(120)

PieceWorkers.shared().run(busy, sys.argv[1])
"""


@pytest.mark.heavy
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc (Linux)")
def test_a_materializer_killed_mid_task_leaves_no_worker_running(tmp_path):
    """SIGKILLed while a worker runs a task, the materializer takes its worker server and the
    worker with it: none keeps folding (and committing) after the fold died."""
    mark = uuid.uuid4().hex
    flag = tmp_path / "busy"
    proc = subprocess.Popen(
        [sys.executable, "-c", _BUSY, str(flag)],
        cwd=REPO,
        env={**os.environ, "PANESTORE_TEST_MARK": mark},
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flag.exists(), "the worker started its task"
        assert len(processes_marked(mark)) == 3  # the materializer, the server, the worker
        proc.kill()
        proc.wait()
        assert wait_until_gone(mark) == []
    finally:
        proc.kill()
