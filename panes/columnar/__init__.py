"""The columnar engine: the Dataflow model over a table of many keys' windows.

The per-key :class:`~panes.engine.Engine` is the model's reference: every pipeline runs on it.
For the pipelines whose windows are a handful of numbers (fixed windows, built-in aggregates, a
trigger that reads the clocks only through "the watermark passed the end of the window", a mode
that keeps no emitted pane), :class:`ColumnarEngine` does the same steps over a table of windows,
column by column, by the same rules (:mod:`panes.rules`) and the same trigger, each evaluated once
per class of windows (:mod:`.classes`). Where it does not apply it says why
(:func:`columnar_reason`, :class:`NotColumnar`). The simulator drives either
(``panes.Simulator(..., engine="columnar")``), and the scenario transcripts run on both.

========================  =========================================================================
module                    what it holds
========================  =========================================================================
:mod:`.engine`            :class:`ColumnarEngine`: the stored table of windows, a visit's entry
:mod:`.visit`             a visit: advance, add, fire, emit, over the table's rows
:mod:`.windows`           the table of windows in memory
:mod:`.bundle`            a bundle's elements combined per key and window in Arrow (lifting);
                          also fed to the per-key engine (:func:`add_bundle`)
:mod:`.accumulators`      the built-in aggregates in columns
:mod:`.classes`           a scalar rule evaluated once per class of rows; a trigger's classes
:mod:`.output`            panes as columns (:class:`PaneColumns`)
:mod:`.wide`              128-bit integer sums
:mod:`.keys`              key columns and the engine's keys
========================  =========================================================================

The columnar engine needs numpy and pyarrow; the rest of :mod:`panes` imports neither.
"""

from panes.columnar.bundle import (
    TIMESTAMP,
    Bundle,
    ElementColumns,
    Lifted,
    Lifting,
    NotColumnar,
    add_bundle,
    columnar_reason,
    lifting_reason,
)
from panes.columnar.engine import ColumnarEngine
from panes.columnar.output import PaneColumns
from panes.columnar.visit import Visit
from panes.columnar.windows import Windows

__all__ = [
    "TIMESTAMP",
    "Bundle",
    "ColumnarEngine",
    "ElementColumns",
    "Lifted",
    "Lifting",
    "NotColumnar",
    "PaneColumns",
    "Visit",
    "Windows",
    "add_bundle",
    "columnar_reason",
    "lifting_reason",
]
