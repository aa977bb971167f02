"""Lake locks: one materializer, and one run of the job, at a time per (local) lake.

A lock is a file ``<lake>/_locks/<name>.lock`` created exclusively and holding its owner's pid,
host and start time. A lock whose owner is a dead process on this host is taken over; one held
by a live process (or by another host, which cannot be asked) is refused with a
:class:`~sinks.errors.LakeBusy` naming the holder. Object-store lakes are not locked.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from sinks.errors import LakeBusy, MaterializerBusy
from sinks.spec import ViewSpec
from sinks.tables import is_local

# Not under ``_control``: the job reads every file there as a control row.
LOCKS = "_locks"


class LakeLock:
    """The lock ``<lake>/_locks/<name>.lock`` (see the module doc); a context manager.

    ``what`` names the holder in the refusal (``"another materializer"``), ``busy`` is the
    error class raised.

    >>> with LakeLock("/tmp/lake", "run", "another run of this pipeline"):
    ...     pass
    """

    def __init__(self, lake: str, name: str, what: str,
                 busy: type[LakeBusy] = LakeBusy) -> None:  # fmt: skip
        self.path = os.path.join(lake, LOCKS, f"{name}.lock")
        self.enabled = is_local(lake)
        self.what, self.busy = what, busy
        self.held = False

    def __enter__(self) -> LakeLock:
        if not self.enabled:
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is not None and self._alive(holder):
                    since = time.strftime(
                        "%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0))
                    )
                    raise self.busy(
                        f"{self.what} is running (pid {holder.get('pid')} on "
                        f"{holder.get('host')}, since {since}; lock {self.path}). Nothing was "
                        f"written; retry when it has finished."
                    ) from None
                with contextlib.suppress(FileNotFoundError):  # stale lock: take it over
                    os.unlink(self.path)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return self
        raise self.busy(f"could not take the lock {self.path}")

    def _holder(self) -> dict | None:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    @staticmethod
    def _alive(holder: Mapping[str, Any]) -> bool:
        if holder.get("host") != socket.gethostname():
            return True  # cannot tell: assume it runs
        try:
            os.kill(int(holder.get("pid", -1)), 0)
        except ProcessLookupError:
            return False
        except (PermissionError, ValueError, TypeError):
            return True
        return True

    def __exit__(self, *exc: Any) -> None:
        if self.held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self.held = False


def materializer_lock(spec: ViewSpec) -> LakeLock:
    """The materializer's lock of ``spec``'s lake."""
    return LakeLock(spec.lake, "materializer", "another materializer", MaterializerBusy)
