"""Spark's streaming checkpoint, read back: what each micro-batch read (its input files, the
offsets of a source read by version) and its clocks.

The ground floor of ``jobs``, below the sources' lower half and the executor: the sources'
readers (their offsets), the operator (a batch's clocks, :mod:`.clocks`), the sources (their
checks before the query starts), the driver (a batch's input and clocks, the checks before a
run, which hold the checkpoint against the lake's tables), the inspection commands and the
lake's identity all read it; it imports only ``panes`` and ``sinks``. Every read and write of
the run's directory goes through :class:`CheckpointFiles` (:mod:`jobs.checkpoint.files`: a
local path, or any URI Spark's Hadoop filesystems write a checkpoint to).

>>> from jobs.checkpoint import batch_input
>>> batch_input.__module__
'jobs.checkpoint.logs'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use
    from jobs.checkpoint.clocks import Clocks
    from jobs.checkpoint.files import CheckpointFiles
    from jobs.checkpoint.logs import (
        COMMITS,
        OFFSETS,
        SOURCES,
        CheckpointBehind,
        CheckpointError,
        RecordedOffset,
        TablesBehind,
        batch_clocks,
        batch_input,
        check_not_behind,
        check_readable,
        check_tables_not_behind,
        committed_clock,
        last_batch,
        last_commit,
        local_path,
        log_files,
        recorded_offsets,
    )

__all__ = [
    "CheckpointFiles",
    "COMMITS",
    "OFFSETS",
    "SOURCES",
    "CheckpointBehind",
    "CheckpointError",
    "Clocks",
    "RecordedOffset",
    "TablesBehind",
    "batch_clocks",
    "batch_input",
    "check_not_behind",
    "check_readable",
    "check_tables_not_behind",
    "committed_clock",
    "last_batch",
    "last_commit",
    "local_path",
    "log_files",
    "recorded_offsets",
]
__getattr__ = lazy_exports(__name__, __file__)
