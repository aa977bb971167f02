"""A lake lock held by another process, for tests of the refusals it causes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_HOLD = """
import sys, time
from sinks.lake.lock import LakeLock
LakeLock(sys.argv[1], sys.argv[2], "a holder").__enter__()
print("held", flush=True)
time.sleep(600)
"""


@contextmanager
def lock_held(lake: str | Path, name: str) -> Iterator[int]:
    """Hold the lock ``name`` of ``lake`` in a child process (its pid) until the block ends; the
    child is then SIGKILLed, as a crashed holder would end."""
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lake), name],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.kill()
        child.wait()
