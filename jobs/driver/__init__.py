"""The driver side of a run: the query plan, the batch sink, runs, and the checks and control
files around them.

Runs in the Python process that owns the SparkSession: :func:`run` takes the lake's lock and
checks it once, before Spark starts (:mod:`.preflight`: identity, configuration fingerprint,
source table, checkpoint against the tables, state layout), builds the plan (:mod:`.plan`: a
source's *records* frame -> tagged rows -> the operator) over the source's records frame
(:func:`jobs.sources.read_source`, or the caller's DataFrame), and commits each batch through
:class:`BatchSink`. The code Spark runs in its Python workers is :mod:`jobs.executor` (and the
sources' readers, :mod:`jobs.sources`).

>>> from jobs.driver import run, RunResult
>>> run.__module__
'jobs.driver.runs'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.driver.batch_sink import BatchSink, BatchStats
    from jobs.driver.plan import build_job
    from jobs.driver.preflight import Preflight, check_run
    from jobs.driver.runs import BatchReport, RunResult, run
    from jobs.driver.watermark_marks import LandingWriter, note_watermark

__all__ = [
    "BatchReport",
    "BatchSink",
    "BatchStats",
    "LandingWriter",
    "Preflight",
    "RunResult",
    "build_job",
    "check_run",
    "note_watermark",
    "run",
]
__getattr__ = lazy_exports(__name__, __file__)
