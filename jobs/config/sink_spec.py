"""The :class:`~sinks.lake.spec.ViewSpec` of a pipeline configuration: what ``sinks`` is told about
a pipeline (``sinks`` never sees the job's configuration object)."""

from __future__ import annotations

from typing import Any

from jobs.config.pipeline import Pipeline
from sinks.lake import ViewSpec


def view_spec(pipeline: Pipeline, **overrides: Any) -> ViewSpec:
    """The :class:`ViewSpec` of ``pipeline``: its name, lake, keys, named aggregates, window
    function, accumulation mode, combiner and rules of a window's life (the holder of its
    allowed lateness); ``overrides`` replace any of them."""
    combine_fn = pipeline.combine_fn()
    fns = getattr(combine_fn, "fns", None)
    if fns is None:  # a single scalar aggregate
        fns = {pipeline.aggregates[0].name: combine_fn}
    fields: dict[str, Any] = dict(
        name=pipeline.name,
        lake=pipeline.lake_location,
        keys=tuple(pipeline.keys),
        aggregates=tuple(fns.items()),
        window_fn=pipeline.window,
        mode=pipeline.accumulation_mode,
        combine_fn=combine_fn,
        single_writer=pipeline.single_writer,
        rules=pipeline.rules(),
        fold_memory=pipeline.fold_memory,
    )
    fields.update(overrides)
    return ViewSpec(**fields)
