"""The lake's upkeep: compaction (small files merged, the view clustered by key hash) and vacuum
(each table's unneeded files deleted at most once a day), by a run, a fold or ``panestore
vacuum``. Below the fold (which compacts and vacuums the view), above :mod:`sinks.lake`.

>>> from sinks.upkeep import compact_if_due
>>> compact_if_due.__module__
'sinks.upkeep.compaction'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use
    from sinks.upkeep.auto_vacuum import Vacuum, vacuum_after_run, vacuum_if_due
    from sinks.upkeep.compaction import Compaction, compact_after_run, compact_if_due
    from sinks.upkeep.maintenance import optimize, vacuum

__all__ = [
    "Compaction",
    "Vacuum",
    "compact_after_run",
    "compact_if_due",
    "optimize",
    "vacuum",
    "vacuum_after_run",
    "vacuum_if_due",
]
__getattr__ = lazy_exports(__name__, __file__)
