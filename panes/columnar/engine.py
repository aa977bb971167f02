"""The columnar engine: many keys' windows as one table, the model's steps done column by column.

For a pipeline it serves (:func:`~panes.columnar.bundle.columnar_reason`: fixed windows, built-in
aggregates, a trigger evaluable once per class of windows, a mode that keeps no emitted pane),
the state of a window is a handful of numbers: its accumulator's columns, the trigger's state,
the elements since it last fired, its output-timestamp hold, its pane counters, whether it
closed and when it next needs the watermark. :class:`ColumnarEngine` keeps the windows of any
number of keys as one table (:class:`~panes.columnar.windows.Windows`, a row per key and window)
and a visit (:mod:`.visit`) does over all rows at once what the per-key engine does per key and
window (:meth:`panes.engine.Engine.advance`, then :meth:`~panes.engine.Engine.add_combined`), by
the same rules (:mod:`panes.rules`) and the same trigger, each evaluated once per class of rows
(:mod:`.classes`).

The stored table (:attr:`ColumnarEngine.schema`; :meth:`Windows.key_states` maps it onto the
engine's :class:`panes.state.KeyState`, to inspect and compare):

=================  ==============================================================================
column             what it holds
=================  ==============================================================================
the key columns    the key's value, in the elements' types
``start``          the window's start (µs; its end is ``start + size``)
``acc_<i>``        the ``i``-th aggregate's accumulator (:mod:`.accumulators`; a mean:
                   ``acc_<i>_sum``, ``_count``); an integer sum in 128 bits (:mod:`.wide`)
``trigger``        the trigger's state (pickled tuple; null once the window closed)
``closed``         the trigger finished: later elements of the window are dropped
``fresh``          elements added since the window last fired
``hold``           the output-timestamp hold (null: none)
``pane_index``     panes emitted so far; ``nonspeculative``: non-early panes emitted so far
``emitted``        whether the window emitted a pane
``due``            the next watermark at which the window needs attention (µs)
``seen_wm``        the key's watermark and processing time (``seen_pt``), as its ``KeyState``
=================  ==============================================================================

>>> import pyarrow as pa
>>> from panes import AfterWatermark, FixedWindows, Windowing, combiners
>>> from panes.columnar import ColumnarEngine, ElementColumns
>>> columns = ElementColumns(("k",), ("n",), (("k", pa.string()), ("n", pa.int64())))
>>> engine = ColumnarEngine(Windowing(FixedWindows(10)), combiners.sum("n"), columns)
>>> bundle = pa.table({"k": ["a", "a", "b"], "ts_us": [1, 2, 3], "n": [5, 6, 7]})
>>> visit = engine.visit(engine.empty(), bundle, watermark=0, processing_time=0)
>>> visit = engine.visit(visit.windows, None, watermark=10, processing_time=0)
>>> [(p.key, p.window, p.value, p.pane.timing.name) for p in visit.panes().panes()]
[('a', [0, 10), 11, 'ON_TIME'), ('b', [0, 10), 7, 'ON_TIME')]
"""

from __future__ import annotations

import pyarrow as pa

from panes.columnar.accumulators import Acc
from panes.columnar.bundle import ElementColumns, Lifting, NotColumnar, columnar_reason
from panes.columnar.classes import TriggerClasses
from panes.columnar.visit import Visit
from panes.columnar.windows import Layout, Windows
from panes.combiners import Aggregates, CombineFn
from panes.engine import Engine
from panes.windowing import Windowing


class ColumnarEngine:
    """The Dataflow model for a table of keys' windows (the module doc). Raises
    :class:`~panes.columnar.bundle.NotColumnar` naming what it does not serve."""

    def __init__(
        self, windowing: Windowing, combine_fn: CombineFn, columns: ElementColumns
    ) -> None:
        reason = columnar_reason(windowing, combine_fn, columns)
        if reason is not None:
            raise NotColumnar(f"the columnar engine does not apply: {reason}")
        self.windowing = windowing
        self.combine_fn = combine_fn
        self.columns = columns
        self.per_key = Engine(windowing, combine_fn)  # reports what it drops
        self.lifting = Lifting.of(windowing, combine_fn, columns)
        self.rules = windowing.rules
        self.event_wakeups = windowing.trigger.has_event_time
        accs = tuple(
            Acc.of(
                i,
                part,
                None if part.value_column is None else columns.arrow_type(part.value_column),
            )
            for i, part in enumerate(self.lifting.parts)
        )
        self.layout = Layout(
            key_fields=tuple(pa.field(k, columns.arrow_type(k)) for k in columns.keys),
            size=self.lifting.size,
            accs=accs,
            names=list(combine_fn.fns) if isinstance(combine_fn, Aggregates) else None,
            triggers=TriggerClasses(windowing.trigger),
        )
        """The table's key columns, window size, accumulators and trigger classes."""
        self.schema = self.layout.schema
        """The stored table of windows (the module doc)."""

    def empty(self) -> Windows:
        """No windows."""
        return self.windows(self.schema.empty_table())

    def windows(self, table: pa.Table) -> Windows:
        """Windows stored as ``table`` (of :attr:`schema`)."""
        return Windows.of_table(self.layout, table)

    def visit(
        self, windows: Windows, bundle: pa.Table | None, watermark: int, processing_time: int
    ) -> Visit:
        """Visit ``windows`` at the clocks with a bundle of elements (a table of
        :class:`~panes.columnar.bundle.ElementColumns`; None: no elements): every key with
        elements or a window due is advanced to the clocks, then the bundle is added. The
        :class:`~panes.columnar.visit.Visit` holds the panes, the dropped elements and the
        windows after."""
        lifted = None
        if bundle is not None and bundle.num_rows:
            lifted = self.lifting.lift(bundle, watermark)
        return Visit(self, windows, lifted, watermark, processing_time).run()


__all__ = ["ColumnarEngine"]
