"""The operator's path: how a pipeline's bundles reach its windows, chosen once from its
configuration (the table in ``docs/semantics.md``, "The operator's path").

* **columnar**: the model's columnar engine (:class:`panes.columnar.ColumnarEngine`), a
  bucket's windows as one table (stored by :mod:`jobs.executor.window_store`);
* **lifted**: the per-key engine, fed each window's elements combined in Arrow
  (:meth:`panes.columnar.Lifting.combined_by_key`, :func:`panes.columnar.add_bundle`); a bucket is
  stored as its keys' engine states (:mod:`jobs.executor.bucket_state`);
* **per element**: the per-key engine, fed element by element
  (:meth:`panes.engine.Engine.add_elements`); stored as the lifted path's buckets.

Which engine applies is the model's to say (:func:`panes.columnar.columnar_reason`,
:func:`panes.columnar.lifting_reason`); what is decided here is only what the operator's input
adds: a batch's rows come in no fixed order, so an aggregate whose value depends on the order of
its elements (``to_list``, or a combiner of your own that says so:
:attr:`panes.combiners.CombineFn.order_sensitive`) takes the per-element path, which sorts each
key's rows canonically (:func:`jobs.executor.operator_input.canonical_order`); a pane-log layout
that maps values itself (``value_mapper``) is written from the engine's panes. A combiner of your
own is lifted (each window's values of a batch added at once, ``add_all``), never columnar.
Nothing at run time changes a pipeline's path: not a key, a window or a value.

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
>>> path_of(Engine(Windowing(FixedWindows(10)), combiners.last("n")), schema).value
'per element'
>>> class Spread(combiners.CombineFn):
...     fields = ("n",)
>>> path_of(Engine(Windowing(FixedWindows(10)), Spread()), schema).value
'lifted'
"""

from __future__ import annotations

import enum

from jobs.executor.operator_input import InputSchema
from panes.columnar import columnar_reason, lifting_reason
from panes.columnar.accumulators import parts_of
from panes.engine import Engine
from sinks.lake import DEFAULT_LAYOUT, PaneLogLayout


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
    windowing, fn, columns = engine.windowing, engine.combine_fn, schema.columns_of_elements()
    if not lift or lifting_reason(windowing, fn, columns, engine.weighted) is not None:
        return Path.PER_ELEMENT  # merging or sliding windows, weights, inexact built-ins
    parts = parts_of(fn, columns.arrow_type, columns.whole, columns.values)
    if isinstance(parts, str) or any(p.order_sensitive for p in parts):
        return Path.PER_ELEMENT  # a list: in the order the per-element path sorts rows into
    if (
        not columnar
        or columnar_reason(windowing, fn, columns, engine.weighted) is not None
        or layout.value_mapper is not None
    ):
        return Path.LIFTED  # a combiner's own, clocks beyond the watermark, emitted panes kept,
        # mapped values
    return Path.COLUMNAR


__all__ = ["Path", "path_of"]
