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
column whose running sums could leave them (its largest magnitude times the rows reaches 2^63;
one ``min_max`` per column) is summed by its high and low 32 bits, exactly, into 128 bits
(:func:`jobs.executor.wide_sums.exact_sums`). Whether a pipeline is lifted is decided once, from
its configuration (:func:`jobs.executor.paths.path_of`). Rows of windows the watermark has
expired are not combined: they are decoded and reported one by one as dropped
(:func:`add_bundle`), so each reaches ``late`` as its own row; the elements of a live window
whose trigger had finished are decoded from the same table only when it drops them.
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
)
from jobs.executor.wide_sums import exact_sums, joined, python_ints_of, split_names
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
    def of(cls, engine: Engine, schema: InputSchema) -> Lifting:
        """The lifting of ``engine`` over input of ``schema`` (a pipeline
        :func:`jobs.executor.paths.path_of` lifts)."""
        window_fn = engine.windowing.window_fn
        parts = lifted_parts(engine, schema)
        if parts is None or not isinstance(window_fn, FixedWindows):
            raise ValueError("this pipeline takes the per-element path: nothing to lift")
        return cls(
            size=window_fn.size,
            offset=window_fn.offset,
            parts=parts,
            single=not isinstance(engine.combine_fn, Aggregates),
            timestamps=engine.windowing.timestamp_combiner,
            schema=schema,
        )

    def combined_by_key(self, table: pa.Table, watermark: int, cutoff: int) -> dict[Any, Bundle]:
        """The bucket's elements (``table``: :func:`jobs.executor.operator_input.input_table`)
        as each key's :class:`Bundle`, keys in the per-element path's order. ``cutoff``: windows
        ending before it drop their elements (:meth:`panes.engine.Engine.droppable_before` the
        watermark); their rows are not combined but decoded, to be reported one by one."""
        if table.num_rows == 0:
            return {}
        lifted = self.lift(table, watermark, cutoff)
        bundles = self._bundles(lifted)
        if not lifted.expired:
            return bundles
        for key, elements in lifted.expired.items():
            bundles.setdefault(key, Bundle([], [])).expired = elements
        return self._in_key_order(bundles)

    def lift(self, table: pa.Table, watermark: int, cutoff: int) -> Lifted:
        """The bucket's elements combined per key and window (:class:`Lifted`); ``cutoff`` as
        for :meth:`combined_by_key`."""
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
        sums = sorted({c for (c, f) in wanted if f == "sum" and c != _HOLD})
        grouped, split = exact_sums(grouped, sums)
        for column in split:  # summed by halves: joined below
            options = wanted.pop((column, "sum"))
            wanted.update({(half, "sum"): options for half in split_names(column)})
        aggregations = [([], "count_all", None), *((c, f, o) for (c, f), o in wanted.items())]
        result = grouped.group_by([*self.keys, START], use_threads=False).aggregate(aggregations)
        for column in split:
            high, low = (f"{half}_sum" for half in split_names(column))
            exact = joined(result.column(high), result.column(low))
            result = result.drop_columns([high, low]).append_column(f"{column}_sum", exact)
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
        column = {n: python_ints_of(result.column(n)) for n in result.schema.names}
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


def lifted_parts(engine: Engine, schema: InputSchema) -> tuple[_Part, ...] | None:
    """The parts of ``engine``'s aggregates over input of ``schema`` when lifting combines them
    exactly (the module doc's table), for fixed windows and unweighted input; else None."""
    if engine.weighted or type(engine.windowing.window_fn) is not FixedWindows:
        return None
    fn = engine.combine_fn
    parts = [_part_of(f, schema) for f in (fn.fns.values() if isinstance(fn, Aggregates) else [fn])]
    if any(p is None for p in parts):
        return None
    return tuple(p for p in parts if p is not None)


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
    """One key's share of a lifted batch: the parts of its live windows, and the elements of its
    expired windows (canonical order), each reported as dropped."""

    __slots__ = ("expired", "parts")

    def __init__(self, expired: list, parts: list[Combined]) -> None:
        self.expired = expired
        self.parts = parts


def add_bundle(engine: Engine, state: KeyState, key: Any, bundle: Bundle) -> Output:
    """Add a key's :class:`Bundle` to its state: what ``engine.add_elements`` of the elements it
    was made from does. The parts go to :meth:`~panes.engine.Engine.add_combined`; the elements
    of expired windows reach no window: the engine reports them as dropped, at the key's
    clocks, before the parts' output (as ``add_elements`` would, a fixed window's state
    depending on its own elements only)."""
    out = engine.add_combined(state, key, bundle.parts)
    if bundle.expired:
        alone = KeyState(state.watermark, state.processing_time)  # touches no window
        out.dropped[:0] = engine.add_elements(alone, key, bundle.expired).dropped
    return out


__all__ = ["Bundle", "Lifting", "add_bundle", "lifted_parts"]
