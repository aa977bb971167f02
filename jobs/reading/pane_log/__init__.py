"""Another pipeline's pane log read by version: the lower half of the pane-log source
(:mod:`jobs.sources.pane_log`).

What the upstream offers, read when the configuration loads (:func:`pane_log_columns`), a
version range's pane rows as element rows, read with delta-rs (:func:`read_elements`,
:mod:`.upstream`, over the lake's own :mod:`sinks.fold.pane_log_changes`), and the Python
streaming data source Spark's workers run, whose offsets are pane-log versions and the table's
id (:class:`PaneLogDataSource`, :mod:`.reader`).

>>> from jobs.reading.pane_log import read_elements
>>> read_elements.__module__
'jobs.reading.pane_log.upstream'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.reading.pane_log.reader import PaneLogDataSource
    from jobs.reading.pane_log.upstream import PaneLogColumns, pane_log_columns, read_elements

__all__ = [
    "PaneLogColumns",
    "PaneLogDataSource",
    "pane_log_columns",
    "read_elements",
]
__getattr__ = lazy_exports(__name__, __file__)
