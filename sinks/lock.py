"""Lake locks: one materializer, and one run of the job, at a time per (local) lake.

A lock is an exclusive ``flock`` on the file ``<lake>/_locks/<name>.lock``. The operating system
decides who holds it, atomically, and releases it when its holder's process ends however it ends
(a SIGKILL, a crash, a reboot): there is no stale lock to detect and so no race in detecting one.
The file itself stays; while held it names its holder (pid, host, start time) so a refusal can
say who runs. On a shared filesystem the lock is as good as the filesystem's locking (NFS
propagates it between hosts). Object-store lakes are not locked.

The refused contender raises a :class:`~sinks.errors.LakeBusy` naming the holder and writes
nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from sinks.errors import LakeBusy, MaterializerBusy
from sinks.spec import ViewSpec
from sinks.tables import is_local

# Not under ``_control``: the job reads every file there as a control row.
LOCKS = "_locks"


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the holder wrote it into the lock file."""

    pid: int | None
    host: str | None
    since: float | None

    def describe(self) -> str:
        if self.pid is None:
            return "its holder has not written its name yet"
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since or 0))
        return f"pid {self.pid} on {self.host}, since {since}"


class LakeLock:
    """The lock ``<lake>/_locks/<name>.lock`` (see the module doc); a context manager.

    ``what`` names the holder in the refusal (``"another materializer"``), ``busy`` is the
    error class raised.

    >>> with LakeLock("/tmp/lake", "run", "another run of this pipeline"):
    ...     pass
    """

    def __init__(self, lake: str, name: str, what: str, busy: type[LakeBusy] = LakeBusy) -> None:
        self.path = os.path.join(lake, LOCKS, f"{name}.lock")
        self.enabled = is_local(lake)
        self.what, self.busy = what, busy
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> LakeLock:
        if not self.enabled:
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self.busy(
                f"{self.what} is running ({self.holder().describe()}; lock {self.path}). "
                "Nothing was written; retry when it has finished."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        with contextlib.suppress(OSError):  # the name only informs (a full disk: no name)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        return self

    def holder(self) -> Holder:
        """The holder the lock file names (all None while it names nobody)."""
        try:
            with open(self.path) as f:
                data = json.load(f)
            return Holder(int(data["pid"]), str(data["host"]), float(data["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            return Holder(None, None, None)

    def __exit__(self, *exc: Any) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        # Never unlink the file: a contender may hold it open, waiting to lock it; it would then
        # lock a file that is no longer the lock while a third process creates a new one.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # releases the lock


def materializer_lock(spec: ViewSpec) -> LakeLock:
    """The materializer's lock of ``spec``'s lake."""
    return LakeLock(spec.lake, "materializer", "another materializer", MaterializerBusy)
