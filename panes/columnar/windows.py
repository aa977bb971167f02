"""A table of windows in memory: what the columnar engine keeps between visits.

Key columns as Arrow, the other columns of :attr:`panes.columnar.ColumnarEngine.schema` as numpy
arrays (an accumulator as its :class:`~panes.columnar.accumulators.Acc` holds it; the trigger as
its class code, :class:`~panes.columnar.classes.TriggerClasses`), rows sorted by key, then start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from panes.columnar.accumulators import Acc
from panes.columnar.classes import TriggerClasses
from panes.columnar.keys import engine_keys, key_ids
from panes.state import KeyState, WindowState
from panes.window import Window

START, TRIGGER, CLOSED, FRESH, HOLD = "start", "trigger", "closed", "fresh", "hold"
INDEX, NONSPEC, EMITTED, DUE, SEEN_WM, SEEN_PT = (
    "pane_index",
    "nonspeculative",
    "emitted",
    "due",
    "seen_wm",
    "seen_pt",
)
HAS_HOLD = "has_hold"  # in memory: whether ``hold`` holds
_NUMBERS = (START, FRESH, INDEX, NONSPEC, DUE, SEEN_WM, SEEN_PT)


@dataclass(frozen=True)
class Layout:
    """What a table of windows holds: its key columns, its windows' size, each aggregate's
    accumulator (``names``: the aggregates' names; None: one aggregate) and its trigger's
    classes; :attr:`schema`: the stored table."""

    key_fields: tuple[pa.Field, ...]
    size: int
    accs: tuple[Acc, ...]
    names: list[str] | None
    triggers: TriggerClasses
    schema: pa.Schema = field(init=False)

    def __post_init__(self) -> None:
        schema = pa.schema(
            [
                *self.key_fields,
                pa.field(START, pa.int64(), nullable=False),
                *(pa.field(c, t) for a in self.accs for c, t in a.fields),
                pa.field(TRIGGER, pa.binary()),
                pa.field(CLOSED, pa.bool_(), nullable=False),
                pa.field(FRESH, pa.int64(), nullable=False),
                pa.field(HOLD, pa.int64()),
                pa.field(INDEX, pa.int64(), nullable=False),
                pa.field(NONSPEC, pa.int64(), nullable=False),
                pa.field(EMITTED, pa.bool_(), nullable=False),
                pa.field(DUE, pa.int64(), nullable=False),
                pa.field(SEEN_WM, pa.int64(), nullable=False),
                pa.field(SEEN_PT, pa.int64(), nullable=False),
            ]
        )
        object.__setattr__(self, "schema", schema)


class Windows:
    """The windows of a :class:`~panes.columnar.ColumnarEngine` (the module doc)."""

    def __init__(self, layout: Layout, keys: pa.Table, cols: dict[str, Any]) -> None:
        self.layout = layout
        self.keys = keys
        self.cols = cols

    @property
    def rows(self) -> int:
        return self.keys.num_rows

    @classmethod
    def of_table(cls, layout: Layout, table: pa.Table) -> Windows:
        cols: dict[str, Any] = {}
        for a in layout.accs:
            for j, c in enumerate(a.columns):
                cols[c] = a.held(j, table.column(c))
        for c in _NUMBERS:
            cols[c] = table.column(c).to_numpy().astype(np.int64)
        for c in (CLOSED, EMITTED):
            cols[c] = table.column(c).to_numpy(zero_copy_only=False).astype(bool)
        hold = table.column(HOLD)
        cols[HAS_HOLD] = hold.is_valid().to_numpy(zero_copy_only=False).astype(bool)
        cols[HOLD] = hold.fill_null(0).to_numpy().astype(np.int64)
        cols[TRIGGER] = layout.triggers.codes_of(table.column(TRIGGER))
        return cls(layout, table.select([f.name for f in layout.key_fields]), cols)

    def table(self) -> pa.Table:
        """These windows as the stored table."""
        e, cols = self.layout, self.cols
        arrays: list[Any] = list(self.keys.columns)
        arrays.append(pa.array(cols[START], pa.int64()))
        for a in e.accs:
            for j, name in enumerate(a.columns):
                arrays.append(a.stored(j, cols[name]))
        arrays.append(e.triggers.column(cols[TRIGGER]))
        arrays.append(pa.array(cols[CLOSED], pa.bool_()))
        arrays.append(pa.array(cols[FRESH], pa.int64()))
        arrays.append(pa.array(cols[HOLD], pa.int64(), mask=~cols[HAS_HOLD]))
        for name in (INDEX, NONSPEC):
            arrays.append(pa.array(cols[name], pa.int64()))
        arrays.append(pa.array(cols[EMITTED], pa.bool_()))
        for name in (DUE, SEEN_WM, SEEN_PT):
            arrays.append(pa.array(cols[name], pa.int64()))
        return pa.Table.from_arrays(arrays, schema=e.schema)

    def take(self, rows: np.ndarray) -> Windows:
        index = pa.array(rows, pa.int64())
        cols = {
            n: (v.take(index) if isinstance(v, pa.Array) else v[rows]) for n, v in self.cols.items()
        }
        return Windows(self.layout, self.keys.take(index), cols)

    @staticmethod
    def concat(parts: Sequence[Windows]) -> Windows:
        first = parts[0]
        cols = {}
        for n, v in first.cols.items():
            if isinstance(v, pa.Array):
                cols[n] = pa.concat_arrays([p.cols[n] for p in parts])
            else:
                cols[n] = np.concatenate([p.cols[n] for p in parts])
        keys = pa.concat_tables([p.keys for p in parts]).combine_chunks()
        return Windows(first.layout, keys, cols)

    def next_due(self) -> int | None:
        """The earliest wake-up of these windows (None: no window)."""
        return int(self.cols[DUE].min()) if self.rows else None

    def sorted_rows(self) -> np.ndarray:
        """Row order by key, then start."""
        ids, _ = key_ids(self.keys)
        return np.lexsort((self.cols[START], ids))

    def key_states(self) -> dict[Any, KeyState]:
        """These rows as the per-key engine's key states, to inspect and compare."""
        e, cols = self.layout, self.cols
        keys = engine_keys([self.keys.column(f.name).to_pylist() for f in e.key_fields])
        per_acc = [a.accumulators([cols[c] for c in a.columns]) for a in e.accs]
        lists = {n: cols[n].tolist() for n in (*_NUMBERS, HOLD, CLOSED, EMITTED, HAS_HOLD)}
        codes = cols[TRIGGER]
        states: dict[Any, KeyState] = {}
        for i, key in enumerate(keys):
            state = states.get(key)
            if state is None:
                state = states[key] = KeyState(lists[SEEN_WM][i], lists[SEEN_PT][i])
            closed = lists[CLOSED][i]
            if closed:
                ws = WindowState(None, None)  # type: ignore[arg-type]  # as ws.close() leaves it
                ws.close()
            else:
                parts = [p[i] for p in per_acc]
                acc = parts[0] if e.names is None else tuple(parts)
                ws = WindowState(acc, e.triggers.state(int(codes[i])))
                ws.hold = lists[HOLD][i] if lists[HAS_HOLD][i] else None
                ws.fresh = lists[FRESH][i]
            ws.index, ws.nonspeculative = lists[INDEX][i], lists[NONSPEC][i]
            ws.emitted = lists[EMITTED][i]
            ws.event_due = lists[DUE][i]
            start = lists[START][i]
            state.windows[Window(start, start + e.size)] = ws
        for state in states.values():
            state.bound_wakeups()
        return states


__all__ = ["Layout", "Windows"]
