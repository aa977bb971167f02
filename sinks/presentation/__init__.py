"""What people read of a lake: DuckDB over its tables (queries, the change feed, history, time
travel), the Dataflow paper's pictures of a key's windows and of the runs' skew, and the HTML
report.

>>> from sinks.presentation import query
>>> query.__module__
'sinks.presentation.duck'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use
    from sinks.presentation.duck import (
        changes,
        connect,
        history,
        query,
        raw_connect,
        window_elements,
    )
    from sinks.presentation.key_plot import plot
    from sinks.presentation.report import write_report
    from sinks.presentation.run_plots import plot_skew

__all__ = [
    "changes",
    "connect",
    "history",
    "window_elements",
    "plot",
    "plot_skew",
    "query",
    "raw_connect",
    "write_report",
]
__getattr__ = lazy_exports(__name__, __file__)
