"""The exit statuses of every ``panestore`` command (the table in docs/running.md)."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """What a ``panestore`` command's exit status means; the message on stderr says more."""

    OK = 0
    """Done. A run stopped by SIGINT or SIGTERM, or whose fold found another materializer
    running (it said so; the next ``panestore materialize`` folds), also ends with 0."""
    FAILED = 1
    """The job or the command failed (or ``verify`` found differences, or ``status`` found the
    watermark lagging beyond ``--max-lag``). A fold whose window's
    total its view column cannot hold (:class:`sinks.lake.errors.FoldValueOutOfRange`) is one: in
    ``materialize``, and in a run's fold (its batches are committed)."""
    MISUSE = 2
    """Bad arguments, an invalid configuration, a configuration file that cannot be read, SQL
    that does not run or does not only read (``panestore query``), or a table that does not
    exist yet. Nothing was written."""
    BUSY = 3
    """Another process holds the lake's lock (a run: the run lock; ``materialize``: the
    materializer lock). Nothing was written; retry when it has finished."""
    INTERRUPTED = 130
    """Ctrl-C outside a run's batches (a run's Spark session was starting, or another command
    ran); every write is transactional: done in full or not at all."""
