"""jobs.startup.class_archive: the driver JVM's class-data archive is written by one process at a
time, adopted when the session ends (jobs.startup.session.end_session) only from a JVM that
exited cleanly (a truncated archive crashes every JVM that maps it), and named by what it depends
on."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from jobs.startup import session
from jobs.startup.class_archive import ClassArchive

JVM = """\
import sys, time
part, code, hangs = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "hangs"
sys.stdin.read()  # as PySpark's gateway JVM: it exits when its input closes
if hangs:
    time.sleep(60)
with open(part, "wb") as f:  # its class-data archive, written at its exit
    f.write(b"classes")
sys.exit(code)
"""


class FakeSession:
    """A session on the driver JVM ``proc`` (a stand-in process: :data:`JVM`)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.stopped = False
        self.sparkContext = SimpleNamespace(_gateway=SimpleNamespace(proc=proc))

    def stop(self) -> None:
        assert self.sparkContext._gateway.proc.poll() is None, "stopped on a live JVM"
        self.stopped = True


def started(archive: ClassArchive, code: int, hangs: bool = False) -> FakeSession:
    """A session whose driver JVM writes ``archive``'s part at its exit, then exits ``code``
    (``hangs``: it does not exit when its input closes), as :func:`get_session` notes it."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            JVM,
            str(archive.part(os.getpid())),
            str(code),
            "hangs" if hangs else "exits",
        ],
        stdin=subprocess.PIPE,
    )
    spark = FakeSession(proc)
    session._remember_driver(spark, archive)
    return spark


def test_a_jvm_that_exited_cleanly_has_its_part_adopted(tmp_path):
    """Ending the session (at a command's end) stops it, closes the JVM's input, waits for the
    JVM to write its part and exit, and renames the part into place."""
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable() and not archive.exists
    options = archive.java_options()
    assert f"-XX:ArchiveClassesAtExit={archive.part(os.getpid())}" in options
    stale = archive.path.with_name("spark-0.jsa")  # another JDK's or Spark's
    stale.write_bytes(b"old")
    spark = started(archive, 0)
    assert session.end_session() == 0 and spark.stopped
    assert archive.path.read_bytes() == b"classes" and not stale.exists()
    assert not archive.part(os.getpid()).exists()
    assert archive.java_options() == (
        f"-XX:SharedArchiveFile={archive.path} -Xlog:cds=off -Xlog:cds+dynamic=off"
    )
    assert session.end_session() is None, "once"


@pytest.mark.heavy
@pytest.mark.parametrize("code", [1, None])
def test_a_jvm_that_did_not_exit_cleanly_leaves_no_archive(tmp_path, code, capsys):
    """A JVM that exits with an error, or does not exit in time (killed), leaves no archive
    and no part; a killed one is said on stderr."""
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable()
    spark = started(archive, code or 0, hangs=code is None)
    proc = spark.sparkContext._gateway.proc
    if code is None:
        archive.part(os.getpid()).write_bytes(b"half")  # killed while writing
    assert session.end_session(timeout=1) == code
    assert proc.poll() is not None, "no JVM outlives its session's end"
    assert not archive.exists and not list(archive.path.parent.iterdir())
    assert ("did not exit in time" in capsys.readouterr().err) == (code is None)


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


def test_an_end_begun_soon_is_awaited_by_the_next_end(tmp_path):
    """A run that folds without Spark begins its session's end and folds meanwhile
    (``end_session_soon`` returns at once); the command's end then waits for that end: the JVM
    has exited and its part is adopted, once."""
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable()
    spark = started(archive, 0)
    proc = spark.sparkContext._gateway.proc
    session.end_session_soon()
    assert session.end_session() == 0 and spark.stopped
    assert proc.poll() == 0 and archive.path.read_bytes() == b"classes"
    assert session.end_session() is None, "once"
    session.end_session_soon()  # nothing left to end: nothing happens
    assert session.end_session() is None


def test_a_session_started_soon_gives_the_session_or_its_error(monkeypatch):
    """``start_soon`` starts the session in a thread; ``result`` waits for it and gives it, or
    raises what stopped its start (no Java, say) where the caller asks for it."""
    import threading

    where: list[str] = []

    def start(options):
        where.append(threading.current_thread().name)
        if options.app_name == "no-java":
            raise session.JavaNotFound("no Java 17+ runtime")
        return f"session of {options.app_name}"

    monkeypatch.setattr(session.SessionOptions, "start", start)
    assert session.SessionOptions("ok").start_soon().result() == "session of ok"
    assert where == ["panestore-start-session"]
    failed = session.SessionOptions("no-java").start_soon()
    failed.wait()  # however it ended
    with pytest.raises(session.JavaNotFound, match="no Java"):
        failed.result()


def test_asking_for_a_session_finishes_an_end_begun_soon(tmp_path):
    """A caller that asks for a session after a run began its session's end (the Python API's
    next run, say) gets no session that is still ending: the end is finished first."""
    archive = ClassArchive(tmp_path / "jvm" / "spark-1.jsa")
    assert archive.usable()
    spark = started(archive, 0)
    proc = spark.sparkContext._gateway.proc
    session.end_session_soon()
    assert session.existing_session() is None
    assert proc.poll() == 0 and spark.stopped and archive.exists
    assert session.end_session() is None, "nothing left to end"
