"""Panes as columns: what a visit of the columnar engine emits.

One row per pane, in the order of the per-key engine's output (by key; for a key, the panes the
watermark fired, by wake-up and window, before those fired by new elements, by window). The
columns are the :class:`~panes.pane.Pane` fields: the key columns, window, timestamp, pane info
and clocks as arrays, each aggregate's value and accumulator as the window table holds them. A
pane of the columnar engine is never a retraction and supersedes nothing (its windows do not
merge, its mode keeps no emitted pane). The pane log's writer turns them into rows
(:func:`sinks.pane_log.pane_rows`); :meth:`PaneColumns.panes` into the engine's panes.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """Panes as columns (the module doc). ``values``: per aggregate, its output values (an
    Arrow array, or an integer sum's 128-bit int64 pairs, :mod:`.wide`); ``names``: the
    aggregates' names (None: one aggregate, its value the pane's)."""

    keys: pa.Table
    window_start: np.ndarray
    window_end: np.ndarray
    timestamp: np.ndarray
    index: np.ndarray
    nonspeculative: np.ndarray
    timing: np.ndarray
    is_last: np.ndarray
    watermark: np.ndarray
    processing_time: np.ndarray
    values: list[Any]
    accs: Sequence[Acc]
    held: list[list[Any]]
    names: list[str] | None

    def __len__(self) -> int:
        return len(self.window_start)

    def value_list(self, i: int) -> list[Any]:
        """The ``i``-th aggregate's values as Python's."""
        value = self.values[i]
        if isinstance(value, np.ndarray):
            return wide.python_ints(value)
        return value.to_pylist()

    def accumulators(self) -> list[Any]:
        """The combiner's accumulator of each pane (a tuple of the aggregates')."""
        per_part = [a.accumulators(h) for a, h in zip(self.accs, self.held, strict=True)]
        if self.names is None:
            return per_part[0]
        return list(zip(*per_part, strict=True))

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
        out = []
        columns = zip(
            keys,
            self.window_start.tolist(),
            self.window_end.tolist(),
            values,
            self.timestamp.tolist(),
            self.index.tolist(),
            self.nonspeculative.tolist(),
            self.timing.tolist(),
            self.is_last.tolist(),
            accs,
            self.watermark.tolist(),
            self.processing_time.tolist(),
            strict=True,
        )
        for key, start, end, value, ts, index, nonspec, timing, last, acc, wm, pt in columns:
            info = PaneInfo(index, nonspec, TIMINGS[timing], index == 0, last)
            out.append(Pane(key, Window(start, end), value, ts, info, False, (), acc, wm, pt))
        return out


__all__ = ["TIMINGS", "PaneColumns"]
