"""Spark's Python worker daemon, with panestore's task modules imported before it forks.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) and forks a
worker from it for each Python task that finds none idle. :func:`jobs.spark.local_conf` names
this module: it imports :data:`jobs.python_workers.PRELOADED` (pandas, pyarrow, the operator,
decoder and writer modules: 0.7 s of a fresh worker's start), then runs PySpark's own daemon.
A forked worker finds those modules imported and shares their memory with the daemon until it
writes to it. The worker module, the protocol and worker reuse are PySpark's, unchanged.
"""

from __future__ import annotations

if __name__ == "__main__":
    from jobs.python_workers import preload

    preload()
    from pyspark import daemon

    daemon.manager()
