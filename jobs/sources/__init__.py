"""A pipeline's sources: where its records come from, one sub-package per kind of source.

A source is one concept in one place: what the configuration reads of it (its ``[source]``
settings, parsed and checked before Spark starts by :mod:`.settings`), its driver side
(registering its reader, its checks before the query starts, its records frame) and its executor
side (the reader Spark's Python workers run, and the storage reading it needs):

==========================  =====================  ==============================================
``[source] format``         sub-package            records
==========================  =====================  ==============================================
``jsonl``, ``csv``,         :mod:`.files`          a landing directory of files, read by Spark's
``parquet``                                        file source (JSON lines decoded in Arrow in
                                                   the workers first)
``delta``                   :mod:`.delta_table`    any Delta table, append-only, by version: a
                                                   Python data source reading the data files its
                                                   commits added
``pane_log``                :mod:`.pane_log`       another pipeline's pane log, by version: its
                                                   panes as weighted elements, the upstream's
                                                   watermark
``dataframe``               :mod:`jobs.api`        a streaming DataFrame the caller built, taken
                                                   as it is
==========================  =====================  ==============================================

:func:`read_source` (:mod:`.records`) is the one place a run picks its source's records frame;
:mod:`jobs.reading.columns` is the ``columns`` option panestore's Python data sources share; the
offsets of the two that read a Delta table by version (a version and the table's id) are the
checkpoint's (:mod:`jobs.checkpoint.offsets`).

The lower half of each source (its reader, the storage reading it needs, what the configuration
reads of it) is its own folder below the configuration, :mod:`jobs.reading`, and imports as
cheaply as :mod:`jobs.executor` (``tests/test_architecture.py``); its settings are the
configuration's (:mod:`jobs.config.source`); the JSON-lines decoder runs in Spark's workers
(:mod:`jobs.executor.jsonl_decoder`).

>>> from jobs.sources import read_source
>>> read_source.__module__
'jobs.sources.records'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.checkpoint.offsets import TableHead, TableOffset, head_at
    from jobs.sources.records import RecordsRequired, read_source

__all__ = [
    "RecordsRequired",
    "TableHead",
    "TableOffset",
    "head_at",
    "read_source",
]
__getattr__ = lazy_exports(__name__, __file__)
