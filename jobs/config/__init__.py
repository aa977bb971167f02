"""The pipeline configuration: what a run computes, from where, and where it goes.

Pure Python (no Spark): typed values (:class:`Pipeline` and its parts, :mod:`.pipeline`), built in
Python or loaded from TOML layers (:func:`load_pipeline`, :mod:`.load`) and saved as TOML
(:func:`save_pipeline`, :mod:`.save`), the filesystem checks made before Spark starts
(:mod:`.checks`), the accepted event-time forms (:mod:`.event_time`), the landing directory's
naming rules (:mod:`.landing_paths`) and the view spec the sinks take (:mod:`.sink_spec`).
Imports ``panes`` and ``sinks`` only.

>>> from jobs.config import load_pipeline
>>> load_pipeline("conf/demo.toml").name
'ad_views'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (jobs.front_door)
    from jobs.config.checks import check_lake_name, check_paths
    from jobs.config.event_time import EventTimeColumn
    from jobs.config.load import load_pipeline, merge_layers, pipeline_from_dict, resolve_upstream
    from jobs.config.pipeline import (
        Aggregate,
        Pipeline,
        PipelineConfigError,
        Source,
        Upstream,
        Watermark,
    )
    from jobs.config.save import pipeline_to_toml, save_pipeline
    from jobs.config.sink_spec import view_spec

__all__ = [
    "Aggregate",
    "EventTimeColumn",
    "Pipeline",
    "PipelineConfigError",
    "Source",
    "Upstream",
    "Watermark",
    "check_lake_name",
    "check_paths",
    "load_pipeline",
    "merge_layers",
    "pipeline_from_dict",
    "pipeline_to_toml",
    "resolve_upstream",
    "save_pipeline",
    "view_spec",
]
__getattr__ = lazy_exports(__name__, __file__)
