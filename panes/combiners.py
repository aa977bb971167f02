"""Combiners: what is computed for each window.

A combiner folds the values of a window into an *accumulator* and extracts the output from it.
Accumulators are values: a combiner never mutates an accumulator it is given, it returns a new
one (the engine keeps emitted accumulators for retractions and folds). Accumulators merge, so
the panes of a window in discarding mode fold back to the exact batch result (the mean of a
window is the mean of all its elements, not the mean of its panes' means).

Write your own by subclassing :class:`CombineFn`::

    class Range(CombineFn):
        def create(self): return None
        def add(self, acc, v): return (v, v) if acc is None else (min(acc[0], v), max(acc[1], v))
        def merge(self, accs): ...
        def extract(self, acc): return None if acc is None else acc[1] - acc[0]

Its output must not depend on the order of its values nor on how they are split into
accumulators that are merged (the Spark job adds each window's values of a batch at once with
``add_all`` and merges the result); a combiner whose output does declares
:attr:`CombineFn.order_sensitive`.

Built-ins follow SQL: ``count()`` counts elements, ``count(field)``, ``sum``, ``min``, ``max`` and
``mean`` skip ``None`` inputs, and ``to_list`` keeps every value, ``None`` included (as
``array_agg``).
Sums of ``Decimal`` values are exact (:data:`EXACT_DECIMALS`: no digit is ever rounded away,
whatever their number), and a mean of them is the exact sum divided by the count, rounded once
to a float; a float among decimals is a ``TypeError``, never a silent conversion.
Each takes an optional ``field``: with it, values are mappings and the aggregate reads
``value[field]``. Four pick one element's value (:class:`Picked`): ``max_by(field, by)`` and
``min_by(field, by)`` the value of the element whose ``by`` is largest (smallest), ``last(field)``
and ``first(field)`` the value of the element whose *event time* is latest (earliest); these two
read event times (:attr:`CombineFn.reads_event_time`, :func:`inputs_of`).

Several named aggregates combine into one with :func:`aggregates`, and the
textual form ``"sum(seconds)"`` (what ``str`` prints) parses with
:func:`panes.syntax.parse_aggregate`.

Any combiner takes a condition over the record's columns (:mod:`panes.conditions`):
``count().filter("status = 'error'")`` (text ``count() filter (status = 'error')``) adds only
the values whose condition is TRUE (:class:`Filtered`).
"""

from __future__ import annotations

import builtins
import decimal
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from panes.combine_fn import (  # the protocol, and what is said of any combiner
    AggregateTypeError,
    Column,
    CombineFn,
    Filtered,
    Glance,
    Path,
    SqlForm,
    carried_fields_of,
    conditions_of,
    fields_of,
    text_of,
    unfiltered,
)

__reexported__ = (carried_fields_of, conditions_of, fields_of, text_of, unfiltered, Path)
from panes.sketches import (
    ApproxCountDistinct,
    ApproxPercentile,
    ApproxQuantiles,
    MergeSketches,
    TopK,
)

EXACT_DECIMALS = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow, decimal.Inexact],
)
"""The context decimal sums are computed in: a precision no sum reaches, so additions and
subtractions are exact (an inexact result would raise, never round)."""


def exact_sum(start: Any, values: Sequence[Any]) -> Any:
    """``start`` plus ``values``, exactly: integers as Python's, ``Decimal`` values in
    :data:`EXACT_DECIMALS` (the default context would round past 28 digits).

    >>> exact_sum(0, [Decimal("0.1")] * 1000), exact_sum(Decimal("1E+30"), [Decimal("0.01")])
    (Decimal('100.0'), Decimal('1000000000000000000000000000000.01'))
    """
    if type(start) is not Decimal:
        total = start + builtins.sum(values)
        if type(total) is not Decimal:
            return total
        # decimals after an integer start: added again, exactly (the sum above may round)
    if len(values) > 8:
        with decimal.localcontext(EXACT_DECIMALS):
            return start + builtins.sum(values)
    total, add = start, EXACT_DECIMALS.add  # a few values: no context switch (~1 us)
    for value in values:
        total = add(total, value)
    return total


def exact_difference(acc: Any, value: Any) -> Any:
    """``acc - value``, exactly for ``Decimal`` values (:data:`EXACT_DECIMALS`)."""
    if isinstance(value, Decimal) or isinstance(acc, Decimal):
        return EXACT_DECIMALS.subtract(acc, value)
    return acc - value


def inputs_of(fn: CombineFn, elements: Iterable[Sequence[Any]]) -> list[Any]:
    """What ``fn`` is given (``add_all``, ``retract``) for ``elements``, tuples ending with
    ``(value, event_time)`` as the engines hold them: the values, or for a combiner that reads
    event times (:attr:`CombineFn.reads_event_time`) ``(event_time, value)`` pairs.

    >>> inputs_of(sum(), [(3, 10), (4, 20)]), inputs_of(last(), [(3, 10), (4, 20)])
    ([3, 4], [(10, 3), (20, 4)])
    """
    if fn.reads_event_time:
        return [(element[-1], element[-2]) for element in elements]
    return [element[-2] for element in elements]


class _FieldCombineFn(CombineFn):
    """A built-in aggregate over the whole value, or over ``value[field]``."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def _column(self, columns: Mapping[str, Column]) -> tuple[str, Column]:
        """The column it reads and its type (the configuration checked it is a source's)."""
        if self.field is None:
            raise AggregateTypeError(f"unsupported aggregate {self!r}")
        return self.field, columns[self.field]

    def _numeric(self, columns: Mapping[str, Column]) -> Column:
        name, column = self._column(columns)
        if not column.numeric:
            raise AggregateTypeError(
                f"{self.name}() needs a numeric column, {name!r} is {column.type}"
            )
        return column

    def _inputs(self, values: Iterable[Any]) -> list[Any]:
        field = self.field
        if field is None:
            return [v for v in values if v is not None]
        return [v[field] for v in values if v[field] is not None]

    def _input(self, value: Any) -> Any:
        return value if self.field is None else value[self.field]

    def add(self, acc: Any, value: Any) -> Any:
        return self.add_all(acc, (value,))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.field == self.field

    def __hash__(self) -> int:
        return hash((type(self), self.field))

    def __repr__(self) -> str:
        return f"{self.name}({self.field or ''})"


class Sum(_FieldCombineFn):
    """The sum; exact for integers (Python's) and decimals (:func:`exact_sum`)."""

    name = "sum"
    examples = ("sum(seconds)",)
    value_is_accumulator = True
    sql = SqlForm("sum", "coalesce(sum({value}){filter}, 0)")
    columnar_kind = "sum"
    glance = Glance(
        "`sum(col)`",
        "numeric",
        "`long` (integers), `double`, `decimal(38,s)` (a `decimal(p,s)`)",
        "yes (a float sum up to its rounding)",
        "columnar (integers), else per element",
    )

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """``long`` over integers, ``double`` over floats; over ``decimal(p,s)``, as Spark's sum,
        exact and widened to ``decimal(38,s)``."""
        column = self._numeric(columns)
        if column.scale is not None:
            return f"decimal(38,{column.scale})"
        return "long" if column.integral else "double"

    def create(self) -> Any:
        return 0

    def add_all(self, acc: Any, values: Sequence[Any]) -> Any:
        if self.field is None:
            try:
                return exact_sum(acc, values)
            except TypeError:  # a None among the values: skip them, as SQL does
                pass
        return exact_sum(acc, self._inputs(values))

    def merge(self, accs: Sequence[Any]) -> Any:
        return exact_sum(0, accs)

    def extract(self, acc: Any) -> Any:
        return acc

    def retract(self, acc: Any, value: Any) -> Any:
        value = self._input(value)
        return acc if value is None else exact_difference(acc, value)


class Count(_FieldCombineFn):
    """``count()`` counts elements; ``count(field)`` counts those whose field is not None."""

    name = "count"
    examples = ("count()",)
    field_optional = True
    value_is_accumulator = True
    sql = SqlForm("sum", "count({value}){filter}")
    glance = Glance("`count()`, `count(col)`", "any", "`long`", "yes", "columnar")

    @property
    def columnar_kind(self) -> str:  # type: ignore[override]
        return "count_rows" if self.field is None else "count"

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        return "long"

    def create(self) -> int:
        return 0

    def add_all(self, acc: int, values: Sequence[Any]) -> int:
        if self.field is None:
            return acc + len(values)
        return acc + len(self._inputs(values))

    def merge(self, accs: Sequence[int]) -> int:
        return builtins.sum(accs)

    def extract(self, acc: int) -> int:
        return acc

    def retract(self, acc: int, value: Any) -> int:
        return acc - (self.field is None or self._input(value) is not None)

    @property
    def reads_value(self) -> bool:
        return self.field is not None


class _Extremum(_FieldCombineFn):
    value_is_accumulator = True
    glance = Glance(
        "`min(col)`, `max(col)`",
        "any but lists",
        "the column's",
        "yes",
        "columnar (integers, text), else per element",
        refusal=" (no inverse)",
    )

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """The column's type (``int`` as ``long``, ``float`` as ``double``)."""
        typ = self._column(columns)[1].type
        return {"int": "long", "float": "double"}.get(typ, typ)

    @staticmethod
    def pick(values: list[Any]) -> Any:
        """The extremum of a non-empty list of values."""
        raise NotImplementedError

    def create(self) -> Any:
        return None

    def add_all(self, acc: Any, values: Sequence[Any]) -> Any:
        inputs = self._inputs(values)
        if acc is not None:
            inputs.append(acc)
        return self.pick(inputs) if inputs else None

    def merge(self, accs: Sequence[Any]) -> Any:
        present = [a for a in accs if a is not None]
        return self.pick(present) if present else None

    def extract(self, acc: Any) -> Any:
        return acc


class Min(_Extremum):
    """The smallest value."""

    name = "min"
    examples = ("min(seconds)",)
    sql = SqlForm("min", "min({value}){filter}")
    columnar_kind = "min"

    @staticmethod
    def pick(values: list[Any]) -> Any:
        return builtins.min(values)


class Max(_Extremum):
    """The largest value."""

    name = "max"
    examples = ("max(seconds)",)
    sql = SqlForm("max", "max({value}){filter}")
    columnar_kind = "max"

    @staticmethod
    def pick(values: list[Any]) -> Any:
        return builtins.max(values)


class Mean(_FieldCombineFn):
    """The arithmetic mean; its accumulator is ``(sum, count)`` (an exact sum: :func:`exact_sum`).
    The mean of ``Decimal`` values is their exact sum over their count, rounded once to the
    nearest float (as DuckDB's ``avg`` of a decimal, a double).

    >>> m = mean(); m.extract(m.add_all(m.create(), [Decimal("0.1"), Decimal("0.2")]))
    0.15
    """

    name = "mean"
    examples = ("mean(seconds)",)
    sql = SqlForm(None, "avg({value}){filter}")
    columnar_kind = "mean"
    glance = Glance(
        "`mean(col)`",
        "numeric",
        "`double`",
        "from an exact sum and count",
        "columnar (integers), else per element",
    )

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """``double``, of decimals too: their exact sum over the count, rounded once."""
        self._numeric(columns)
        return "double"

    def create(self) -> tuple[Any, int]:
        return (0, 0)

    def add_all(self, acc: tuple[Any, int], values: Sequence[Any]) -> tuple[Any, int]:
        inputs = self._inputs(values)
        return (exact_sum(acc[0], inputs), acc[1] + len(inputs))

    def merge(self, accs: Sequence[tuple[Any, int]]) -> tuple[Any, int]:
        return (exact_sum(0, [a[0] for a in accs]), builtins.sum(a[1] for a in accs))

    def extract(self, acc: tuple[Any, int]) -> float | None:
        if not acc[1]:
            return None
        if isinstance(acc[0], Decimal):
            return float(Fraction(acc[0]) / acc[1])  # exact quotient, rounded once
        return acc[0] / acc[1]

    def retract(self, acc: tuple[Any, int], value: Any) -> tuple[Any, int]:
        value = self._input(value)
        return acc if value is None else (exact_difference(acc[0], value), acc[1] - 1)


class ToList(_FieldCombineFn):
    """All values in arrival order (``None`` included); the accumulator is a tuple."""

    name = "to_list"
    examples = ("to_list(page)",)
    value_is_accumulator = True
    order_sensitive = True
    sql = SqlForm(None, "list({value} ORDER BY {order}){filter}")
    columnar_kind = "list"
    glance = Glance("`to_list(col)`", "any", "`list<type>`", "yes", "per element (its order)")

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        return f"list<{self._column(columns)[1].type}>"

    def create(self) -> tuple:
        return ()

    def add_all(self, acc: tuple, values: Sequence[Any]) -> tuple:
        if self.field is None:
            return acc + tuple(values)
        field = self.field
        return acc + tuple(v[field] for v in values)

    def merge(self, accs: Sequence[tuple]) -> tuple:
        return tuple(v for acc in accs for v in acc)

    def value_as_accumulator(self, value: list | None) -> tuple:
        return tuple(value or ())

    def extract(self, acc: tuple) -> list:
        return list(acc)

    def retract(self, acc: tuple, value: Any) -> tuple:
        value = self._input(value)
        i = acc.index(value)
        return acc[:i] + acc[i + 1 :]


PICKABLE = ("string", "int", "long", "bigint", "double", "float", "boolean")
"""Types a picked value and its ordering column may have: their accumulator (ordering, value) is
folded from JSON (discarding mode), which holds these exactly."""


def _rank(x: Any) -> Any:
    """The sort key of a non-null value: NaN above every number, as Spark and DuckDB order it."""
    return (1, 0) if x != x else (0, x)


class Picked(CombineFn):
    """The value of one element of the window, picked by a ranking: ``max_by(field, by)``
    (``min_by``) the ``field`` of the element whose ``by`` is largest (smallest), ``last(field)``
    (``first``) the ``field`` of the element whose event time is latest (earliest).

    Elements whose ``by`` is None are skipped (event times never are); the picked value may be
    None. A tie of ``by`` (or of event times) is broken by the values themselves, whatever the
    order the elements came in: the largest value wins for ``max_by`` and ``last``, the smallest
    for ``min_by`` and ``first``, and a None value loses to any other. NaN ranks above every
    number. The accumulator is None (no element) or the pair ``(by, value)`` of the element
    picked so far; it merges exactly, but no value can be withdrawn (no ``retract``).

    >>> fn = max_by("page", "seconds")
    >>> fn.extract(fn.add_all(fn.create(), [{"page": "a", "seconds": 3},
    ...                                     {"page": "b", "seconds": 9},
    ...                                     {"page": "c", "seconds": None}]))
    'b'
    >>> fn = last("status")
    >>> fn.extract(fn.add_all(fn.create(), inputs_of(fn, [({"status": "ok"}, 20),
    ...                                                   ({"status": "down"}, 10)])))
    'ok'
    """

    #: Whether the largest ranking wins (max_by, last) or the smallest (min_by, first).
    largest = True
    #: How many columns its text names (``max_by(page, seconds)``: two; ``last(status)``: one).
    arity = 2
    per_element_reason = "has no columnar form: its elements are added one by one"
    glance = Glance(
        "`max_by(col, by)`, `min_by(col, by)`", "as `first`", "the column's", "yes", "per element"
    )

    def __init__(self, field: str | None = None, by: str | None = None) -> None:
        self.field = field
        self.by = by
        if self.reads_event_time:
            if by is not None:
                raise ValueError(f"{self.name}() orders by event time and takes no 'by' column")
        elif field is None or by is None:
            raise ValueError(
                f"{self.name}() needs the column of the value and the column that orders the "
                f"elements, e.g. {self.name}(page, seconds)"
            )
        else:
            self.fields = (field, by)

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """Its value column's type (``int`` as ``long``, ``float`` as ``double``, as min and
        max); both columns of :data:`PICKABLE` types."""
        read = fields_of(self)
        if not read:
            raise AggregateTypeError(f"{self.name}() needs the column whose value it picks")
        for i, col in enumerate(read):
            typ = columns[col].type
            if typ not in PICKABLE:
                role = "orders the elements" if i else "is picked"
                raise AggregateTypeError(
                    f"{self.name}() of {col!r}: a {typ} column cannot be the one that {role} "
                    f"(one of {', '.join(PICKABLE)})"
                )
        typ = columns[read[0]].type
        return {"int": "long", "float": "double"}.get(typ, typ)

    def _key(self, pair: tuple[Any, Any]) -> Any:
        value = pair[1]
        if self.largest:
            return (_rank(pair[0]), (0,) if value is None else (1, _rank(value)))
        return (_rank(pair[0]), (1,) if value is None else (0, _rank(value)))

    def _pick(self, pairs: Iterable[tuple[Any, Any]]) -> tuple[Any, Any] | None:
        best = None
        best_key = None
        largest = self.largest
        for pair in pairs:
            key = self._key(pair)
            if best is None or (key > best_key if largest else key < best_key):
                best, best_key = pair, key
        return best

    def _pairs(self, values: Sequence[Any]) -> list[tuple[Any, Any]]:
        """(ranking, value) of each input that has a ranking."""
        field = self.field
        if self.reads_event_time:
            for item in values:
                if not (isinstance(item, tuple) and len(item) == 2):
                    raise TypeError(
                        f"{self!r} reads event times: it is given (event_time, value) pairs "
                        f"(panes.combiners.inputs_of), got {item!r}"
                    )
            if field is None:
                return list(values)
            return [(t, v[field]) for t, v in values]
        by = self.by
        return [(v[by], v[field]) for v in values if v[by] is not None]

    def create(self) -> tuple[Any, Any] | None:
        return None

    def add_all(self, acc: Any, values: Sequence[Any]) -> tuple[Any, Any] | None:
        pairs = self._pairs(values)
        if acc is not None:
            pairs.append(tuple(acc))
        return self._pick(pairs)

    def add(self, acc: Any, value: Any) -> tuple[Any, Any] | None:
        return self.add_all(acc, (value,))

    def merge(self, accs: Sequence[Any]) -> tuple[Any, Any] | None:
        return self._pick(tuple(a) for a in accs if a is not None)

    def extract(self, acc: Any) -> Any:
        return None if acc is None else acc[1]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.field, other.by) == (self.field, self.by)

    def __hash__(self) -> int:
        return hash((type(self), self.field, self.by))

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(f for f in (self.field, self.by) if f is not None)})"


class MaxBy(Picked):
    """``max_by(field, by)``: the ``field`` of the element whose ``by`` is largest."""

    name = "max_by"
    examples = ("max_by(page, seconds)",)
    # (DuckDB's first() keeps a NULL value; its ORDER BY ranks NaN above every number)
    sql = SqlForm(
        None,
        "first({value} ORDER BY {by} DESC, {value} DESC NULLS LAST)"
        " FILTER (WHERE {by} IS NOT NULL)",
    )


class MinBy(Picked):
    """``min_by(field, by)``: the ``field`` of the element whose ``by`` is smallest."""

    name = "min_by"
    examples = ("min_by(page, seconds)",)
    largest = False
    sql = SqlForm(
        None,
        "first({value} ORDER BY {by} ASC, {value} ASC NULLS LAST) FILTER (WHERE {by} IS NOT NULL)",
    )


class Last(Picked):
    """``last(field)``: the ``field`` of the element whose event time is latest."""

    glance = Glance(
        "`first(col)`, `last(col)`",
        "not timestamps, decimals, dates",
        "the column's",
        "yes",
        "per element (event times)",
    )

    name = "last"
    examples = ("last(status)",)
    reads_event_time = True
    arity = 1
    sql = SqlForm(None, "first({value} ORDER BY {order} DESC, {value} DESC NULLS LAST)")


class First(Picked):
    """``first(field)``: the ``field`` of the element whose event time is earliest."""

    glance = Last.glance

    name = "first"
    examples = ("first(status)",)
    largest = False
    reads_event_time = True
    arity = 1
    sql = SqlForm(None, "first({value} ORDER BY {order} ASC, {value} ASC NULLS LAST)")


def sum(field: str | None = None) -> Sum:
    return Sum(field)


def count(field: str | None = None) -> Count:
    return Count(field)


def min(field: str | None = None) -> Min:
    return Min(field)


def max(field: str | None = None) -> Max:
    return Max(field)


def mean(field: str | None = None) -> Mean:
    return Mean(field)


def to_list(field: str | None = None) -> ToList:
    return ToList(field)


def max_by(field: str, by: str) -> MaxBy:
    """The ``field`` of the element whose ``by`` is largest (:class:`Picked`)."""
    return MaxBy(field, by)


def min_by(field: str, by: str) -> MinBy:
    """The ``field`` of the element whose ``by`` is smallest (:class:`Picked`)."""
    return MinBy(field, by)


def first(field: str | None = None) -> First:
    """The ``field`` of the element whose event time is earliest (:class:`Picked`)."""
    return First(field)


def last(field: str | None = None) -> Last:
    """The ``field`` of the element whose event time is latest (:class:`Picked`)."""
    return Last(field)


def approx_count_distinct(field: str | None = None, lg_k: int = 12) -> ApproxCountDistinct:
    """Distinct values by an HLL sketch (:class:`panes.sketches.ApproxCountDistinct`)."""
    return ApproxCountDistinct(field, lg_k)


def approx_quantiles(field: str | None, ranks: Sequence[float]) -> ApproxQuantiles:
    """Quantiles by a KLL sketch (:class:`panes.sketches.ApproxQuantiles`)."""
    return ApproxQuantiles(field, ranks)


def approx_percentile(field: str | None, rank: float) -> ApproxPercentile:
    """One quantile by a KLL sketch (:class:`panes.sketches.ApproxPercentile`)."""
    return ApproxPercentile(field, rank)


def top_k(field: str | None, k: int) -> TopK:
    """The ``k`` most frequent values by a frequent-items sketch (:class:`panes.sketches.TopK`)."""
    return TopK(field, k)


class Aggregates(CombineFn):
    """Several named aggregates over the same values; the output is a ``dict`` by name.

    >>> agg = aggregates(plays=count(), watched=sum("seconds"))
    >>> agg.extract(agg.add_all(agg.create(), [{"seconds": 30}, {"seconds": 12}]))
    {'plays': 2, 'watched': 42}
    """

    def __init__(self, fns: dict[str, CombineFn]) -> None:
        if not fns:
            raise ValueError("aggregates need at least one named aggregate")
        for name, fn in fns.items():
            if not isinstance(fn, CombineFn):
                raise TypeError(f"aggregate {name!r} is not a CombineFn: {fn!r}")
        self.fns = dict(fns)
        self._items = tuple(self.fns.items())

        # Reading event times if any part does: its inputs are then (event time, value) pairs,
        # and the parts that do not read them are given the values.
        self._timed = tuple(fn.reads_event_time for _, fn in self._items)
        self.reads_event_time = any(self._timed)

    def filter(self, condition: Any) -> Filtered:
        raise TypeError(f"cannot filter {self!r}: filter each aggregate of it")

    def create(self) -> tuple:
        return tuple(fn.create() for _, fn in self._items)

    def _per_part(self, values: Sequence[Any]) -> list[Sequence[Any]]:
        if not self.reads_event_time:
            return [values] * len(self._items)
        plain = [value for _, value in values]
        return [values if timed else plain for timed in self._timed]

    def add_all(self, acc: tuple, values: Sequence[Any]) -> tuple:
        inputs = self._per_part(values)
        return tuple(
            fn.add_all(a, vs) for (_, fn), a, vs in zip(self._items, acc, inputs, strict=True)
        )

    def add(self, acc: tuple, value: Any) -> tuple:
        return self.add_all(acc, (value,))

    def merge(self, accs: Sequence[tuple]) -> tuple:
        return tuple(fn.merge([acc[i] for acc in accs]) for i, (_, fn) in enumerate(self._items))

    def extract(self, acc: tuple) -> dict[str, Any]:
        return {name: fn.extract(a) for (name, fn), a in zip(self._items, acc, strict=True)}

    def retract(self, acc: tuple, value: Any) -> tuple:
        inputs = self._per_part((value,))
        return tuple(
            fn.retract(a, vs[0]) for (_, fn), a, vs in zip(self._items, acc, inputs, strict=True)
        )

    @property
    def can_retract(self) -> bool:
        return all(fn.can_retract for fn in self.fns.values())

    @property
    def order_sensitive(self) -> bool:  # type: ignore[override]
        return any(fn.order_sensitive for fn in self.fns.values())

    # derived from the parts: a read-only property where CombineFn has a class attribute
    @property
    def value_is_accumulator(self) -> bool:  # type: ignore[override]
        return all(fn.value_is_accumulator for fn in self.fns.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Aggregates) and other.fns == self.fns

    def __hash__(self) -> int:
        return hash(tuple(self.fns))

    def __repr__(self) -> str:
        return "aggregates(" + ", ".join(f"{n}={fn!r}" for n, fn in self._items) + ")"


def aggregates(**fns: CombineFn) -> Aggregates:
    """Named aggregates computed together: ``aggregates(plays=count(), watched=sum("s"))``."""
    return Aggregates(fns)


AGGREGATES: dict[str, type[CombineFn]] = {
    cls.name: cls
    for cls in (
        *(Sum, Count, Min, Max, Mean, ToList, MaxBy, MinBy, First, Last),
        *(ApproxCountDistinct, ApproxQuantiles, ApproxPercentile, TopK, MergeSketches),
    )
}
"""The built-in aggregates by their spelling: the registry the configuration's parser reads
(:func:`panes.syntax.parse_aggregate`). Each class declares its own spelling, output type,
path, SQL form, retraction and ``verify`` rule (:mod:`panes.combine_fn`); adding an aggregate is
adding its class here (``docs/aggregates.md``, "Adding an aggregate")."""

RETRACTING = tuple(n for n, cls in AGGREGATES.items() if cls.retract is not CombineFn.retract)
"""The spellings of the built-ins that withdraw a value (:attr:`CombineFn.can_retract`)."""


def sql_form(fn: CombineFn) -> SqlForm | None:
    """The :class:`SqlForm` of a built-in combiner (or a subclass), None for any other
    (:attr:`CombineFn.sql`); a filtered built-in's is its inner one's, its batch aggregate with
    the condition in DuckDB.

    >>> print(sql_form(count().filter("s = 'x'")).batch.format(value="*", order="ts", filter=""))
    count(*) FILTER (WHERE ("s" = 'x'))
    """
    return fn.sql
