"""Filter Spark's noise from the terminal: Python worker banners and log4j start-up lines.

Spark's Python workers (the ``transformWithStateInPandas`` ones above all, which a lake's state
upgrade still reads with) print lines per task on stderr, and they write to the file descriptor
they inherit from the JVM, which inherits it from this process. So
the filter works at the descriptor level: fd 2 is replaced by a pipe, and a thread copies what
comes through to the original stderr, minus the noise. Call it once, before Spark starts.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TextIO

NOISE = re.compile(
    r"Streaming TransformWithStateInPandas Python worker"
    r"|Starting Streaming TransformWithStateInPandas"
    r"|^Using Spark's default log4j profile"
    r"|^To adjust logging level use sc.setLogLevel"
    r"|^Setting default log level to"
    r"|NativeCodeLoader: Unable to load native-hadoop"
    r"|WARNING: Using incubator modules"
    r"|Disabling AQE since AQE is not supported in stateful workloads"
    r"|Failed to cancel job group .* Cannot find active jobs"  # a query stopped between batches
    # a local master's JVM on a host whose name resolves to the loopback address: it binds to
    # another interface, which only a cluster's nodes would need to know
    r"|WARN Utils: Your hostname, .* resolves to a loopback address"
    r"|WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address"
)

_terminal: TextIO | None = None


def quiet_spark_stderr(pattern: re.Pattern[str] = NOISE) -> TextIO:
    """Route fd 2 through a filter dropping lines that match ``pattern`` (idempotent).

    Returns a text stream on the *original* stderr: write progress there, so it is never held
    up in (or lost with) the filter thread at exit."""
    global _terminal
    if _terminal is not None:
        return _terminal
    original = os.dup(2)
    _terminal = os.fdopen(os.dup(original), "w", buffering=1)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as src:
            pending = b""
            while True:
                chunk = src.read(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                keep = [
                    ln
                    for ln in lines
                    if ln.strip() and not pattern.search(ln.decode("utf-8", "replace"))
                ]
                if keep:
                    os.write(original, b"\n".join(keep) + b"\n")
            if pending:
                os.write(original, pending)

    threading.Thread(target=pump, name="stderr-filter", daemon=True).start()
    return _terminal
