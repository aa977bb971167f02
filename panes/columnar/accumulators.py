"""The combiners in columns: a bundle's parts per aggregate, and a window table's accumulators.

Each aggregate of a pipeline whose bundles lift (:func:`panes.columnar.lifting_reason`) is a
:class:`Part` of one *kind*, the one its class declares
(:attr:`~panes.combiners.CombineFn.columnar_kind`). A built-in aggregate the columnar engine
serves has an accumulator of a few columns of the window table (:class:`Acc`). What a kind
does with them is what its combiner (:mod:`panes.combiners`) does with one accumulator:

============  ===========================  ===================================  ==================
kind          combiner                     accumulator columns                  input types
============  ===========================  ===================================  ==================
count_rows    ``count()``                  rows (int64)                         any
count         ``count(v)``                 non-null ``v`` (int64)               any
sum           ``sum(v)``                   the sum, 128 bits (:mod:`.wide`)     integers
mean          ``mean(v)``                  sum (128 bits) and count: its pair   integers
min, max      ``min(v)``, ``max(v)``       the value's type (null: none)        integers, text
list          ``to_list(v)``               a list of the value's type           any
combine       any other ``CombineFn``      (none: Python objects)               any
============  ===========================  ===================================  ==================

A **combine** part is a combiner that declares no kind (a user's own, with ``output_type`` and
``fields``; a sketch): Arrow groups the bundle's values per key and window, and the part of a group
is ``fn.add_all(fn.create(), values)``, one call per group and bundle, with the values as the
per-element path gives them (:meth:`Part.values`). The per-key engine merges it into the window
(:meth:`~panes.engine.Engine.add_combined`); the columnar engine does not serve it (its accumulator
is no column). Its values reach it in the bundle's row order: a combiner whose output depends on
that order says so (:attr:`~panes.combiners.CombineFn.order_sensitive`, as ``to_list``), and the
operator then adds it element by element (:meth:`jobs.executor.operator.OperatorConfig.engines`).

Integers only for sums: a float sum's rounding depends on the order of additions, and a pane
must be the same bit for bit whichever engine computed it. A bundle's parts are combined per key
and window with Arrow's ``group_by`` (:meth:`Part.aggregations`), then merged into the windows'
accumulators (:meth:`Acc.merge`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from panes.columnar import wide
from panes.combiners import Aggregates, CombineFn, Filtered, fields_of

COUNT = "count_all"
"""The grouped bundle's column of rows per key and window."""
VALUE = "value"
"""The column a combiner without a field reads, where element values are whole (not mappings)."""

Kind = Literal["count_rows", "count", "sum", "mean", "min", "max", "list", "combine"]
"""A part's kind: what a combiner declares (:attr:`~panes.combiners.CombineFn.columnar_kind`),
or ``combine`` for one that declares none."""
_SUMMED = (pa.types.is_integer,)
_ORDERED = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string)
_ALL = pc.ScalarAggregateOptions(skip_nulls=True, min_count=0)
_VALID = pc.CountOptions(mode="only_valid")


@dataclass(frozen=True)
class Part:
    """One aggregate in columns: ``kind`` over ``column`` (None: rows). A ``combine`` part
    (a combiner that is not built in, ``fn``) reads whole values from ``column``
    (:data:`VALUE`) or, with ``column`` None, mappings of the value columns ``fields``. A
    filtered aggregate's part (``mask``: the condition's flag column) reads a column of its own,
    ``source`` (None: rows) where the flag is TRUE and null elsewhere (:meth:`masked`): the inner
    aggregate's part over the values the condition lets through."""

    kind: Kind
    column: str | None
    fn: CombineFn | None = None
    fields: tuple[str, ...] = ()
    mask: str | None = None
    source: str | None = None

    @property
    def value_column(self) -> str | None:
        """The element column whose type the part's values have (None: rows)."""
        return self.source if self.mask is not None else self.column

    def masked(self, table: pa.Table) -> pa.Array | pa.ChunkedArray:
        """This part's column (a filtered part's) made from ``table``'s source and flag."""
        assert self.mask is not None
        flag = pc.fill_null(table.column(self.mask), False)
        values = (
            pa.repeat(pa.scalar(1, pa.int64()), table.num_rows)
            if self.source is None
            else table.column(self.source)
        )
        return pc.if_else(flag, values, None)

    @property
    def order_sensitive(self) -> bool:
        """Whether the value depends on the order in which elements are added (a list, or a
        combiner that says so: :attr:`~panes.combiners.CombineFn.order_sensitive`)."""
        if self.fn is not None:
            return self.fn.order_sensitive
        return self.kind == "list"

    @property
    def reads(self) -> tuple[str, ...]:
        """The bundle's value columns the part reads."""
        if self.kind == "combine" and self.column is None:
            return self.fields
        return () if self.column is None else (self.column,)

    def aggregations(self) -> list[tuple[str, str, pc.FunctionOptions | None]]:
        """Arrow's group aggregations that combine a bundle's values of one window (a
        ``combine`` part: each column it reads as a list per group)."""
        column = self.column or ""
        if self.kind == "combine":
            return [(c, "list", None) for c in self.reads]
        if self.kind == "count_rows":
            return []  # the bundle's row count
        if self.kind == "count":
            return [(column, "count", _VALID)]
        if self.kind == "sum":
            return [(column, "sum", _ALL)]
        if self.kind == "mean":
            return [(column, "sum", _ALL), (column, "count", _VALID)]
        return [(column, self.kind, None)]

    @property
    def grouped(self) -> tuple[str, ...]:
        """The grouped bundle's columns of this part's accumulator (a mean: sum and count)."""
        if self.kind == "count_rows":
            return (COUNT,)
        if self.kind == "mean":
            return (f"{self.column}_sum", f"{self.column}_count")
        if self.kind == "combine":
            return tuple(f"{c}_list" for c in self.reads) or (COUNT,)
        return (f"{self.column}_{self.kind}",)

    def values(self, grouped: Sequence[list]) -> list[list]:
        """A ``combine`` part's values of each group, as the per-element path gives them to its
        combiner, from its :attr:`grouped` columns as Python lists (a list of each group's
        values per column; with no column read, the groups' row counts): whole values, or one
        mapping of :attr:`fields` per element (null: None).

        >>> Part("combine", None, CombineFn(), ("a", "b")).values([[[1, 2]], [[None, 4]]])
        [[{'a': 1, 'b': None}, {'a': 2, 'b': 4}]]
        >>> Part("combine", None, CombineFn(), ()).values([[2, 1]])
        [[{}, {}], [{}]]
        """
        if self.column is not None:
            return grouped[0]
        fields = self.fields
        if not fields:
            return [[{} for _ in range(n)] for n in grouped[0]]
        if len(fields) == 1:
            (name,) = fields
            return [[{name: v} for v in group] for group in grouped[0]]
        return [
            [dict(zip(fields, row, strict=True)) for row in zip(*lists, strict=True)]
            for lists in zip(*grouped, strict=True)
        ]

    def accumulators(self, grouped: Sequence[list]) -> list:
        """A ``combine`` part's accumulator of each group: ``fn.add_all(fn.create(), values)``,
        one call per group (:meth:`values`), as the per-element path adds a window's values of
        a bundle."""
        fn = self.fn
        assert fn is not None
        create, add_all = fn.create, fn.add_all
        return [add_all(create(), values) for values in self.values(grouped)]


def parts_of(
    combine_fn: CombineFn,
    types: Callable[[str], pa.DataType | None],
    whole: bool,
    values: Sequence[str] = (),
) -> tuple[Part, ...] | str:
    """The parts of ``combine_fn`` over columns of ``types`` (None: no such column), or why
    its bundles do not lift. ``whole``: element values are whole values (a combiner without a
    field reads column :data:`VALUE`), not mappings of columns; ``values``: the value columns
    (what a combiner of your own that names no ``fields`` is given a mapping of, as the
    per-element path gives it).

    >>> from panes import combiners
    >>> class Spread(CombineFn):
    ...     fields = ("amount",)
    >>> types = {"amount": pa.int64()}.get
    >>> parts = parts_of(combiners.aggregates(n=combiners.count(), s=Spread()), types, False)
    >>> [(p.kind, p.reads) for p in parts]
    [('count_rows', ()), ('combine', ('amount',))]
    >>> parts_of(combiners.sum("amount"), {"amount": pa.float64()}.get, False)
    'sum(amount) sums double values, whose sum depends on the order of additions'
    """
    fns = list(combine_fn.fns.values()) if isinstance(combine_fn, Aggregates) else [combine_fn]
    parts = []
    for fn in fns:
        part = _part_of(fn, types, whole, tuple(values))
        if isinstance(part, str):
            return part
        parts.append(part)
    return tuple(parts)


def built_in_reason(parts: Sequence[Part]) -> str | None:
    """Why the columnar engine does not hold ``parts`` in its window table (None: it does):
    the accumulator of a combiner that is not built in is no column."""
    for part in parts:
        if part.kind == "combine":
            return f"{part.fn!r} is not a built-in aggregate"
    return None


def _part_of(
    fn: CombineFn, types: Callable[[str], Any], whole: bool, values: tuple[str, ...]
) -> Part | str:
    if fn.reads_event_time:  # a part is combined from values only (Part.aggregations)
        return f"{fn!r} reads event times: its elements are added one by one"
    if fn.per_element_reason is not None:
        return f"{fn!r} {fn.per_element_reason}"
    if isinstance(fn, Filtered):
        if whole:
            return f"{fn!r} reads columns, and the elements' values are whole"
        if types(fn.flag) is None:
            return f"{fn!r}: the elements do not carry its condition's flag {fn.flag!r}"
        inner = _part_of(fn.inner, types, whole, values)
        if isinstance(inner, str):
            return inner
        if inner.kind == "combine":
            return f"{fn!r}: a filtered combiner that is not built in is added element by element"
        if inner.kind == "list":
            return f"{fn!r}: a filtered list is added element by element"
        kind: Kind = "count" if inner.kind == "count_rows" else inner.kind
        masked = f"{fn.flag}_{inner.column or 'rows'}"
        return Part(kind, masked, mask=fn.flag, source=inner.column)
    declared = fn.columnar_kind  # the combiner's own columns in the window table, if any
    if declared is None:
        return _combine_part(fn, types, whole, values)
    if declared == "combine" or declared not in get_args(Kind):
        kinds = ", ".join(k for k in get_args(Kind) if k != "combine")
        raise ValueError(f"{fn!r} declares the columnar kind {declared!r}; the kinds: {kinds}")
    kind = cast(Kind, declared)
    field = getattr(fn, "field", None)
    if kind == "count_rows":
        return Part("count_rows", None)
    column = field if field is not None else (VALUE if whole else None)
    if column is None:
        return f"{fn!r} reads whole values, and the elements' values are columns"
    arrow_type = types(column)
    if arrow_type is None:
        return f"{fn!r} reads a column {column!r} the elements do not have"
    if kind == "count":
        return Part("count", column)
    if pa.types.is_decimal(arrow_type) or pa.types.is_date(arrow_type):
        return (
            f"{fn!r} over {arrow_type} values: decimals (summed exactly, as Python Decimal) and "
            "dates are combined element by element"
        )
    if kind == "list":
        return Part("list", column)
    if kind in ("sum", "mean"):
        if not any(check(arrow_type) for check in _SUMMED):
            return f"{fn!r} sums {arrow_type} values, whose sum depends on the order of additions"
        return Part(kind, column)
    if pa.types.is_floating(arrow_type):
        return (
            f"{fn!r} over {arrow_type} values: NaN and signed zeros make it depend on their order"
        )
    if not any(check(arrow_type) for check in _ORDERED):
        return f"{fn!r} over {arrow_type} values"
    return Part(kind, column)


def _combine_part(
    fn: CombineFn, types: Callable[[str], Any], whole: bool, values: tuple[str, ...]
) -> Part | str:
    """The ``combine`` part of a combiner that is not built in."""
    if whole:
        if types(VALUE) is None:
            return f"{fn!r} reads whole values, and the elements' values are columns"
        return Part("combine", VALUE, fn)
    fields = fields_of(fn) or values
    for column in fields:
        if types(column) is None:
            return f"{fn!r} reads a column {column!r} the elements do not have"
    return Part("combine", None, fn, fields)


@dataclass(frozen=True)
class Acc:
    """A part's accumulator as columns of the window table: their names and stored types (an
    integer sum's :data:`~panes.columnar.wide.WIDE`, held in memory as int64 pairs; the others
    as Arrow arrays)."""

    part: Part
    columns: tuple[str, ...]
    types: tuple[pa.DataType, ...]

    @classmethod
    def of(cls, i: int, part: Part, value_type: pa.DataType | None) -> Acc:
        """The ``i``-th part's accumulator (``value_type``: its column's type)."""
        if part.kind == "mean":
            return cls(part, (f"acc_{i}_sum", f"acc_{i}_count"), (wide.WIDE, pa.int64()))
        if part.kind == "sum":
            return cls(part, (f"acc_{i}",), (wide.WIDE,))
        if part.kind in ("min", "max"):
            assert value_type is not None
            return cls(part, (f"acc_{i}",), (value_type,))
        if part.kind == "list":
            assert value_type is not None
            return cls(part, (f"acc_{i}",), (pa.list_(value_type),))
        return cls(part, (f"acc_{i}",), (pa.int64(),))

    @property
    def fields(self) -> list[tuple[str, pa.DataType]]:
        """The stored columns: names and types."""
        return list(zip(self.columns, self.types, strict=True))

    def is_wide(self, j: int) -> bool:
        return self.types[j] == wide.WIDE

    def held(self, j: int, column: pa.Array | pa.ChunkedArray) -> Any:
        """A stored (or grouped) column as held in memory."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        return wide.pairs_of(column) if self.is_wide(j) else column.cast(self.types[j])

    def stored(self, j: int, held: Any) -> pa.Array:
        return wide.decimals(held) if self.is_wide(j) else held

    def empty(self, j: int, n: int) -> Any:
        """``n`` accumulators of no values (``create()``), held."""
        if self.is_wide(j):
            return wide.zeros(n)
        if self.part.kind in ("min", "max"):
            return pa.nulls(n, self.types[j])
        if self.part.kind == "list":
            return pa.array([[]] * n, self.types[j])
        return pa.array(np.zeros(n, np.int64))

    def merged(self, j: int, mine: Any, theirs: Any) -> Any:
        """Accumulators ``mine`` with ``theirs`` merged in, row by row (both held)."""
        if self.is_wide(j):
            return wide.add(mine, theirs)
        kind = self.part.kind
        if kind == "min":
            return pc.min_element_wise(mine, theirs)
        if kind == "max":
            return pc.max_element_wise(mine, theirs)
        if kind == "list":
            pairs = zip(mine.to_pylist(), theirs.to_pylist(), strict=True)
            return pa.array([a + b for a, b in pairs], self.types[j])
        return pc.add_checked(mine, theirs)  # a count: within 64 bits

    def python(self, j: int, held: Any) -> list:
        """A held column's values as Python's (integers of any size; lists as tuples, as
        :class:`~panes.combiners.ToList` keeps them)."""
        if self.is_wide(j):
            return wide.python_ints(held)
        values = held.to_pylist()
        return [tuple(v) for v in values] if self.part.kind == "list" else values

    def accumulators(self, held: list[Any]) -> list:
        """The combiner's accumulators of rows whose columns are ``held``."""
        lists = [self.python(j, column) for j, column in enumerate(held)]
        return list(zip(*lists, strict=True)) if self.part.kind == "mean" else lists[0]

    def value(self, held: list[Any]) -> Any:
        """The output values (``extract``) of rows whose columns are ``held``: an Arrow array,
        or a sum's int64 pairs (128 bits: where it fits its column is the writer's to say)."""
        if self.part.kind != "mean":
            return held[0]
        pairs, counts = held[0], held[1].to_numpy(zero_copy_only=False)
        sums = pairs[:, 0]
        exact = wide.fits_int64(pairs) & (np.abs(sums) < 2**53)
        quotient = np.divide(
            sums.astype(np.float64), counts, where=counts != 0, out=np.zeros(len(sums))
        )
        values = pa.array(quotient, pa.float64(), mask=counts == 0)
        if exact.all():
            return values
        fixed = values.to_pylist()  # beyond 2^53: Python's exact quotient, as Mean's extract
        big = wide.python_ints(pairs)
        for i in np.flatnonzero(~exact):
            fixed[i] = big[i] / int(counts[i]) if counts[i] else None
        return pa.array(fixed, pa.float64())


__all__ = ["COUNT", "VALUE", "Acc", "Part", "built_in_reason", "parts_of"]
