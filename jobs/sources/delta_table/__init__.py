"""Any Delta table, read as an append-only stream by version (``[source] format = "delta"``).

No jars: the table's log and data files are read with delta-rs and pyarrow. A micro-batch reads
the rows the commits of its version range added; a commit that deletes or updates rows, a lost
version or a vacuumed file stops the run, naming the version (``docs/sources.md``).

* Settings: ``path`` (a directory or URI), ``schema`` (default: the table's columns),
  ``starting_version`` or ``starting_timestamp``, ``skip_change_commits``
  (:class:`jobs.config.source.Source`).
* Driver side: registering the reader and its options, the first version, the schema's columns
  in the table's types, and the check before the query starts that refuses a recreated table
  (:func:`read_delta_table`, :func:`check_source_table`, :mod:`.driver`).
* Executor side, below the configuration in :mod:`jobs.reading.delta_table`: the Python
  streaming data source, whose offsets are table versions and the table's id, and the storage
  reading it needs (a version range's data files planned from the table's log, then their rows;
  also read by ``panestore verify`` and, for the table's columns, by the configuration).

>>> from jobs.sources.delta_table import read_delta_table
>>> read_delta_table.__module__
'jobs.sources.delta_table.driver'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.sources.delta_table.driver import check_source_table, read_delta_table

__all__ = [
    "check_source_table",
    "read_delta_table",
]
__getattr__ = lazy_exports(__name__, __file__)
