"""A bundle in columns: its elements combined per key and window in Arrow (combiner lifting).

The engine evaluates a window's trigger once per bundle (:meth:`panes.engine.Engine.add_elements`),
so what a window needs from a bundle is the combination of its values, how many there were and
their earliest (or latest) timestamp that holds the output (:meth:`~panes.rules.WindowRules.holds`).
For fixed windows (each element has one window, none merge), :class:`Lifting` computes those
per (key, window) with Arrow's C++ ``group_by`` over the bundle's table. A built-in aggregate's
part is computed there too (:mod:`.accumulators`): no Python object per element. A combiner that
is not built in gets each group's values as a list from Arrow, and its part is
``add_all(create(), values)``, one call per group (a ``combine`` part,
:meth:`.accumulators.Part.accumulators`). Two engines take the result:

* the columnar engine merges the parts into its window table (:mod:`.visit`; built-in
  aggregates only, :func:`columnar_reason`);
* the per-key engine takes each key's parts (:meth:`Lifting.combined_by_key`,
  :func:`add_bundle`: :meth:`~panes.engine.Engine.add_combined`).

A bundle's table has the key columns, :data:`TIMESTAMP` (event time, int64 µs) and the value
columns (:class:`ElementColumns`). Rows of windows the watermark has let go are not combined:
they are decoded and reported one by one as dropped, each with its own row; the elements of a
live window whose trigger had finished are decoded from the same table only when it drops them.

Arrow's sums wrap at 64 bits: a column whose running sums could leave them is summed by its 32-bit
halves, exactly, into 128 bits (:func:`panes.columnar.wide.exact_sums`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from panes.columnar.accumulators import COUNT, VALUE, Part, built_in_reason, parts_of
from panes.columnar.keys import engine_keys, key_table
from panes.columnar.wide import exact_sums, joined, python_ints_of, split_names
from panes.combiners import Aggregates, CombineFn
from panes.engine import Combined, Engine, Output
from panes.rules import WindowRules
from panes.state import KeyState
from panes.window import Window
from panes.windowfns import Element, FixedWindows
from panes.windowing import AccumulationMode, TimestampCombiner, Windowing

START = "pst_window_start"
"""The grouped bundle's column of window starts (µs)."""
TIMESTAMP = "ts_us"
"""A bundle's event-time column (int64 µs)."""
_HOLD = "pst_hold"


class NotColumnar(ValueError):
    """The columnar engine (or lifting) does not serve a pipeline; the message says why."""


Decoder = Callable[[pa.Table], dict[Any, list[Element]]]


@dataclass(frozen=True)
class ElementColumns:
    """How a bundle's elements are laid out as a table: the key columns, :data:`TIMESTAMP`,
    and the value columns, with their Arrow types. An element's value is a mapping of the value
    columns (what aggregates with a ``field`` read) or, with ``whole``, the value of the one
    column :data:`~panes.columnar.accumulators.VALUE`. ``decode`` turns rows back into each
    key's ``(value, timestamp)`` elements, to report those dropped (None: in row order)."""

    keys: tuple[str, ...]
    values: tuple[str, ...]
    types: tuple[tuple[str, pa.DataType], ...]
    whole: bool = False
    decode: Decoder | None = None

    def arrow_type(self, name: str) -> pa.DataType | None:
        """The type of a key or value column (None: no such column)."""
        if name not in self.keys and name not in self.values:
            return None
        return dict(self.types).get(name, pa.string())

    def elements(self, table: pa.Table) -> dict[Any, list[Element]]:
        """``table``'s rows as each key's ``(value, timestamp)`` elements."""
        if self.decode is not None:
            return self.decode(table)
        keys = engine_keys([table.column(k).to_pylist() for k in self.keys])
        if self.whole:
            values: list[Any] = table.column(VALUE).to_pylist()
        else:
            columns = {c: table.column(c).to_pylist() for c in self.values}
            values = [{c: v[i] for c, v in columns.items()} for i in range(table.num_rows)]
        out: dict[Any, list[Element]] = {}
        for key, value, ts in zip(keys, values, table.column(TIMESTAMP).to_pylist(), strict=True):
            out.setdefault(key, []).append((value, ts))
        return out


def lifting_reason(
    windowing: Windowing, combine_fn: CombineFn, columns: ElementColumns, weighted: bool = False
) -> str | None:
    """Why a pipeline's bundles cannot be lifted (None: they can): weighted input, windows that
    are not fixed, an aggregate whose parts would not combine exactly (a float sum).

    >>> import pyarrow as pa
    >>> from panes import Sessions, combiners
    >>> columns = ElementColumns(("k",), ("n",), (("k", pa.string()), ("n", pa.int64())))
    >>> lifting_reason(Windowing(FixedWindows(10)), combiners.sum("n"), columns) is None
    True
    >>> lifting_reason(Windowing(Sessions(10)), combiners.sum("n"), columns)
    'Sessions(10us) are not fixed windows (one window per element, none merging)'
    """
    if weighted:
        return "weighted input (retractions) is added element by element"
    if type(windowing.window_fn) is not FixedWindows:
        return f"{windowing.window_fn} are not fixed windows (one window per element, none merging)"
    parts = parts_of(combine_fn, columns.arrow_type, columns.whole, columns.values)
    return parts if isinstance(parts, str) else None


def columnar_reason(
    windowing: Windowing, combine_fn: CombineFn, columns: ElementColumns, weighted: bool = False
) -> str | None:
    """Why the columnar engine does not serve a pipeline (None: it does): its bundles must
    lift, its aggregates be built in (:func:`~.accumulators.built_in_reason`), its trigger be
    evaluable once per class of windows (:attr:`~panes.triggers.Trigger.by_class`), and its
    mode keep no emitted pane."""
    reason = lifting_reason(windowing, combine_fn, columns, weighted)
    if reason is not None:
        return reason
    parts = parts_of(combine_fn, columns.arrow_type, columns.whole, columns.values)
    assert not isinstance(parts, str)  # they lift
    reason = built_in_reason(parts)
    if reason is not None:
        return reason
    if not windowing.trigger.by_class:
        return f"{windowing.trigger} reads the clocks as numbers (processing time)"
    if windowing.accumulation_mode is AccumulationMode.ACCUMULATING_AND_RETRACTING:
        return "accumulating & retracting keeps each window's emitted panes"
    return None


@dataclass(frozen=True)
class Lifting:
    """How to lift one pipeline's bundles (built by :meth:`of`)."""

    window_fn: FixedWindows
    rules: WindowRules
    parts: tuple[Part, ...]
    single: bool  # the combiner is one aggregate (its accumulator is not a tuple)
    columns: ElementColumns

    @property
    def size(self) -> int:
        return self.window_fn.size

    @property
    def keys(self) -> tuple[str, ...]:
        return self.columns.keys

    @classmethod
    def of(cls, windowing: Windowing, combine_fn: CombineFn, columns: ElementColumns) -> Lifting:
        """The lifting of a pipeline; :class:`NotColumnar` if its bundles cannot be lifted."""
        reason = lifting_reason(windowing, combine_fn, columns)
        if reason is not None:
            raise NotColumnar(reason)
        parts = parts_of(combine_fn, columns.arrow_type, columns.whole, columns.values)
        assert not isinstance(parts, str) and isinstance(windowing.window_fn, FixedWindows)
        return cls(
            window_fn=windowing.window_fn,
            rules=windowing.rules,
            parts=parts,
            single=not isinstance(combine_fn, Aggregates),
            columns=columns,
        )

    def lift(self, table: pa.Table, watermark: int) -> Lifted:
        """The bundle ``table`` combined per key and window (:class:`Lifted`) at ``watermark``:
        rows of windows it lets go are kept apart, decoded, to be reported as dropped."""
        starts = self.window_fn.start_of(table.column(TIMESTAMP).to_numpy())
        expired = self.rules.too_late(starts + self.size, watermark)
        late: dict[Any, list] = {}
        if expired.any():
            late = self.columns.elements(table.filter(pa.array(expired)))
            live = ~expired
            table, starts = table.filter(pa.array(live)), starts[live]
        parts = self._grouped(table, starts, watermark)
        return Lifted(self, parts, late, _Elements(table, starts, self))

    def combined_by_key(self, table: pa.Table, watermark: int) -> dict[Any, Bundle]:
        """The bundle as each key's :class:`Bundle` (for the per-key engine), keys in the order
        of their key columns."""
        if table.num_rows == 0:
            return {}
        lifted = self.lift(table, watermark)
        bundles = self._bundles(lifted)
        if not lifted.expired:
            return bundles
        for key, elements in lifted.expired.items():
            bundles.setdefault(key, Bundle([], [])).expired = elements
        return self._in_key_order(bundles)

    def _grouped(self, table: pa.Table, starts: Any, watermark: int) -> pa.Table:
        """Per key and window of ``table``: its start, row count, hold and aggregations, sorted
        by key and start."""
        for part in self.parts:  # a filtered part's values: where its flag is TRUE
            if part.mask is not None and part.column not in table.column_names:
                table = table.append_column(part.column, part.masked(table))
        values = [c for c in self._value_columns() if c not in self.keys]  # a key read: once
        grouped = table.select([*self.keys, *values]).append_column(
            START, pa.array(starts, pa.int64())
        )
        # (column, function) -> options; each once: a mean shares a sum's and a count's
        wanted: dict[tuple[str, str], pc.FunctionOptions | None] = {}
        if self.rules.timestamps is not TimestampCombiner.END_OF_WINDOW:
            times = table.column(TIMESTAMP)
            holding = self.rules.holds(times.to_numpy(), watermark)
            grouped = grouped.append_column(_HOLD, pc.if_else(pa.array(holding), times, None))
            wanted[(_HOLD, self._hold_function)] = None
        for part in self.parts:
            for column, function, options in part.aggregations():
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
        return self.rules.hold_pick.__name__  # "min" or "max", as Arrow names them

    @property
    def hold_column(self) -> str:
        """The grouped table's hold column (:class:`Lifted`)."""
        return f"{_HOLD}_{self._hold_function}"

    def _in_key_order(self, bundles: dict[Any, Bundle]) -> dict[Any, Bundle]:
        keys = list(bundles)
        fields = [pa.field(k, self.columns.arrow_type(k)) for k in self.keys]
        order = pc.sort_indices(
            key_table(keys, fields), sort_keys=[(k, "ascending") for k in self.keys]
        )
        return {keys[i]: bundles[keys[i]] for i in order.to_pylist()}

    def _value_columns(self) -> list[str]:
        return sorted({c for p in self.parts for c in p.reads})

    def _bundles(self, lifted: Lifted) -> dict[Any, Bundle]:
        """Each key's parts (:class:`~panes.engine.Combined`) of ``lifted``."""
        result = lifted.parts
        column = {n: python_ints_of(result.column(n)) for n in result.schema.names}
        keys = engine_keys([column[k] for k in self.keys])
        starts, rows = column[START], column[COUNT]
        holds = column.get(self.hold_column)
        per_part: list[list[Any]] = []
        for part in self.parts:
            names = part.grouped
            if part.kind == "combine":  # a combiner's own: add_all of each group's values
                per_part.append(part.accumulators([column[c] for c in names]))
            elif len(names) > 1:
                per_part.append(list(zip(*(column[c] for c in names), strict=True)))
            elif part.kind == "list":
                per_part.append([tuple(v) for v in column[names[0]]])
            else:
                per_part.append(column[names[0]])
        if self.single:
            accs = per_part[0]
        else:
            accs = list(zip(*per_part, strict=True)) if per_part else [()] * len(starts)
        out: dict[Any, Bundle] = {}
        size, elements = self.size, lifted.elements
        for i, key in enumerate(keys):
            start = starts[i]
            combined = Combined(
                Window(start, start + size),
                accs[i],
                rows[i],
                None if holds is None else holds[i],
                elements.of(key, start),
            )
            bundle = out.get(key)
            if bundle is None:
                out[key] = Bundle([], [combined])
            else:
                bundle.parts.append(combined)
        return out


@dataclass(frozen=True)
class Lifted:
    """A bundle lifted (:meth:`Lifting.lift`): ``parts``, one row per key and live window (the
    key columns, :data:`START`, the row count :data:`~.accumulators.COUNT`, the hold
    (:attr:`Lifting.hold_column`) and each part's accumulator columns
    (:attr:`~.accumulators.Part.grouped`), sorted by key and start); the elements of windows
    let go, by key; and the live windows' elements, decoded only when a closed window drops
    them."""

    lifting: Lifting
    parts: pa.Table
    expired: dict[Any, list]
    elements: _Elements


class _Elements:
    """The elements of a bundle's live windows, decoded only if one of them drops its elements:
    its trigger had finished (rare)."""

    def __init__(self, table: pa.Table, starts: Any, lifting: Lifting) -> None:
        self._table, self._starts, self._lifting = table, starts, lifting
        self._decoded: dict[Any, dict[int, list]] | None = None

    def of(self, key: Any, start: int) -> Callable[[], list]:
        return lambda: self._window(key, start)

    def _window(self, key: Any, start: int) -> list:
        if self._decoded is None:
            start_of = self._lifting.window_fn.start_of
            self._decoded = {}
            for k, elements in self._lifting.columns.elements(self._table).items():
                windows: dict[int, list] = {}
                for e in elements:
                    windows.setdefault(start_of(e[1]), []).append(e)
                self._decoded[k] = windows
        return self._decoded[key][start]


class Bundle:
    """One key's share of a lifted bundle: the parts of its live windows, and the elements of
    its windows let go, each reported as dropped."""

    __slots__ = ("expired", "parts")

    def __init__(self, expired: list, parts: list[Combined]) -> None:
        self.expired = expired
        self.parts = parts


def add_bundle(engine: Engine, state: KeyState, key: Any, bundle: Bundle) -> Output:
    """Add a key's :class:`Bundle` to its state: what ``engine.add_elements`` of the elements it
    was made from does. The parts go to :meth:`~panes.engine.Engine.add_combined`; the elements
    of windows let go reach no window: the engine reports them as dropped, at the key's clocks,
    before the parts' output (as ``add_elements`` would, a fixed window's state depending on
    its own elements only)."""
    out = engine.add_combined(state, key, bundle.parts)
    if bundle.expired:
        alone = KeyState(state.watermark, state.processing_time)  # touches no window
        out.dropped[:0] = engine.add_elements(alone, key, bundle.expired).dropped
    return out


__all__ = [
    "START",
    "TIMESTAMP",
    "Bundle",
    "ElementColumns",
    "Lifted",
    "Lifting",
    "NotColumnar",
    "add_bundle",
    "columnar_reason",
    "lifting_reason",
]
