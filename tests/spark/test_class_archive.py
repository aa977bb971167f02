"""The driver JVM's class-data archive with a real JVM (jobs.startup.class_archive; the protocol
without one, a part renamed into place after a clean exit: tests/jobs/test_class_archive.py), and
the ``panestore`` command's exit: it ends its JVM and adopts the archive before it leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.startup.python_processes import CACHE_DIR_ENV
from tests.spark.support import put
from tests.spark.test_job import view
from tests.spark.test_signals import CONF as STOPPED_CONF

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


# the configuration of the signal tests' lake, under another name
CONF = STOPPED_CONF.replace('name = "stopped"', 'name = "archived"')


def live_processes() -> list[tuple[int, int, list[bytes], list[str]]]:
    """This machine's processes, zombies (ended, not yet reaped) left out: (pid, process group,
    environment, arguments)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
            environ = Path("/proc", entry, "environ").read_bytes().split(b"\0")
            argv = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours
            continue
        if stat[0] != "Z":
            args = [arg.decode(errors="replace") for arg in argv]
            found.append((int(entry), int(stat[3]), environ, args))
    return found


def processes_of(cache: Path) -> list[str]:
    """The live processes started with ``PANESTORE_CACHE_DIR=cache`` in their environment (a
    command's own, its driver JVM and Spark's Python processes, which inherit it)."""
    marker = f"{CACHE_DIR_ENV}={cache}".encode()
    return [
        f"{pid}: {' '.join(args)[:200]}" for pid, _, env, args in live_processes() if marker in env
    ]


def left_over(cache: Path, pgid: int) -> list[str]:
    """What a command that has exited left running: anything of its process group (the command
    and its driver JVM) at once, else anything started with its cache directory (Spark's Python
    workers, in a group of their own, stopped with the session) a few seconds later."""
    group = [f"{pid}: {' '.join(args)[:200]}" for pid, g, _, args in live_processes() if g == pgid]
    if group:
        return group
    deadline = time.monotonic() + 10
    while processes_of(cache) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_of(cache)


def run_command(conf: Path, cache: Path, log: Path, watch=None) -> tuple[int, int]:
    """``panestore run CONF`` in a process group of its own, with ``cache`` as its cache
    directory; ``watch()`` is called every 0.1 s while it runs. (its exit status, its process
    group), once its own process has ended (not when its output's last holder closed it)."""
    env = {**os.environ, CACHE_DIR_ENV: str(cache)}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobs.cli.commands", "run", str(conf)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                if watch is not None:
                    watch()
                time.sleep(0.1)
            return proc.wait(timeout=1), proc.pid
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_first_run_adopts_the_archive_its_jvm_wrote_and_the_next_run_maps_it(tmp_path):
    """On a machine without an archive (a fresh cache directory: a new user), the first
    ``panestore run`` writes the driver JVM's class-data archive and adopts it before it exits;
    the second run's JVM maps it. Neither run leaves a part behind or a process running (its
    JVM, Spark's Python workers): a scheduler waiting for the command waits for all of it."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("reads processes from /proc")
    cache = (tmp_path / "cache").resolve()
    conf = tmp_path / "archived.toml"
    conf.write_text(CONF.format(lake=tmp_path / "lake", landing=tmp_path / "landing"))
    put(tmp_path / "landing", "1.jsonl", [view("a", 1), view("b", 2)])
    jvm_dir = cache / "jvm"

    status, group = run_command(conf, cache, tmp_path / "first.log")
    log = (tmp_path / "first.log").read_text()
    assert status == 0, log[-3000:]
    assert not left_over(cache, group), "the first run left these running"
    archives = sorted(jvm_dir.glob("*.jsa"))
    assert len(archives) == 1, f"the first run adopted no archive: {sorted(jvm_dir.iterdir())}"
    assert not list(jvm_dir.glob("*.part"))
    archive = archives[0]
    written = archive.stat()

    put(tmp_path / "landing", "2.jsonl", [view("a", 3), view("c", 4)])
    seen: dict[str, bool] = {"option": False, "mapped": False}

    def watch() -> None:
        """The second run's driver JVM: started with the archive, and mapping it."""
        for pid, _, _, args in live_processes():
            if f"-XX:SharedArchiveFile={archive}" in args:
                seen["option"] = True
                try:
                    maps = Path("/proc", str(pid), "maps").read_text()
                except OSError:  # ended meanwhile
                    continue
                seen["mapped"] = seen["mapped"] or str(archive) in maps

    status, group = run_command(conf, cache, tmp_path / "second.log", watch)
    log = (tmp_path / "second.log").read_text()
    assert status == 0, log[-3000:]
    assert "1 batches, 2 rows" in log, log[-3000:]
    assert seen == {"option": True, "mapped": True}, seen
    assert not left_over(cache, group), "the second run left these running"
    assert sorted(jvm_dir.glob("*.jsa")) == [archive] and not list(jvm_dir.glob("*.part"))
    assert archive.stat().st_mtime_ns == written.st_mtime_ns, "the archive was written again"
