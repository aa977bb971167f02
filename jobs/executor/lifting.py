"""Combiner lifting: a bucket's elements combined per key and window in Arrow, not one by one.

The engine evaluates a window's trigger once per bundle (:meth:`panes.engine.Engine.add_elements`),
so what a window needs from a bundle is the combination of its values, how many there were and
their earliest (or latest) timestamp not behind the watermark. For a window function that gives
each element one window without merging (:class:`~panes.windowfns.FixedWindows`) and built-in
aggregates whose parts combine exactly, :class:`Lifting` computes those per (key, window) with
Arrow's C++ ``group_by`` over the bucket's input table and hands them to
:meth:`~panes.engine.Engine.add_combined`: no Python object per element.

What is lifted, and how a part becomes the aggregate's accumulator:

===========================  ===================================================  =============
aggregate                    Arrow aggregation (per key and window)               value types
===========================  ===================================================  =============
``count()``                  rows                                                 any
``count(v)``                 ``count`` of non-null ``v``                          any
``sum(v)``                   ``sum`` (0 for none)                                 integers
``mean(v)``                  (``sum``, ``count``): the accumulator's pair        integers
``min(v)``, ``max(v)``       ``min``/``max`` (null for none)                      integers, text
===========================  ===================================================  =============

Integers only for sums: a float sum's rounding depends on the order of additions, and the pane
log must be the same bit for bit whichever path computed it. Arrow's sums wrap at 64 bits: a
window whose integer sums could leave them (its largest magnitude times its rows reaches 2^63) is
not lifted, its elements are added one by one (:meth:`Lifting.risky_windows`; one check over the
whole table finds that no window is, the common case); the key's other windows are lifted. Anything
else (sessions, sliding windows, weighted input, ``to_list``, a user's ``CombineFn``, float sums)
takes the per-element path (:func:`jobs.executor.operator_input.elements_by_key`), decided once
per pipeline by :meth:`Lifting.of`. Rows of windows the watermark has expired are not combined:
they are decoded and added element by element (:func:`add_bundle`), so each reaches ``late`` as
its own row and a late-heavy batch costs what the per-element path costs; the elements of a live
window whose trigger had finished are decoded from the same table only when it drops them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from jobs.executor.operator_input import (
    TS_US,
    InputSchema,
    canonical_order,
    elements_by_key,
    engine_keys,
    key_table,
    rows_of_keys,
)
from panes.combiners import Aggregates, CombineFn, Count, Max, Mean, Min, Sum
from panes.engine import Combined, Engine, Output
from panes.state import KeyState
from panes.window import Window
from panes.windowfns import FixedWindows
from panes.windowing import TimestampCombiner

START = "pst_window_start"
COUNT = "count_all"
_HOLD = "pst_hold"
_EXACT_SUMS = (pa.types.is_integer,)
_EXACT_EXTREMA = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string)
_INT64_LIMIT = 2**63


@dataclass(frozen=True)
class _Part:
    """One aggregate's share of a part: ``kind`` (count_rows, count, sum, mean, min, max) over
    ``column`` (None: rows)."""

    kind: Literal["count_rows", "count", "sum", "mean", "min", "max"]
    column: str | None


@dataclass(frozen=True)
class Lifting:
    """How to lift one pipeline's combiner (built by :meth:`of`; picklable, shipped with the
    operator's configuration)."""

    size: int
    offset: int
    parts: tuple[_Part, ...]
    single: bool  # the combiner is one aggregate (its accumulator is not a tuple)
    timestamps: TimestampCombiner
    schema: InputSchema

    @property
    def keys(self) -> tuple[str, ...]:
        return self.schema.keys

    @classmethod
    def of(cls, engine: Engine, schema: InputSchema) -> Lifting | None:
        """The lifting of ``engine`` over input of ``schema``,
        or None when the per-element path must run (see the module doc)."""
        window_fn = engine.windowing.window_fn
        if engine.weighted or type(window_fn) is not FixedWindows:
            return None
        fn = engine.combine_fn
        fns = list(fn.fns.values()) if isinstance(fn, Aggregates) else [fn]
        parts = [_part_of(f, schema) for f in fns]
        if any(p is None for p in parts):
            return None
        return cls(
            size=window_fn.size,
            offset=window_fn.offset,
            parts=tuple(p for p in parts if p is not None),
            single=not isinstance(fn, Aggregates),
            timestamps=engine.windowing.timestamp_combiner,
            schema=schema,
        )

    def combined_by_key(self, table: pa.Table, watermark: int, cutoff: int) -> dict[Any, Bundle]:
        """The bucket's elements (``table``: :func:`jobs.executor.operator_input.input_table`)
        as each key's :class:`Bundle`, keys in the per-element path's order. ``cutoff``: windows
        ending before it drop their elements (:meth:`panes.engine.Engine.droppable_before` the
        watermark); their rows are not combined but decoded, to be reported one by one, as are
        the rows of a window whose sums could leave 64 bits (:meth:`risky_windows`)."""
        if table.num_rows == 0:
            return {}
        one_by_one: dict[Any, list] = {}
        risky = self.risky_windows(table)
        if risky is not None:
            mine = rows_of_keys(self.windows_of(table), risky)
            one_by_one = self._decoded(table.filter(pa.array(mine)))
            table = table.filter(pa.array(~mine))
        lifted = self.lift(table, watermark, cutoff)
        bundles = self._bundles(lifted)
        if not lifted.expired and not one_by_one:
            return bundles
        for key, elements in lifted.expired.items():
            bundles.setdefault(key, Bundle([], [])).elements = elements
        for key, elements in one_by_one.items():
            bundle = bundles.setdefault(key, Bundle([], []))
            if bundle.elements:  # also elements of expired windows
                elements = bundle.elements + elements
                canonical_order(elements)
            bundle.elements = elements
        return self._in_key_order(bundles)

    def lift(self, table: pa.Table, watermark: int, cutoff: int) -> Lifted:
        """The bucket's elements combined per key and window (:class:`Lifted`); ``table`` holds
        no window of :meth:`risky_windows`; ``cutoff`` as for :meth:`combined_by_key`."""
        starts = self.starts(table)
        expired = starts + self.size < cutoff
        late: dict[Any, list] = {}
        if expired.any():
            late = self._decoded(table.filter(pa.array(expired)))
            live = ~expired
            table, starts = table.filter(pa.array(live)), starts[live]
        parts = self._grouped(table, starts, watermark)
        return Lifted(self, parts, late, _Elements(table, starts, self))

    def starts(self, table: pa.Table) -> Any:
        """The start (µs) of each row's window (a numpy array)."""
        ts = table.column(TS_US).to_numpy()
        return ts - (ts - self.offset) % self.size

    def windows_of(self, table: pa.Table) -> pa.Table:
        """Each row's window: its key columns and :data:`START`."""
        starts = pa.array(self.starts(table), pa.int64())
        return table.select(list(self.keys)).append_column(START, starts)

    def risky_windows(self, table: pa.Table) -> pa.Table | None:
        """The windows of ``table``'s rows (key columns and :data:`START`) whose integer sums
        could leave 64 bits in Arrow: their largest magnitude times their rows reaches 2^63.
        None when there is none, which one check over the whole table finds in the common case.

        >>> from jobs.executor.operator_input import InputSchema
        >>> from panes import FixedWindows, Windowing, combiners
        >>> from panes.engine import Engine
        >>> schema = InputSchema(("k",), ("n",), (("k", pa.string()), ("n", pa.int64())))
        >>> total = combiners.aggregates(total=combiners.sum("n"))
        >>> engine = Engine(Windowing(FixedWindows(10)), total)
        >>> lifting = Lifting.of(engine, schema)
        >>> rows = {"k": ["a", "a", "a", "b"], "ts_us": [1, 2, 13, 3], "n": [2**62, 2**62, 1, 1]}
        >>> lifting.risky_windows(pa.table(rows)).to_pylist()
        [{'k': 'a', 'pst_window_start': 0}]
        """
        columns = sorted({p.column for p in self.parts if p.kind in ("sum", "mean") and p.column})
        if not columns or _bound(table, columns, table.num_rows) < _INT64_LIMIT:
            return None
        grouped = self.windows_of(table)
        for c in columns:
            grouped = grouped.append_column(c, table.column(c))
        aggregations = [([], "count_all", None), *((c, "min_max", None) for c in columns)]
        result = grouped.group_by([*self.keys, START], use_threads=False).aggregate(aggregations)
        counts = result.column(COUNT).to_pylist()
        risky = [False] * result.num_rows
        for c in columns:
            bounds = result.column(f"{c}_min_max").combine_chunks()
            lows, highs = bounds.field("min").to_pylist(), bounds.field("max").to_pylist()
            for i, (low, high, n) in enumerate(zip(lows, highs, counts, strict=True)):
                if low is not None and max(abs(low), abs(high)) * n >= _INT64_LIMIT:
                    risky[i] = True
        return result.select([*self.keys, START]).filter(pa.array(risky))

    def _decoded(self, table: pa.Table) -> dict[Any, list]:
        """``table``'s elements by key, each key's in canonical order."""
        by_key = elements_by_key(table, self.schema)
        for elements in by_key.values():
            canonical_order(elements)
        return by_key

    def _grouped(self, table: pa.Table, starts: Any, watermark: int) -> pa.Table:
        """Per key and window of ``table`` (rows of windows that are not expired): its start,
        row count, hold and aggregations (:class:`Lifted`), sorted by key and start."""
        grouped = table.select([*self.keys, *self._value_columns()]).append_column(
            START, pa.array(starts, pa.int64())
        )
        # (column, function) -> options; each once: a mean shares a sum's and a count's
        wanted: dict[tuple[str, str], pc.FunctionOptions | None] = {}
        if self.timestamps is not TimestampCombiner.END_OF_WINDOW:
            times = table.column(TS_US)
            held = pc.if_else(pc.greater_equal(times, watermark), times, None)
            grouped = grouped.append_column(_HOLD, held)
            wanted[(_HOLD, self._hold_function)] = None
        for part in self.parts:
            for column, function, options in _aggregations(part):
                wanted[(column, function)] = options
        aggregations = [([], "count_all", None), *((c, f, o) for (c, f), o in wanted.items())]
        result = grouped.group_by([*self.keys, START], use_threads=False).aggregate(aggregations)
        return result.sort_by([(k, "ascending") for k in (*self.keys, START)])

    @property
    def _hold_function(self) -> str:
        return "min" if self.timestamps is TimestampCombiner.EARLIEST else "max"

    @property
    def hold_column(self) -> str:
        """The grouped table's hold column (:class:`Lifted`)."""
        return f"{_HOLD}_{self._hold_function}"

    @property
    def acc_columns(self) -> list[tuple[str, ...]]:
        """Per part, the grouped table's columns of its accumulator (a mean: sum and count)."""
        out: list[tuple[str, ...]] = []
        for part in self.parts:
            if part.kind == "count_rows":
                out.append((COUNT,))
            elif part.kind == "mean":
                out.append((f"{part.column}_sum", f"{part.column}_count"))
            else:
                out.append((f"{part.column}_{part.kind}",))
        return out

    def _in_key_order(self, bundles: dict[Any, Bundle]) -> dict[Any, Bundle]:
        """``bundles`` in Arrow's order of their keys (the per-element path's)."""
        keys = list(bundles)
        table = key_table(keys, [pa.field(k, self.schema.arrow_type(k)) for k in self.keys])
        order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in self.keys])
        return {keys[i]: bundles[keys[i]] for i in order.to_pylist()}

    # -- helpers -------------------------------------------------------------------------------

    def _value_columns(self) -> list[str]:
        return sorted({p.column for p in self.parts if p.column is not None})

    def _bundles(self, lifted: Lifted) -> dict[Any, Bundle]:
        """Each key's parts (:class:`~panes.engine.Combined`) of ``lifted``."""
        result = lifted.parts
        column = {n: result.column(n).to_pylist() for n in result.schema.names}
        keys = engine_keys([column[k] for k in self.keys])
        starts, rows = column[START], column[COUNT]
        holds = column.get(self.hold_column)
        per_part = [
            list(zip(*(column[c] for c in names), strict=True))
            if len(names) > 1
            else column[names[0]]
            for names in self.acc_columns
        ]
        if self.single:
            accs = per_part[0]
        else:
            accs = list(zip(*per_part, strict=True)) if per_part else [()] * len(starts)
        out: dict[Any, Bundle] = {}
        size, elements = self.size, lifted.elements
        for i, key in enumerate(keys):
            start = starts[i]
            part = Combined(
                Window(start, start + size),
                accs[i],
                rows[i],
                None if holds is None else holds[i],
                elements.of(key, start),
            )
            bundle = out.get(key)
            if bundle is None:
                out[key] = Bundle([], [part])
            else:
                bundle.parts.append(part)
        return out


@dataclass(frozen=True)
class Lifted:
    """A bucket's elements lifted (:meth:`Lifting.lift`): ``parts``, one row per key and live
    window (the key columns, :data:`START`, the row count :data:`COUNT`, the hold
    (:attr:`Lifting.hold_column`) and each part's accumulator columns
    (:attr:`Lifting.acc_columns`), sorted by key and start); the elements of expired windows
    by key (canonical order: each is reported as dropped); and the live windows' elements,
    decoded only when a closed window drops them."""

    lifting: Lifting
    parts: pa.Table
    expired: dict[Any, list]
    elements: _Elements


def _bound(table: pa.Table, columns: list[str], rows: int) -> int:
    """The largest magnitude among ``columns`` of ``table`` times ``rows``: what bounds every
    running sum of so many of their values."""
    bound = 0
    for column in columns:
        extremes = pc.min_max(table.column(column))
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        if low is not None:
            bound = max(bound, abs(low), abs(high))
    return bound * rows


def _part_of(fn: CombineFn, schema: InputSchema) -> _Part | None:
    field = getattr(fn, "field", None)
    if type(fn) is Count:
        return _Part("count_rows", None) if field is None else _Part("count", field)
    if field is None or field not in schema.values:
        return None
    arrow_type = schema.arrow_type(field)
    if type(fn) in (Sum, Mean):
        exact = any(check(arrow_type) for check in _EXACT_SUMS)
        return _Part("sum" if type(fn) is Sum else "mean", field) if exact else None
    if type(fn) in (Min, Max):
        exact = any(check(arrow_type) for check in _EXACT_EXTREMA)
        return _Part("min" if type(fn) is Min else "max", field) if exact else None
    return None


_ALL = pc.ScalarAggregateOptions(skip_nulls=True, min_count=0)
_VALID = pc.CountOptions(mode="only_valid")


def _aggregations(part: _Part) -> list[tuple[str, str, pc.FunctionOptions | None]]:
    if part.kind == "count_rows":
        return []  # the parts' row count
    column = part.column or ""
    if part.kind == "count":
        return [(column, "count", _VALID)]
    if part.kind == "sum":
        return [(column, "sum", _ALL)]
    if part.kind == "mean":
        return [(column, "sum", _ALL), (column, "count", _VALID)]
    return [(column, part.kind, None)]


class _Elements:
    """The elements of a bucket's live windows, decoded (by the per-element path) only if one of
    them drops its elements: its trigger had finished (rare)."""

    def __init__(self, table: pa.Table, starts: Any, lifting: Lifting) -> None:
        self._table, self._starts, self._lifting = table, starts, lifting
        self._decoded: dict[Any, dict[int, list]] | None = None

    def of(self, key: Any, start: int) -> Callable[[], list]:
        return lambda: self._window(key, start)

    def _window(self, key: Any, start: int) -> list:
        if self._decoded is None:
            lifting = self._lifting
            size, offset = lifting.size, lifting.offset
            self._decoded = {}
            for k, elements in elements_by_key(self._table, lifting.schema).items():
                canonical_order(elements)
                windows: dict[int, list] = {}
                for e in elements:
                    windows.setdefault(e[1] - (e[1] - offset) % size, []).append(e)
                self._decoded[k] = windows
        return self._decoded[key][start]


class Bundle:
    """One key's share of a lifted batch: the elements it adds one by one (in canonical order:
    those of its expired windows, reported one by one, and of its windows whose sums could leave
    64 bits), and the parts of its other windows."""

    __slots__ = ("elements", "parts")

    def __init__(self, elements: list, parts: list[Combined]) -> None:
        self.elements = elements
        self.parts = parts


def add_bundle(engine: Engine, state: KeyState, key: Any, bundle: Bundle) -> Output:
    """Add a key's :class:`Bundle` to its state: what ``engine.add_elements`` of the elements it
    was made from does. Its elements one by one (of expired windows, and of windows whose sums
    could leave 64 bits) come first; each window gets all its elements in one go either way, and
    a fixed window's state depends on its own elements only."""
    if not bundle.elements:
        return engine.add_combined(state, key, bundle.parts)
    first = engine.add_elements(state, key, bundle.elements)
    out = engine.add_combined(state, key, bundle.parts)
    out.panes[:0] = first.panes
    out.dropped[:0] = first.dropped
    return out


__all__ = ["Bundle", "Lifting", "add_bundle"]
