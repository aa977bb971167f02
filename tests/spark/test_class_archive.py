"""The driver JVM's class-data archive with a real JVM (jobs.startup.class_archive; the protocol
without one: tests/jobs/test_class_archive.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def test_a_process_writes_the_archive_at_its_end_and_the_next_jvm_maps_it(tmp_path):
    """A real JVM: ``python -m jobs.startup.session`` (what ``./dev`` runs) writes the
    archive when it ends; the next session's JVM starts with it and runs a job."""
    env = {**os.environ, "PANESTORE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.startup.session"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    written = list((tmp_path / "cache" / "jvm").iterdir())
    assert [p.suffix for p in written] == [".jsa"], written  # the archive, no part left
    probe = (
        "from jobs.startup.session import get_session\n"
        "spark = get_session('probe', shuffle_partitions=2)\n"
        "bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory\n"
        "print(list(bean.getRuntimeMXBean().getInputArguments()))\n"
        "print(spark.range(5).count())\n"
    )
    mapped = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600
    )
    assert mapped.returncode == 0, mapped.stderr[-2000:]
    args, count = mapped.stdout.strip().splitlines()[-2:]
    assert f"-XX:SharedArchiveFile={written[0]}" in args and count == "5"
