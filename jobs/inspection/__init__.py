"""Inspecting a pipeline without running it: its status (``panestore status``: the lake, the
last run, the operator's state as the last committed batch left it) and the pipeline's input
records read back as elements for ``verify``'s batch recomputation (DuckDB, none of the job's
reading code). Above the driver (it reads the plan's operator configuration and the checks'
records), below the command line and the Python API.

>>> from jobs.inspection import lake_status
>>> lake_status.__module__
'jobs.inspection.status'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use
    from jobs.inspection.source_elements import load_source_elements, source_elements_are
    from jobs.inspection.state_summary import summarize_state
    from jobs.inspection.status import lake_status

__all__ = ["lake_status", "load_source_elements", "source_elements_are", "summarize_state"]
__getattr__ = lazy_exports(__name__, __file__)
