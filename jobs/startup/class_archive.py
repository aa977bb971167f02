"""The driver JVM's class-data archive: Spark's classes mapped from a file an earlier run wrote,
not read from the jars, parsed and verified at every start.

A local run's JVM loads thousands of classes from Spark's jars before the session answers. HotSpot
keeps classes in a *class-data sharing* archive (AppCDS): a JVM started with
``-XX:ArchiveClassesAtExit=FILE`` writes the classes it loaded into ``FILE`` when it exits, and a
later JVM started with ``-XX:SharedArchiveFile=FILE`` (same JDK, same class path) maps them
instead of loading them. Measured (``docs/decisions.md``, "The driver JVM's class-data archive"):
a session's start, JVM to the first job, 15.9 -> 9.3 s.

How a run uses it (:class:`ClassArchive`, for the driver JVM that :func:`jobs.startup.session.
get_session` starts on this machine: not under ``spark-submit``, not a cluster's executors):

* The archive is ``<cache>/jvm/<digest>.jsa`` (:func:`jobs.startup.python_processes.
  default_cache_dir`), the digest of what it depends on: the JDK (its home and ``release`` file),
  Spark's jars (names and sizes) and the driver's heap setting. Another JDK or Spark gets another
  file; a JVM that still cannot use one runs without it, silently.
* With no archive yet, the run's JVM writes one at its exit into a part file of its own
  (``<digest>.<pid>.part``). The process ends its JVM (:func:`jobs.startup.session.end_session`:
  at the interpreter's exit, or called by a command before it leaves through ``os._exit``): it
  stops the session, closes the JVM's input (which makes the gateway JVM exit, writing the
  part), waits for it, and renames the part into place (:meth:`ClassArchive.adopt`) only if
  the JVM exited cleanly: a JVM that maps a truncated archive dies (SIGBUS), so a run killed
  while writing leaves a part, never an archive. One process writes at a time (another one's
  live part: a run starts without an archive); parts of processes no longer alive are removed.
* A JVM that fails to start with an archive is started again without it, and the archive is
  removed.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

ARCHIVE_SUFFIX = ".jsa"
PART_SUFFIX = ".part"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""A JVM that cannot use an archive (another JDK build, another class path) says so on stdout at
every start: it runs without it, which needs no warning."""


@dataclass(frozen=True)
class ClassArchive:
    """The driver JVM's class-data archive at ``path`` (see the module doc).

    >>> archive = ClassArchive(Path("/cache/jvm/spark-1.jsa"))
    >>> archive.java_options(pid=7)  # none yet: the JVM writes one into its part at exit
    '-XX:ArchiveClassesAtExit=/cache/jvm/spark-1.7.part -Xlog:cds=off -Xlog:cds+dynamic=off'
    """

    path: Path

    @classmethod
    def for_driver(
        cls, cache_dir: Path, java_home: Path, jars: Path, driver_memory: str | None
    ) -> ClassArchive:
        """The archive of a driver JVM of ``java_home`` with ``jars`` on its class path."""
        digest = hashlib.sha256()
        digest.update(str(java_home.resolve()).encode())
        release = java_home / "release"
        if release.exists():
            digest.update(release.read_bytes())
        for jar in sorted(jars.glob("*.jar")):
            digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
        digest.update(f"heap:{driver_memory}".encode())
        return cls(cache_dir / "jvm" / f"spark-{digest.hexdigest()[:20]}{ARCHIVE_SUFFIX}")

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def part(self, pid: int) -> Path:
        return self.path.with_name(f"{self.path.stem}.{pid}{PART_SUFFIX}")

    def java_options(self, pid: int | None = None) -> str:
        """The driver JVM's options: map the archive, or write it (into this process's part)."""
        if self.exists:
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        part = self.part(os.getpid() if pid is None else pid)
        return f"-XX:ArchiveClassesAtExit={part} {QUIET}"

    def usable(self) -> bool:
        """Whether this process's JVM maps the archive or writes it: it exists, or its
        directory can be written and no other live process is writing it (one writer at a
        time). Parts of processes that are gone are removed."""
        if self.exists:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        writing = False
        for part in self.path.parent.glob(f"{self.path.stem}.*{PART_SUFFIX}"):
            match = re.fullmatch(rf".*\.(\d+){re.escape(PART_SUFFIX)}", part.name)
            if match is None:
                continue
            pid = int(match.group(1))
            if _alive(pid):
                writing = writing or pid != os.getpid()
            else:
                part.unlink(missing_ok=True)
        return not writing and os.access(self.path.parent, os.W_OK)

    def discard(self) -> None:
        """Remove the archive (a JVM failed to start with it)."""
        self.path.unlink(missing_ok=True)

    def adopt(self, exit_status: int | None) -> bool:
        """The JVM this process started to write the archive has ended with ``exit_status``
        (None: it did not end by itself and was killed): rename its part into place if it
        exited cleanly and wrote one, else remove the part. Whether the archive was adopted."""
        part = self.part(os.getpid())
        if exit_status == 0 and part.is_file() and part.stat().st_size > 0:
            for other in self.path.parent.glob(f"*{ARCHIVE_SUFFIX}"):
                if other != self.path:
                    other.unlink(missing_ok=True)  # another JDK's or Spark's
            os.replace(part, self.path)
            return True
        part.unlink(missing_ok=True)
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["ClassArchive"]
