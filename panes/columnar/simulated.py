"""The columnar engine driven by the simulator (``panes.Simulator(..., engine="columnar")``).

The simulator's elements are Python values; here each bundle becomes a table (a ``key`` column,
:data:`~panes.columnar.bundle.TIMESTAMP`, and the values: one column
:data:`~panes.columnar.accumulators.VALUE` where the aggregates read whole values, else a column
per field the aggregates read), and all keys' windows are one table. What a dropped element
reports is the element itself, as the simulator was given it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from panes.columnar.accumulators import VALUE
from panes.columnar.bundle import TIMESTAMP, ElementColumns, NotColumnar, columnar_reason
from panes.columnar.engine import ColumnarEngine
from panes.columnar.windows import Windows
from panes.combiners import Aggregates, CombineFn, Filtered, carried_fields_of
from panes.pane import Dropped, Pane
from panes.state import KeyState
from panes.windowfns import Element
from panes.windowing import Windowing

KEY = "key"
_ROW = "pst_row"  # a bundle row's element, to report it as given


class ColumnarRunner:
    """All keys' windows as one table of a :class:`~panes.columnar.ColumnarEngine`, built at the
    first bundle (when the values' types are known)."""

    def __init__(self, windowing: Windowing, combine_fn: CombineFn, weighted: bool) -> None:
        self.windowing = windowing
        self.combine_fn = combine_fn
        fns = list(combine_fn.fns.values()) if isinstance(combine_fn, Aggregates) else [combine_fn]
        # a filtered aggregate reads its condition's flag, computed here from the values (the
        # simulator is its own tagger: the model's evaluation of the condition)
        self._flags = {fn.flag: fn.condition for fn in fns if isinstance(fn, Filtered)}
        reads = [
            field
            for fn in fns
            if fn.reads_value
            for field in (
                carried_fields_of(fn) if isinstance(fn, Filtered) else (getattr(fn, "field", None),)
            )
        ]
        self.whole = any(field is None for field in reads)
        if self.whole and any(field is not None for field in reads):
            raise NotColumnar(
                "the columnar engine does not apply: aggregates read both whole values and fields"
            )
        self.fields = () if self.whole else tuple(dict.fromkeys(f for f in reads if f))
        self._values = (VALUE,) if self.whole else self.fields
        self._untyped: set[str] = set()  # columns of only missing values so far (held as int64)
        self._typed: set[str] = set()
        # what can be said before the values' types are known: anything but the types
        reason = columnar_reason(windowing, combine_fn, self._columns({}), weighted)
        if reason is not None:
            raise NotColumnar(f"the columnar engine does not apply: {reason}")
        self.engine: ColumnarEngine | None = None
        self.windows: Windows | None = None
        self._given: list[Element] = []
        self._keys: dict[Any, None] = {}  # the keys with windows, in the order first kept

    def _columns(self, types: dict[str, pa.DataType]) -> ElementColumns:
        """The bundles' columns (no types yet: a stand-in that every aggregate takes)."""
        values = (VALUE,) if self.whole else self.fields
        types = {KEY: pa.string(), **{c: pa.int64() for c in values}, **types}
        return ElementColumns((KEY,), values, tuple(types.items()), self.whole, self._decode)

    def add(
        self, elements: Sequence[tuple[Any, Any, int]], watermark: int, processing_time: int
    ) -> tuple[list[Pane], list[Dropped]]:
        """One bundle at the clocks: (panes, dropped), in the per-key simulator's order: by key
        in the order of its first element in the bundle; for a key, by window in the order of
        its first element."""
        if not elements:
            return [], []
        table = self._table(elements)
        panes, dropped = self._visit(table, watermark, processing_time)
        keys: dict[Any, int] = {}
        windows: dict[tuple[Any, int], int] = {}
        start_of = self.windowing.window_fn.start_of  # type: ignore[attr-defined]  # fixed
        for i, (key, _, ts) in enumerate(elements):
            keys.setdefault(key, i)
            windows.setdefault((key, start_of(ts)), i)

        def order(p: Pane | Dropped) -> tuple[int, int]:
            start = -1 if p.window is None else p.window.start
            return keys[p.key], windows.get((p.key, start), -1)

        for key in keys:
            self._keys.setdefault(key, None)
        self._forget_empty_keys()
        return sorted(panes, key=order), sorted(dropped, key=order)

    def advance(self, watermark: int, processing_time: int) -> tuple[list[Pane], list[Dropped]]:
        """The clocks moved: (panes, dropped), in the per-key simulator's order: by key in the
        order the simulator first kept it (:attr:`_keys`); for a key, by wake-up and window."""
        if self.engine is None:
            return [], []
        panes, dropped = self._visit(None, watermark, processing_time)
        rank = {key: i for i, key in enumerate(self._keys)}
        self._forget_empty_keys()
        return sorted(panes, key=lambda p: rank[p.key]), dropped

    def _forget_empty_keys(self) -> None:
        """Keys without a window leave :attr:`_keys` (the per-key simulator drops their state)."""
        assert self.windows is not None
        kept = set(self.windows.keys.column(KEY).to_pylist())
        for key in [k for k in self._keys if k not in kept]:
            del self._keys[key]

    @property
    def states(self) -> dict[Any, KeyState]:
        return {} if self.windows is None else self.windows.key_states()

    def _visit(self, table: pa.Table | None, watermark: int, processing_time: int):
        assert self.engine is not None and self.windows is not None
        visit = self.engine.visit(self.windows, table, watermark, processing_time)
        self.windows = visit.windows
        columns = visit.panes()
        return ([] if columns is None else columns.panes()), visit.dropped

    def _table(self, elements: Sequence[tuple[Any, Any, int]]) -> pa.Table:
        first = len(self._given)
        self._given.extend((value, ts) for _, value, ts in elements)
        columns: dict[str, Any] = {KEY: [e[0] for e in elements]}
        columns[TIMESTAMP] = pa.array([e[2] for e in elements], pa.int64())
        if self.whole:
            columns[VALUE] = [e[1] for e in elements]
        else:
            for field in self.fields:
                condition = self._flags.get(field)
                if condition is None:
                    columns[field] = [e[1][field] for e in elements]
                    continue
                flags = [
                    e[1][field] if field in e[1] else condition.evaluate(e[1]) for e in elements
                ]
                columns[field] = pa.array(flags, pa.bool_())
        columns[_ROW] = pa.array(range(first, first + len(elements)), pa.int64())
        try:
            arrays = {n: c if isinstance(c, pa.Array) else pa.array(c) for n, c in columns.items()}
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise NotColumnar(f"the columnar engine does not apply: {e}") from None
        for name in (KEY, *self._values):  # no value: the column's type (int64 until one)
            if not pa.types.is_null(arrays[name].type):
                self._typed.add(name)
                continue
            had = None if self.engine is None else self.engine.columns.arrow_type(name)
            arrays[name] = arrays[name].cast(had or pa.int64())
            if had is None:
                self._untyped.add(name)
        types = {n: a.type for n, a in arrays.items() if n not in (KEY, TIMESTAMP, _ROW)}
        if self.engine is None:
            spec = self._columns({KEY: arrays[KEY].type, **types})
            self.engine = ColumnarEngine(self.windowing, self.combine_fn, spec)
            self.windows = self.engine.empty()
        spec = self.engine.columns
        known = {n: spec.arrow_type(n) for n in (KEY, *spec.values)}
        promoted = {}
        for name, had in known.items():
            got = arrays[name].type
            if name in self._untyped and name in self._typed:  # its first values
                self._untyped.discard(name)
                if got != had:
                    promoted[name] = got
            elif got != had:
                raise NotColumnar(
                    f"the columnar engine does not apply: column {name!r} was {had}, now {got}"
                )
            else:
                arrays[name] = arrays[name].cast(had)
        if promoted:
            self._promote({**known, **promoted})
        return pa.table(arrays)

    def _promote(self, types: dict[str, pa.DataType]) -> None:
        """A new engine for columns whose type is known now, the windows cast to its table."""
        assert self.engine is not None and self.windows is not None
        table = self.windows.table()
        self.engine = ColumnarEngine(self.windowing, self.combine_fn, self._columns(types))
        self.windows = self.engine.windows(table.cast(self.engine.schema))

    def _decode(self, table: pa.Table) -> dict[Any, list[Element]]:
        """A bundle's rows as the elements the simulator was given, by key in row order."""
        out: dict[Any, list[Element]] = {}
        keys = table.column(KEY).to_pylist()
        for key, row in zip(keys, table.column(_ROW).to_pylist(), strict=True):
            out.setdefault(key, []).append(self._given[row])
        return out


__all__ = ["ColumnarRunner"]
