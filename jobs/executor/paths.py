"""The operator's path: how a pipeline's bundles reach its windows, chosen once from its
configuration (the table in ``docs/semantics.md``, "The operator's path").

* **columnar** (:mod:`jobs.executor.window_table`): a bucket's windows as one table, the engine's
  steps done column by column, lifted parts merged into 128-bit sums. A bucket is stored as that
  table.
* **lifted** (:mod:`jobs.executor.lifting`): the engine per key, fed each window's elements
  combined in Arrow (:meth:`panes.engine.Engine.add_combined`). A bucket is stored as its keys'
  engine states (:mod:`jobs.executor.bucket_state`).
* **per element**: the engine per key, fed element by element
  (:meth:`panes.engine.Engine.add_elements`). Stored as the lifted path's buckets.

Nothing at run time changes a pipeline's path: not a key, a window or a value (a sum beyond 64
bits stays on its path; a pane whose value does not fit its pane-log column is refused there).

>>> from jobs.executor.operator_input import InputSchema
>>> from panes import AfterProcessingTime, AfterWatermark, FixedWindows, Windowing, combiners
>>> from panes.engine import Engine
>>> import pyarrow as pa
>>> schema = InputSchema(("k",), ("n",), (("k", pa.string()), ("n", pa.int64())))
>>> total = combiners.aggregates(total=combiners.sum("n"))
>>> path_of(Engine(Windowing(FixedWindows(10)), total), schema).value
'columnar'
>>> early = AfterWatermark(early=AfterProcessingTime(5))
>>> path_of(Engine(Windowing(FixedWindows(10), trigger=early), total), schema).value
'lifted'
>>> path_of(Engine(Windowing(FixedWindows(10)), combiners.to_list("n")), schema).value
'per element'
"""

from __future__ import annotations

import enum

from jobs.executor.lifting import lifted_parts
from jobs.executor.operator_input import InputSchema
from panes.engine import Engine
from panes.windowing import AccumulationMode
from sinks.pane_log import DEFAULT_LAYOUT, PaneLogLayout


class Path(enum.Enum):
    COLUMNAR = "columnar"
    LIFTED = "lifted"
    PER_ELEMENT = "per element"


def path_of(
    engine: Engine,
    schema: InputSchema,
    layout: PaneLogLayout = DEFAULT_LAYOUT,
    *,
    lift: bool = True,
    columnar: bool = True,
) -> Path:
    """The path of the pipeline ``engine`` runs over input of ``schema`` into pane-log columns
    of ``layout`` (the module doc). ``lift``, ``columnar``: False keeps the pipeline off those
    paths (what the tests and benchmarks compare them with)."""
    windowing = engine.windowing
    if not lift or lifted_parts(engine, schema) is None:
        return Path.PER_ELEMENT  # merging or sliding windows, weights, inexact aggregates
    if (
        not columnar
        or windowing.trigger.has_processing_time
        or windowing.accumulation_mode is AccumulationMode.ACCUMULATING_AND_RETRACTING
        or layout.value_mapper is not None
    ):
        return Path.LIFTED  # clocks beyond the watermark, emitted panes kept, mapped values
    return Path.COLUMNAR


__all__ = ["Path", "path_of"]
