"""jobs.startup.class_archive: the driver JVM's class-data archive is written by one process at a
time, adopted only from a JVM that exited cleanly (a truncated archive crashes every JVM that
maps it), and named by what it depends on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.startup.class_archive import ClassArchive


class FakeJvm:
    """The gateway JVM's process: ``wait`` gives ``code``, after writing ``part`` (if any)."""

    def __init__(self, code: int, part: Path | None, data: bytes = b"classes") -> None:
        self.code, self.part, self.data = code, part, data
        self.stdin = open(os.devnull, "w")  # noqa: SIM115  # closed by the archive

    def wait(self, timeout=None):
        assert self.stdin.closed, "the JVM exits when its input closes"
        if self.part is not None:
            self.part.write_bytes(self.data)
        return self.code


def test_a_jvm_that_exited_cleanly_has_its_part_adopted(tmp_path):
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable() and not archive.exists
    options = archive.java_options()
    assert f"-XX:ArchiveClassesAtExit={archive.part(os.getpid())}" in options
    stale = archive.path.with_name("spark-0.jsa")  # another JDK's or Spark's
    stale.write_bytes(b"old")
    archive._adopt(FakeJvm(0, archive.part(os.getpid())))
    assert archive.path.read_bytes() == b"classes" and not stale.exists()
    assert archive.java_options() == (
        f"-XX:SharedArchiveFile={archive.path} -Xlog:cds=off -Xlog:cds+dynamic=off"
    )


@pytest.mark.parametrize("code", [1, -9, None])
def test_a_jvm_that_did_not_exit_cleanly_leaves_no_archive(tmp_path, code):
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable()
    jvm = FakeJvm(0 if code is None else code, archive.part(os.getpid()))
    if code is None:  # still running after the wait's timeout
        jvm.wait = lambda timeout=None: (_ for _ in ()).throw(subprocess.TimeoutExpired("java", 1))
        archive.part(os.getpid()).write_bytes(b"half")
    archive._adopt(jvm)
    assert not archive.exists and not list(archive.path.parent.iterdir())


def test_one_process_writes_at_a_time_and_a_dead_writers_part_is_removed(tmp_path):
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        archive.part(alive.pid).write_bytes(b"half")
        assert not archive.usable(), "another live process is writing it"
    finally:
        alive.kill()
        alive.wait()
    assert archive.usable(), "its writer is gone"
    assert not archive.part(alive.pid).exists()


def test_the_archive_is_named_by_the_jdk_the_jars_and_the_heap(tmp_path):
    java, jars = tmp_path / "java", tmp_path / "jars"
    java.mkdir()
    jars.mkdir()
    (java / "release").write_text('JAVA_VERSION="17.0.15"')
    (jars / "spark-core.jar").write_bytes(b"x" * 10)
    cache = tmp_path / "cache"
    first = ClassArchive.for_driver(cache, java, jars, None)
    assert first == ClassArchive.for_driver(cache, java, jars, None)
    assert first.path.parent == cache / "jvm"
    assert first != ClassArchive.for_driver(cache, java, jars, "4g")
    (jars / "spark-core.jar").write_bytes(b"x" * 11)  # another Spark
    second = ClassArchive.for_driver(cache, java, jars, None)
    (java / "release").write_text('JAVA_VERSION="17.0.16"')  # another JDK
    third = ClassArchive.for_driver(cache, java, jars, None)
    assert len({first.path, second.path, third.path}) == 3


def test_an_unwritable_cache_runs_without_an_archive(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert not ClassArchive(blocked / "jvm" / "spark-1.jsa").usable()
