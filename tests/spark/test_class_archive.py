"""The driver JVM's class-data archive with a real JVM (jobs.startup.class_archive; the protocol
without one, a part renamed into place after a clean exit: tests/jobs/test_class_archive.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

PROBE = """\
from jobs.startup.session import DEFAULT_MASTER, class_archive, get_session, prepare_environment
prepare_environment(DEFAULT_MASTER)
archive = class_archive(DEFAULT_MASTER, None)
print(archive.path if archive.exists else "none")
spark = get_session("probe", shuffle_partitions=2)
bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory
print(list(bean.getRuntimeMXBean().getInputArguments()))
print(spark.range(5).count())
"""


def probe() -> tuple[str, str, str]:
    """(the archive this machine's driver JVM maps, "none" if none yet; that JVM's options; a
    job's answer)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    path, args, count = done.stdout.strip().splitlines()[-3:]
    return path, args, count


def test_the_next_jvm_maps_the_archive_a_process_wrote_at_its_end():
    """``python -m jobs.startup.session`` (what ``./dev test`` runs at its set-up) writes the
    archive when its process ends; every later driver JVM of this machine starts with it and runs
    a job. Where the set-up did not run, this test has that command write it."""
    path, args, count = probe()
    if path == "none":
        wrote = subprocess.run(
            [sys.executable, "-m", "jobs.startup.session"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert wrote.returncode == 0, wrote.stderr[-2000:]
        path, args, count = probe()
    assert path.endswith(".jsa"), "no archive after a process that writes one ended"
    assert f"-XX:SharedArchiveFile={path}" in args and count == "5"
