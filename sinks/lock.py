"""The materializer's lock: one materializer at a time per (local) lake."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from sinks.errors import MaterializerBusy
from sinks.spec import ViewSpec
from sinks.tables import is_local


class Lock:
    """A lock file ``<lake>/_control/materializer.lock`` (local lakes): one materializer at a
    time. A lock left by a dead process on this host is taken over."""

    def __init__(self, spec: ViewSpec) -> None:
        self.path = os.path.join(spec.control_path, "materializer.lock")
        self.enabled = is_local(spec.lake)
        self.held = False

    def __enter__(self) -> Lock:
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
                    raise MaterializerBusy(
                        f"another materializer is running (pid {holder.get('pid')} on "
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
        raise MaterializerBusy(f"could not take the materializer lock {self.path}")

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
