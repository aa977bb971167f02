"""The pipeline configuration: what a run computes, from where, and where it goes.

Pure Python (no Spark): typed values (:class:`Pipeline`, :mod:`.pipeline`; its parts by table:
:mod:`.watermark`, :mod:`.aggregates`, and the ``[source]`` table with its source,
:mod:`jobs.config.source`; what every setting shares, :mod:`.values`), built in Python or
loaded from TOML layers (:func:`load_pipeline`, :mod:`.load`) and saved as TOML
(:func:`save_pipeline`, :mod:`.save`), the filesystem checks made before Spark starts
(:mod:`.checks`), the accepted event-time forms (:mod:`.event_time`) and the view spec the sinks
take (:mod:`.sink_spec`). Imports ``panes``, ``sinks`` and of ``jobs.sources`` only what the
configuration reads of a source (its settings, its paths' rules, the columns it offers).

>>> from jobs.config import load_pipeline
>>> load_pipeline("conf/demo.toml").name
'ad_views'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.config.aggregates import Aggregate
    from jobs.config.checks import check_lake_name, check_paths
    from jobs.config.event_time import EventTimeColumn
    from jobs.config.load import load_pipeline, merge_layers, pipeline_from_dict, resolve_upstream
    from jobs.config.pipeline import Pipeline
    from jobs.config.save import pipeline_to_toml, save_pipeline
    from jobs.config.sink_spec import view_spec
    from jobs.config.source import Source, Upstream
    from jobs.config.values import PipelineConfigError
    from jobs.config.watermark import Watermark

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
