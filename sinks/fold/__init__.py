"""The fold: the pane log folded into the ``current`` view (:class:`Materializer`), in pieces
when its backlog is larger than its memory, by the vectorized or the reference reducer, applied
with one MERGE per piece; the view's change feed; the view rebuilt or refolded from the pane log.

>>> from sinks.fold import Materializer
>>> Materializer.__module__
'sinks.fold.materializer'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use
    from sinks.fold.change_feed import Changes, read_changes
    from sinks.fold.fold_plan import SCAN_BATCH_ROWS, FoldPlan, fold_in_progress, piece_done
    from sinks.fold.last_failure import fold_failure
    from sinks.fold.materializer import Materializer, MaterializeResult, PieceFigures
    from sinks.fold.pane_log_changes import pane_log_commits, read_pane_rows
    from sinks.fold.recompute import refold, view_from_pane_log
    from sinks.fold.view_merge import days_filter
    from sinks.fold.view_rebuild import rebuild_view

__all__ = [
    "Changes",
    "FoldPlan",
    "MaterializeResult",
    "Materializer",
    "PieceFigures",
    "SCAN_BATCH_ROWS",
    "days_filter",
    "fold_failure",
    "fold_in_progress",
    "pane_log_commits",
    "piece_done",
    "read_changes",
    "read_pane_rows",
    "rebuild_view",
    "refold",
    "view_from_pane_log",
]
__getattr__ = lazy_exports(__name__, __file__)
