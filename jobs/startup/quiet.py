"""Filter Spark's noise from the terminal: Python worker banners and log4j start-up lines.

Spark's Python workers print lines per task on stderr, and they write to the file descriptor
they inherit from the JVM, which inherits it from this process. So
the filter works at the descriptor level: fd 2 is replaced by a pipe, and a thread copies what
comes through to the original stderr, minus the noise. Call it once, before Spark starts.
"""

from __future__ import annotations

import os
import re
import sys
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
_filtering = False


def terminal() -> TextIO:
    """A text stream on this process's *original* stderr, line-buffered (the same each call):
    what is written there is never held up in (or lost with) the filter thread of
    :func:`quiet_spark_stderr`, before it is installed or after. Write a command's own lines
    there."""
    global _terminal
    if _terminal is None:
        _terminal = os.fdopen(os.dup(2), "w", buffering=1)
    return _terminal


def error_stream() -> TextIO:
    """Where a command says what went wrong: :func:`terminal` once the filter is installed (a
    line written to fd 2 could still be in its pipe when the command ends), else ``sys.stderr``."""
    return terminal() if _filtering else sys.stderr


def quiet_spark_stderr(pattern: re.Pattern[str] = NOISE) -> TextIO:
    """Route fd 2 through a filter dropping lines that match ``pattern`` (idempotent).

    Returns :func:`terminal`, a stream on the *original* stderr: write progress there."""
    global _filtering
    out = terminal()
    if _filtering:
        return out
    _filtering = True
    original = out.fileno()
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
    return out
