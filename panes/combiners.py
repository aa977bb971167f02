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

Built-ins follow SQL: ``count()`` counts elements, ``count(field)``, ``sum``, ``min``, ``max`` and
``mean`` skip ``None`` inputs, and ``to_list`` keeps every value, ``None`` included (as
``array_agg``).
Each takes an optional ``field``: with it, values are mappings and the aggregate reads
``value[field]``. Several named aggregates combine into one with :func:`aggregates`, and the
textual form ``"sum(seconds)"`` (what ``str`` prints) parses with
:func:`panes.syntax.parse_aggregate`.

Any combiner takes a condition over the record's columns (:mod:`panes.conditions`):
``count().filter("status = 'error'")`` (text ``count() filter (status = 'error')``) adds only
the values whose condition is TRUE (:class:`Filtered`).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from panes.conditions import Condition, as_condition

A = TypeVar("A")  # accumulator
V = TypeVar("V")  # input value
O = TypeVar("O")  # output  # noqa: E741


class CombineFn(Generic[A, V, O]):
    """The combiner protocol: ``create``, ``add``, ``merge``, ``extract``; optionally
    ``retract`` (the inverse of ``add``) and a faster ``add_all``."""

    #: Whether an output value determines its accumulator (sum, count, min, max, to_list), so
    #: merging output values is exact; False for a mean (it needs sum and count) and, unless a
    #: combiner says otherwise, for user combiners.
    value_is_accumulator: bool = False

    #: A combiner of your own declares the type of its output values, the pane log's column type:
    #: a type name of a pipeline's schema (``"long"``, ``"double"``, ``"string"``, ...) or an
    #: Arrow type. The built-ins derive theirs from the column they read.
    output_type: Any = None

    #: A combiner of your own names the value columns it reads: its values are then mappings of
    #: them (``value["amount"]``). The built-ins read their ``field``.
    fields: tuple[str, ...] = ()

    @property
    def reads_value(self) -> bool:
        """Whether the combiner reads its input values (``count()`` only counts them)."""
        return True

    def value_as_accumulator(self, value: O) -> A:
        """The accumulator of an output value; only for ``value_is_accumulator`` combiners."""
        return value  # type: ignore[return-value]  # for these combiners O is A

    def create(self) -> A:
        """The accumulator of no values."""
        raise NotImplementedError

    def add(self, acc: A, value: V) -> A:
        """``acc`` with one more value."""
        raise NotImplementedError

    def add_all(self, acc: A, values: Sequence[V]) -> A:
        """``acc`` with all ``values``: the same as adding them one by one."""
        for value in values:
            acc = self.add(acc, value)
        return acc

    def merge(self, accs: Sequence[A]) -> A:
        """One accumulator holding the values of all ``accs`` (at least one)."""
        raise NotImplementedError

    def extract(self, acc: A) -> O:
        """The output value of an accumulator."""
        raise NotImplementedError

    def retract(self, acc: A, value: V) -> A:
        """``acc`` without one earlier added ``value``: the inverse of :meth:`add`, so that
        ``retract(add(acc, v), v) == acc``. Optional (see :attr:`can_retract`); a combiner that
        defines it can read weighted input (elements of weight -1, :mod:`panes.weights`)."""
        raise NotImplementedError(f"{self} cannot retract values")

    @property
    def can_retract(self) -> bool:
        """Whether the combiner defines :meth:`retract` (min and max do not: they keep no
        multiset of their values)."""
        return type(self).retract is not CombineFn.retract

    def filter(self, condition: Condition | str) -> Filtered:
        """This combiner over only the values whose ``condition`` is TRUE (:class:`Filtered`).

        >>> fn = count().filter("status = 'error'")
        >>> fn
        count() filter (status = 'error')
        >>> fn.extract(fn.add_all(fn.create(), [{"status": "error"}, {"status": None}]))
        1
        """
        return Filtered(self, as_condition(condition))


class _FieldCombineFn(CombineFn):
    """A built-in aggregate over the whole value, or over ``value[field]``."""

    name = ""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

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
    name = "sum"
    value_is_accumulator = True

    def create(self) -> Any:
        return 0

    def add_all(self, acc: Any, values: Sequence[Any]) -> Any:
        if self.field is None:
            try:
                return acc + builtins.sum(values)
            except TypeError:  # a None among the values: skip them, as SQL does
                pass
        return acc + builtins.sum(self._inputs(values))

    def merge(self, accs: Sequence[Any]) -> Any:
        return builtins.sum(accs)

    def extract(self, acc: Any) -> Any:
        return acc

    def retract(self, acc: Any, value: Any) -> Any:
        value = self._input(value)
        return acc if value is None else acc - value


class Count(_FieldCombineFn):
    """``count()`` counts elements; ``count(field)`` counts those whose field is not None."""

    name = "count"
    value_is_accumulator = True

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
    name = "min"

    @staticmethod
    def pick(values: list[Any]) -> Any:
        return builtins.min(values)


class Max(_Extremum):
    name = "max"

    @staticmethod
    def pick(values: list[Any]) -> Any:
        return builtins.max(values)


class Mean(_FieldCombineFn):
    """The arithmetic mean; its accumulator is ``(sum, count)``."""

    name = "mean"

    def create(self) -> tuple[Any, int]:
        return (0, 0)

    def add_all(self, acc: tuple[Any, int], values: Sequence[Any]) -> tuple[Any, int]:
        inputs = self._inputs(values)
        return (acc[0] + builtins.sum(inputs), acc[1] + len(inputs))

    def merge(self, accs: Sequence[tuple[Any, int]]) -> tuple[Any, int]:
        return (builtins.sum(a[0] for a in accs), builtins.sum(a[1] for a in accs))

    def extract(self, acc: tuple[Any, int]) -> float | None:
        return acc[0] / acc[1] if acc[1] else None

    def retract(self, acc: tuple[Any, int], value: Any) -> tuple[Any, int]:
        value = self._input(value)
        return acc if value is None else (acc[0] - value, acc[1] - 1)


class ToList(_FieldCombineFn):
    """All values in arrival order (``None`` included); the accumulator is a tuple."""

    name = "to_list"
    value_is_accumulator = True

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

    def create(self) -> tuple:
        return tuple(fn.create() for _, fn in self._items)

    def add_all(self, acc: tuple, values: Sequence[Any]) -> tuple:
        return tuple(fn.add_all(a, values) for (_, fn), a in zip(self._items, acc, strict=True))

    def add(self, acc: tuple, value: Any) -> tuple:
        return self.add_all(acc, (value,))

    def merge(self, accs: Sequence[tuple]) -> tuple:
        return tuple(fn.merge([acc[i] for acc in accs]) for i, (_, fn) in enumerate(self._items))

    def extract(self, acc: tuple) -> dict[str, Any]:
        return {name: fn.extract(a) for (name, fn), a in zip(self._items, acc, strict=True)}

    def retract(self, acc: tuple, value: Any) -> tuple:
        return tuple(fn.retract(a, value) for (_, fn), a in zip(self._items, acc, strict=True))

    @property
    def can_retract(self) -> bool:
        return all(fn.can_retract for fn in self.fns.values())

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


class Filtered(CombineFn):
    """``inner`` over only the values whose ``condition`` is TRUE (SQL's ``FILTER (WHERE ...)``:
    an unknown condition, a null column compared, does not count). Its output is ``inner``'s.

    Where a record is tagged, the condition is computed once and its value carried in the
    element's value under :attr:`panes.conditions.Condition.flag`; a value without that field
    (the simulator, :func:`panes.fold.batch`) has the condition evaluated over its columns.

    >>> fn = sum("amount").filter("country = 'de'")
    >>> fn.extract(fn.add_all(fn.create(), [{"amount": 2, "country": "de"},
    ...                                     {"amount": 5, "country": "fr"}]))
    2
    """

    def __init__(self, inner: CombineFn, condition: Condition) -> None:
        if isinstance(inner, Filtered | Aggregates):
            raise TypeError(f"cannot filter {inner!r}: filter a single, unfiltered aggregate")
        self.inner = inner
        self.condition = condition
        self.flag = condition.flag
        self.value_is_accumulator = inner.value_is_accumulator
        self.output_type = inner.output_type

    def passes(self, value: Any) -> bool:
        """Whether ``value`` counts: its carried flag, else the condition over its columns."""
        if not isinstance(value, Mapping):
            raise TypeError(f"{self!r} reads columns, and the value {value!r} is no mapping")
        if self.flag in value:
            return value[self.flag] is True
        return self.condition.evaluate(value) is True

    @property
    def reads_value(self) -> bool:
        return True

    def value_as_accumulator(self, value: Any) -> Any:
        return self.inner.value_as_accumulator(value)

    def create(self) -> Any:
        return self.inner.create()

    def add(self, acc: Any, value: Any) -> Any:
        return self.inner.add(acc, value) if self.passes(value) else acc

    def add_all(self, acc: Any, values: Sequence[Any]) -> Any:
        return self.inner.add_all(acc, [v for v in values if self.passes(v)])

    def merge(self, accs: Sequence[Any]) -> Any:
        return self.inner.merge(accs)

    def extract(self, acc: Any) -> Any:
        return self.inner.extract(acc)

    def retract(self, acc: Any, value: Any) -> Any:
        return self.inner.retract(acc, value) if self.passes(value) else acc

    @property
    def can_retract(self) -> bool:
        return self.inner.can_retract

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Filtered)
            and other.inner == self.inner
            and other.condition == self.condition
        )

    def __hash__(self) -> int:
        return hash((Filtered, self.inner, self.condition))

    def __repr__(self) -> str:
        return f"{text_of(self.inner)} filter ({self.condition})"


def unfiltered(fn: CombineFn) -> CombineFn:
    """The combiner a :class:`Filtered` wraps, or ``fn`` itself.

    >>> unfiltered(count().filter("x = 1"))
    count()
    """
    return fn.inner if isinstance(fn, Filtered) else fn


def fields_of(fn: CombineFn) -> tuple[str, ...]:
    """The source columns ``fn`` reads: a built-in's ``field``, a combiner's own ``fields``,
    and a filtered one's condition's columns.

    >>> fields_of(sum("amount")), fields_of(count()), fields_of(count().filter("s = 'x'"))
    (('amount',), (), ('s',))
    """
    if isinstance(fn, Filtered):
        return tuple(dict.fromkeys((*fields_of(fn.inner), *fn.condition.columns)))
    field = getattr(fn, "field", None)
    return (field,) if isinstance(field, str) else tuple(fn.fields)


def carried_fields_of(fn: CombineFn) -> tuple[str, ...]:
    """The fields of an element's value that ``fn`` reads once its record is tagged: its
    source columns, a filtered one's condition replaced by the condition's flag (the columns
    the condition reads need not travel further than the tagger).

    >>> fn = sum("amount").filter("s = 'x'")
    >>> carried_fields_of(fn) == ("amount", fn.condition.flag)
    True
    """
    if isinstance(fn, Filtered):
        return (*carried_fields_of(fn.inner), fn.flag)
    return fields_of(fn)


def conditions_of(fn: CombineFn) -> tuple[Condition, ...]:
    """The conditions a tagger computes for ``fn`` (one per filtered aggregate)."""
    return (fn.condition,) if isinstance(fn, Filtered) else ()


def text_of(fn: CombineFn) -> str:
    """``fn`` as text that is the same in every process: its ``repr``, or for a combiner of
    your own that does not write one, its class's qualified name.

    >>> text_of(sum("amount"))
    'sum(amount)'
    """
    if type(fn).__repr__ is object.__repr__:
        cls = type(fn)
        return f"{cls.__module__}.{cls.__qualname__}({', '.join(fields_of(fn))})"
    return repr(fn)


def aggregates(**fns: CombineFn) -> Aggregates:
    """Named aggregates computed together: ``aggregates(plays=count(), watched=sum("s"))``."""
    return Aggregates(fns)


BUILTINS: dict[str, type[_FieldCombineFn]] = {
    cls.name: cls for cls in (Sum, Count, Min, Max, Mean, ToList)
}


@dataclass(frozen=True)
class SqlForm:
    """How SQL computes a built-in combiner: the one place the materializer's vectorized reducer
    and MERGE, and the batch check in DuckDB, learn it from.

    ``merge``: the SQL aggregate (``sum``, ``min`` or ``max``) that merges the output values of
    parts of a window into the value of the whole; None when output values do not merge so (a
    mean needs sum and count; a list's order is the panes'). ``batch``: the SQL aggregate over a
    window's raw values, ``{value}`` standing for the value column (``*`` for a combiner that
    reads no value) and ``{order}`` for the column giving the elements' order.
    """

    merge: str | None
    batch: str


SQL_FORMS: dict[type[CombineFn], SqlForm] = {
    Sum: SqlForm("sum", "coalesce(sum({value}){filter}, 0)"),
    Count: SqlForm("sum", "count({value}){filter}"),
    Min: SqlForm("min", "min({value}){filter}"),
    Max: SqlForm("max", "max({value}){filter}"),
    Mean: SqlForm(None, "avg({value}){filter}"),
    ToList: SqlForm(None, "list({value} ORDER BY {order}){filter}"),
}
"""``{filter}`` stands for a filtered aggregate's ``FILTER (WHERE ...)`` (empty for others)."""


def sql_form(fn: CombineFn) -> SqlForm | None:
    """The :class:`SqlForm` of a built-in combiner (or a subclass), None for any other; a
    filtered built-in's is its inner one's, its batch aggregate with the condition in DuckDB.

    >>> sql_form(count().filter("s = 'x'")).batch.format(value="*", order="ts", filter="")
    'count(*) FILTER (WHERE ("s" = \'x\'))'
    """
    if isinstance(fn, Filtered):
        inner = sql_form(fn.inner)
        if inner is None:
            return None
        where = fn.condition.sql("duckdb").replace("{", "{{").replace("}", "}}")
        return SqlForm(inner.merge, inner.batch.replace("{filter}", f" FILTER (WHERE {where})"))
    for cls in type(fn).__mro__:
        form = SQL_FORMS.get(cls)
        if form is not None:
            return form
    return None
