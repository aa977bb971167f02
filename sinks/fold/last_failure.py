"""The view's last failed fold, kept in the lake until a fold succeeds.

A fold that fails (a window's total its view column cannot hold, pane-log rows it cannot fold,
an unreadable table) writes nothing to the view, and every later fold meets the same panes
again: the view cannot catch up until someone acts. So the failure is noted in the lake, one
small JSON file ``<lake>/_fold/failed.json`` holding its one-line error and time (written whole
or not at all), and removed by the next fold that succeeds. ``panestore status`` reads it: a
view that cannot catch up is a failed state, with its reason, exit 1. A fold that found
another materializer holding the lock did not fail (it is not noted).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from sinks.lake import (
    ViewSpec,
    join_location,
    one_line,
    read_lake_file,
    remove_lake_file,
    write_lake_file,
)

FOLDER = "_fold"


@dataclass(frozen=True)
class FoldFailure:
    """The last failed fold: its one-line ``error`` and when it failed (µs since the epoch)."""

    error: str
    failed_us: int


def _location(spec: ViewSpec) -> str:
    return join_location(join_location(spec.lake, FOLDER), "failed.json")


def note_fold_failure(spec: ViewSpec, error: BaseException) -> FoldFailure:
    """Note that a fold of ``spec``'s view failed with ``error`` (replacing an older note)."""
    failure = FoldFailure(
        one_line(error, limit=2000) or type(error).__name__, time.time_ns() // 1000
    )
    write_lake_file(_location(spec), json.dumps(asdict(failure)) + "\n")
    return failure


def clear_fold_failure(spec: ViewSpec) -> None:
    """Remove the note of a failed fold (a fold succeeded)."""
    remove_lake_file(_location(spec))


def fold_failure(spec: ViewSpec) -> FoldFailure | None:
    """The last failed fold of ``spec``'s view, when no fold has succeeded since."""
    text = read_lake_file(_location(spec))
    if text is None:
        return None
    try:
        return FoldFailure(**json.loads(text))
    except (ValueError, TypeError):  # torn or foreign: say what it holds
        return FoldFailure(f"an unreadable fold-failure note: {text[:200]!r}", 0)
