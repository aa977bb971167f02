"""Starting Spark and its Python processes: the session, the worker launcher and daemon, quiet logs.

:func:`get_session` builds the SparkSession every command uses (one shuffle-partitions default,
:data:`SHUFFLE_PARTITIONS`), its driver JVM mapping Spark's classes from the archive of
:mod:`.class_archive` (:func:`.session.end_session` ends that JVM, waits for it and adopts the
archive it wrote); :mod:`.python_processes` makes Spark's Python workers import the installed
PySpark and this project (the launcher, the preloading daemon, the garbage-collector thresholds;
cache directory ``$PANESTORE_CACHE_DIR``); :mod:`.quiet` filters Spark's noise.

>>> from jobs.startup import SHUFFLE_PARTITIONS
>>> SHUFFLE_PARTITIONS
2
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.startup.python_processes import gc_thresholds, worker_python
    from jobs.startup.quiet import quiet_spark_stderr
    from jobs.startup.session import SHUFFLE_PARTITIONS, JavaNotFound, get_session

__all__ = [
    "JavaNotFound",
    "SHUFFLE_PARTITIONS",
    "gc_thresholds",
    "get_session",
    "quiet_spark_stderr",
    "worker_python",
]
__getattr__ = lazy_exports(__name__, __file__)
