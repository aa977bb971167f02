"""Panes as columns: what a visit of the columnar engine emits.

One row per pane: the :class:`~panes.pane.Pane` fields as columns (the key columns as a table,
window, timestamp, pane info and clocks as arrays, each aggregate's values as an array). The
columnar engine emits its panes so (in the order of the per-key engine's output: by key; for a
key, the panes the watermark fired, by wake-up and window, before those fired by new elements,
by window); they are never retractions and supersede nothing (its windows do not merge, its
mode keeps no emitted pane). The pane log's writer turns panes given as columns into rows
(:func:`sinks.lake.pane_log.pane_rows`), whichever engine emitted them; :meth:`PaneColumns.panes`
turns them into the engine's panes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from panes.columnar import wide
from panes.columnar.accumulators import Acc
from panes.columnar.keys import engine_keys
from panes.pane import Pane, PaneInfo, Timing
from panes.window import Window

TIMINGS = (Timing.EARLY, Timing.ON_TIME, Timing.LATE)
"""The timings, by their codes in :attr:`PaneColumns.timing`."""
EARLY, ON_TIME, LATE = 0, 1, 2


@dataclass(frozen=True)
class PaneColumns:
    """Panes as columns (the module doc). The arrays are numpy arrays or Python lists of the
    :class:`~panes.pane.Pane` fields (``timing``: codes into :data:`TIMINGS`); ``values``: per
    aggregate, its output values (an Arrow array, or an integer sum's 128-bit int64 pairs,
    :mod:`.wide`); ``names``: the aggregates' names (None: one aggregate, its value the pane's);
    ``accumulators()``: the combiner's accumulator of each pane. ``is_retraction`` and
    ``supersedes`` (lists of windows) are None where no pane is a retraction or supersedes
    anything."""

    keys: pa.Table
    window_start: Any
    window_end: Any
    timestamp: Any
    index: Any
    nonspeculative: Any
    timing: Any
    is_last: Any
    watermark: Any
    processing_time: Any
    values: list[Any]
    names: list[str] | None
    accumulators: Callable[[], list[Any]]
    is_retraction: Any = None
    supersedes: list[tuple[Window, ...]] | None = None

    def __len__(self) -> int:
        return len(self.window_start)

    def value_list(self, i: int) -> list[Any]:
        """The ``i``-th aggregate's values as Python's."""
        value = self.values[i]
        if isinstance(value, np.ndarray):
            return wide.python_ints(value)
        return value.to_pylist()

    def panes(self) -> list[Pane]:
        """The engine's :class:`~panes.pane.Pane` of each row."""
        keys = engine_keys([self.keys.column(k).to_pylist() for k in self.keys.column_names])
        per_part = [self.value_list(i) for i in range(len(self.values))]
        if self.names is None:
            values: list[Any] = per_part[0]
        else:
            rows = zip(*per_part, strict=True)
            values = [dict(zip(self.names, row, strict=True)) for row in rows]
        accs = self.accumulators()
        retractions = [False] * len(keys) if self.is_retraction is None else self.is_retraction
        supersedes = [()] * len(keys) if self.supersedes is None else self.supersedes
        out = []
        columns = zip(
            keys,
            _list(self.window_start),
            _list(self.window_end),
            values,
            _list(self.timestamp),
            _list(self.index),
            _list(self.nonspeculative),
            _list(self.timing),
            _list(self.is_last),
            _list(retractions),
            supersedes,
            accs,
            _list(self.watermark),
            _list(self.processing_time),
            strict=True,
        )
        for key, start, end, value, ts, index, nonspec, timing, last, *rest in columns:
            retraction, superseded, acc, wm, pt = rest
            info = PaneInfo(index, nonspec, TIMINGS[timing], index == 0, last)
            window = Window(start, end)
            out.append(Pane(key, window, value, ts, info, retraction, superseded, acc, wm, pt))
        return out


def accumulators_of(accs: Sequence[Acc], held: list[list[Any]], single: bool) -> list[Any]:
    """The combiner's accumulator of each row of accumulators ``held`` (a tuple of the
    aggregates', unless ``single``)."""
    per_part = [a.accumulators(h) for a, h in zip(accs, held, strict=True)]
    return per_part[0] if single else list(zip(*per_part, strict=True))


def _list(column: Any) -> list:
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


__all__ = ["TIMINGS", "PaneColumns", "accumulators_of"]
