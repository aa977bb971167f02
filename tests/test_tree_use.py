"""The benchmark's sampler of a process tree counts each part's CPU time (``TreeUse``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.spark_job import TreeUse

pytestmark = pytest.mark.heavy  # ~2 s

# CPU burnt, then a pause in which the sampler sees it all
BURN = (
    "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"
    "time.sleep(0.5)\n"
)
# the root burns 0.6 s of CPU, then starts a Python child that burns 0.9 s
ROOT = (
    "import subprocess, sys\n"
    + BURN.format(s=0.6)
    + f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.9)!r}], check=True)\n"
)


def test_the_cpu_of_the_driver_and_its_python_workers_is_counted_apart():
    proc = subprocess.Popen([sys.executable, "-c", ROOT])
    with TreeUse(proc.pid, interval=0.05) as use:
        assert proc.wait(timeout=60) == 0
    cpu = use.cpu
    assert 0.5 <= cpu["driver"] < 0.9  # the root's (its interpreter's start included)
    assert 0.8 <= cpu["workers"] < 1.2  # the child's, sampled before it ended
    assert cpu["jvm"] == cpu["JIT compilers"] == cpu["task threads"] == 0
    assert cpu["total"] == pytest.approx(cpu["driver"] + cpu["workers"])
