"""The combiner protocol, :class:`CombineFn` (what :mod:`panes.combiners` builds on, and the
sketch aggregates of :mod:`panes.sketches`), and what is said of any combiner: the columns it
reads (:func:`fields_of`), its text (:func:`text_of`), a combiner over only the values a
condition lets through (:class:`Filtered`): a module of its own so that both import it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

    #: Whether the combiner reads its elements' event times. Such a combiner is given
    #: ``(event_time, value)`` pairs (event time in µs) wherever it is given values: ``add``,
    #: ``add_all`` and ``retract``. Every caller builds its inputs with :func:`inputs_of`, the
    #: one statement of this rule (the engines, :func:`panes.fold.batch`, a lifted bundle's
    #: parts). Its accumulator holds what it needs of the times (``last``: the latest one).
    reads_event_time: bool = False

    #: Whether the output depends on the order in which values are added (``to_list``). A
    #: combiner that leaves it False promises that the values of a window give the same output
    #: in any order and however they are split into accumulators that are merged (what
    #: :meth:`merge` of accumulators of parts of the values must equal): the Spark job then
    #: combines each window's values of a batch apart (combiner lifting, ``docs/semantics.md``,
    #: "The operator's path"). A sum of floats, whose rounding depends on the order of its
    #: additions, is order sensitive if its panes must be the same bit for bit.
    order_sensitive: bool = False

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

    def accumulator_to_data(self, acc: A) -> Any:
        """``acc`` as values the pane log can store (:mod:`panes.accumulator_text`: numbers,
        strings, bytes, decimals, dates and times, and tuples, lists, sets and dicts of them).
        The accumulator itself by default; a combiner of your own whose accumulator holds
        another kind of value overrides this and :meth:`accumulator_from_data`."""
        return acc

    def accumulator_from_data(self, data: Any) -> A:
        """The accumulator whose :meth:`accumulator_to_data` is ``data``."""
        return data

    def filter(self, condition: Condition | str) -> Filtered:
        """This combiner over only the values whose ``condition`` (a
        :class:`panes.conditions.Condition` or its text) is TRUE: a
        :class:`panes.combiners.Filtered`.

        >>> from panes.combiners import count
        >>> fn = count().filter("status = 'error'")
        >>> fn
        count() filter (status = 'error')
        >>> fn.extract(fn.add_all(fn.create(), [{"status": "error"}, {"status": None}]))
        1
        """
        return Filtered(self, as_condition(condition))


class Filtered(CombineFn):
    """``inner`` over only the values whose ``condition`` is TRUE (SQL's ``FILTER (WHERE ...)``:
    an unknown condition, a null column compared, does not count). Its output is ``inner``'s.

    Where a record is tagged, the condition is computed once and its value carried in the
    element's value under :attr:`panes.conditions.Condition.flag`; a value without that field
    (the simulator, :func:`panes.fold.batch`) has the condition evaluated over its columns.

    >>> from panes.combiners import sum
    >>> fn = sum("amount").filter("country = 'de'")
    >>> fn.extract(fn.add_all(fn.create(), [{"amount": 2, "country": "de"},
    ...                                     {"amount": 5, "country": "fr"}]))
    2
    """

    def __init__(self, inner: CombineFn, condition: Condition) -> None:
        if isinstance(inner, Filtered) or getattr(inner, "fns", None) is not None:
            raise TypeError(f"cannot filter {inner!r}: filter a single, unfiltered aggregate")
        self.inner = inner
        self.condition = condition
        self.flag = condition.flag
        self.value_is_accumulator = inner.value_is_accumulator
        self.output_type = inner.output_type
        self.reads_event_time = inner.reads_event_time  # its inputs are then (time, value)

    def passes(self, value: Any) -> bool:
        """Whether ``value`` counts: its carried flag, else the condition over its columns."""
        if self.reads_event_time:
            value = value[1]
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

    def accumulator_to_data(self, acc: Any) -> Any:
        return self.inner.accumulator_to_data(acc)

    def accumulator_from_data(self, data: Any) -> Any:
        return self.inner.accumulator_from_data(data)

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

    >>> from panes.combiners import count
    >>> unfiltered(count().filter("x = 1"))
    count()
    """
    return fn.inner if isinstance(fn, Filtered) else fn


def fields_of(fn: CombineFn) -> tuple[str, ...]:
    """The source columns ``fn`` reads: a built-in's ``field`` (and ``max_by``'s ``by``), a
    combiner's own ``fields``, and a filtered one's condition's columns.

    >>> from panes.combiners import count, max_by, sum
    >>> fields_of(sum("amount")), fields_of(count()), fields_of(max_by("page", "seconds"))
    (('amount',), (), ('page', 'seconds'))
    >>> fields_of(count().filter("s = 'x'"))
    ('s',)
    """
    if isinstance(fn, Filtered):
        return tuple(dict.fromkeys((*fields_of(fn.inner), *fn.condition.columns)))
    if fn.fields:
        return tuple(fn.fields)
    field = getattr(fn, "field", None)
    return (field,) if isinstance(field, str) else ()


def carried_fields_of(fn: CombineFn) -> tuple[str, ...]:
    """The fields of an element's value that ``fn`` reads once its record is tagged: its
    source columns, a filtered one's condition replaced by the condition's flag (the columns
    the condition reads need not travel further than the tagger).

    >>> from panes.combiners import sum
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

    >>> from panes.combiners import sum
    >>> text_of(sum("amount"))
    'sum(amount)'
    """
    if type(fn).__repr__ is object.__repr__:
        cls = type(fn)
        return f"{cls.__module__}.{cls.__qualname__}({', '.join(fields_of(fn))})"
    return repr(fn)
