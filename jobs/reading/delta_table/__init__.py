"""Any Delta table read by version, without Spark: the lower half of the Delta-table source
(:mod:`jobs.sources.delta_table`).

A version range's data files planned from the table's log, then their rows (:func:`plan_range`,
:func:`read_files`, :mod:`.log`; also read by ``panestore verify`` and, for the table's columns,
by the configuration), and the Python streaming data source Spark's workers run, whose offsets
are table versions and the table's id (:class:`DeltaTableDataSource`, :mod:`.reader`).

>>> from jobs.reading.delta_table import plan_range
>>> plan_range.__module__
'jobs.reading.delta_table.log'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.reading.delta_table.log import (
        SourceFile,
        plan_range,
        read_files,
        source_table_columns,
        version_at,
    )
    from jobs.reading.delta_table.reader import DeltaTableDataSource

__all__ = [
    "DeltaTableDataSource",
    "SourceFile",
    "plan_range",
    "read_files",
    "source_table_columns",
    "version_at",
]
__getattr__ = lazy_exports(__name__, __file__)
