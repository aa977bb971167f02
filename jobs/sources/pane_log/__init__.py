"""Another pipeline's pane log, read by version (``[source] format = "pane_log"``).

The upstream's panes become the downstream's elements: key and aggregate columns as fields, the
pane's output timestamp as event time, weight -1 for a retraction; the downstream's watermark is
the upstream's watermark recorded with each pane (``docs/running.md``, "A pipeline over another
pipeline's pane log").

* Settings: ``path`` (the upstream's configuration or pane log) and what the upstream offers, read
  when the configuration loads (:class:`jobs.config.source.Upstream`,
  :func:`jobs.reading.pane_log.pane_log_columns`).
* Driver side: registering the reader and the element rows the job takes (:func:`read_pane_log`,
  :mod:`.driver`); the check before the query starts that refuses a rebuilt upstream (another
  table at the path than the one the offsets name: :func:`check_upstream`, :mod:`.identity`).
* Executor side, below the configuration in :mod:`jobs.reading.pane_log`: the Python streaming
  data source, whose offsets are pane-log versions and the table's id, and the storage reading it
  needs (a version range's pane rows as element rows, read with delta-rs).

>>> from jobs.sources.pane_log import read_pane_log
>>> read_pane_log.__module__
'jobs.sources.pane_log.driver'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.sources.pane_log.driver import read_pane_log
    from jobs.sources.pane_log.identity import check_upstream

__all__ = [
    "check_upstream",
    "read_pane_log",
]
__getattr__ = lazy_exports(__name__, __file__)
