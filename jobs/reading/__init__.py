"""The sources' lower half: reading a source's storage, what Spark's Python workers run of it and
what the configuration reads of it.

A source (:mod:`jobs.sources`) has a driver side (registering its reader, its checks before the
query starts, its records frame), which reads the pipeline's configuration, and a lower half, kept
here below the configuration: its Python data source, run in Spark's Python workers, and the
storage reading it needs, also read by the configuration (a landing directory's naming rules, the
columns an upstream pane log or a Delta table offers) and by ``panestore verify``. One sub-package
per kind of source:

====================  =========================================================================
sub-package           what it reads
====================  =========================================================================
:mod:`.files`         which files of a landing directory are input, a path named literally
:mod:`.delta_table`   any Delta table by version: its log, its data files, the data source
:mod:`.pane_log`      another pipeline's pane log by version: its columns, its rows as
                      elements, the data source
====================  =========================================================================

:mod:`.columns` is the ``columns`` option the Python data sources share. Imported as cheaply as
:mod:`jobs.executor`: nothing of the configuration, the driver or the command line
(``tests/test_architecture.py`` holds the layer and the import budget).

>>> from jobs.reading import ColumnsDataSource
>>> ColumnsDataSource.__module__
'jobs.reading.columns'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.reading.columns import (
        ColumnsDataSource,
        decode_columns,
        encode_columns,
        spark_columns,
    )

__all__ = [
    "ColumnsDataSource",
    "decode_columns",
    "encode_columns",
    "spark_columns",
]
__getattr__ = lazy_exports(__name__, __file__)
