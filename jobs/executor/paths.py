"""The operator's path: how a pipeline's bundles reach its windows, chosen once from its
configuration (the table in ``docs/semantics.md``, "The operator's path").

* **columnar**: the model's columnar engine (:class:`panes.columnar.ColumnarEngine`), a
  bucket's windows as one table (stored by :mod:`jobs.executor.window_store`);
* **lifted**: the per-key engine, fed each window's elements combined in Arrow
  (:meth:`panes.columnar.Lifting.combined_by_key`, :func:`panes.columnar.add_bundle`); a bucket is
  stored as its keys' engine states (:mod:`jobs.executor.bucket_state`);
* **per element**: the per-key engine, fed element by element
  (:meth:`panes.engine.Engine.add_elements`); stored as the lifted path's buckets.

Which engine applies, and why the columnar one does not, is the model's to say: its one
factory of engines (:func:`panes.engines.choose`, :func:`panes.engines.build`), which the
simulator calls too. What is decided here is only what the operator's input adds: a batch's rows
come in no fixed order (``unordered``), so an aggregate whose value depends on the order of its
elements (``to_list``, or a combiner of your own that says so:
:attr:`panes.combiners.CombineFn.order_sensitive`) takes the per-element path, which sorts each
key's rows canonically (:func:`jobs.executor.operator_input.canonical_order`); a pane-log layout
that maps values itself (``value_mapper``) is written from the engine's panes, off the columnar
engine. A combiner of your own is lifted (each window's values of a batch added at once,
``add_all``), never columnar. Nothing at run time changes a pipeline's path: not a key, a window
or a value.

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

from jobs.executor.operator_input import InputSchema
from panes.engine import Engine
from panes.engines import Choice, EngineKind, Engines, build, choose
from sinks.lake import DEFAULT_LAYOUT, PaneLogLayout

Path = EngineKind
"""The operator's path: the engine the pipeline runs on (:class:`panes.engines.EngineKind`)."""

MAPPED_VALUES = "the pane-log layout maps the values itself (value_mapper)"


def _columnar_off(layout: PaneLogLayout) -> str | None:
    """Why the operator's output keeps the pipeline off the columnar engine (None: it does
    not)."""
    return None if layout.value_mapper is None else MAPPED_VALUES


def choice_of(
    engine: Engine,
    schema: InputSchema,
    layout: PaneLogLayout = DEFAULT_LAYOUT,
    *,
    lift: bool = True,
    columnar: bool = True,
) -> Choice:
    """The path of the pipeline ``engine`` runs over input of ``schema`` into pane-log columns
    of ``layout`` (the module doc), and why the columnar engine does not apply. ``lift``,
    ``columnar``: False keeps the pipeline off those paths (what the tests and benchmarks compare
    them with)."""
    return choose(
        engine.windowing,
        engine.combine_fn,
        schema.columns_of_elements(),
        engine.weighted,
        lift=lift,
        columnar=columnar,
        unordered=True,  # a batch's rows come in no fixed order
        columnar_off=_columnar_off(layout),
    )


def path_of(
    engine: Engine,
    schema: InputSchema,
    layout: PaneLogLayout = DEFAULT_LAYOUT,
    *,
    lift: bool = True,
    columnar: bool = True,
) -> Path:
    """The path of :func:`choice_of`."""
    return choice_of(engine, schema, layout, lift=lift, columnar=columnar).kind


def engines_of(
    engine: Engine,
    schema: InputSchema,
    layout: PaneLogLayout = DEFAULT_LAYOUT,
    *,
    lift: bool = True,
    columnar: bool = True,
) -> Engines:
    """The engine of the path of :func:`choice_of`, built by the model's factory."""
    return build(
        engine,
        schema.columns_of_elements(),
        lift=lift,
        columnar=columnar,
        unordered=True,  # a batch's rows come in no fixed order
        columnar_off=_columnar_off(layout),
    )


__all__ = ["MAPPED_VALUES", "Path", "choice_of", "engines_of", "path_of"]
