"""The combiner protocol, :class:`CombineFn` (what :mod:`panes.combiners` builds on, and the
sketch aggregates of :mod:`panes.sketches`), and what is said of any combiner: the columns it
reads (:func:`fields_of`), its text (:func:`text_of`), a combiner over only the values a
condition lets through (:class:`Filtered`): a module of its own so that both import it.

An aggregate is one class: besides computing (``create``, ``add_all``, ``merge``, ``extract``,
``retract``), a built-in declares everything the other layers ask of it, and they ask the
object, never its name (``docs/aggregates.md``, "Adding an aggregate"):

* its spelling (:attr:`CombineFn.name`, :attr:`CombineFn.examples`, and how its arguments parse:
  :attr:`CombineFn.arity` or :attr:`CombineFn.arguments` with :meth:`CombineFn.from_arguments`),
  which the configuration's parser finds in the registry of built-ins
  (:data:`panes.combiners.AGGREGATES`);
* its output type over its columns (:meth:`CombineFn.output_type_in`: a schema type name, from
  which the lake's Arrow, Spark and DuckDB types all follow); a combiner of your own declares
  :attr:`CombineFn.output_type` instead;
* its path in the operator (:attr:`CombineFn.path`: columnar, lifted or per element, and
  :attr:`CombineFn.per_element_reason`);
* its SQL form for the view's fold and ``verify`` (:attr:`CombineFn.sql`, a :class:`SqlForm`);
* whether it retracts (:attr:`CombineFn.can_retract`: it defines :meth:`CombineFn.retract`);
* how ``verify`` compares its answers (:meth:`CombineFn.agrees`);
* its line in ``docs/aggregates.md``'s table "Every aggregate at a glance"
  (:attr:`CombineFn.glance`, a :class:`Glance`, rendered with what follows from the facets
  above by :mod:`panes.aggregate_table`).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from panes.conditions import Condition, as_condition

A = TypeVar("A")  # accumulator
V = TypeVar("V")  # input value
O = TypeVar("O")  # output  # noqa: E741


class Path(enum.Enum):
    """How the operator adds an aggregate's elements (``docs/semantics.md``, "The operator's
    path"): in the columnar engine's window table, as parts combined per key and window in Arrow
    (lifted: the per-key engine merges them), or one by one."""

    COLUMNAR = "columnar"
    LIFTED = "lifted"
    PER_ELEMENT = "per element"


@dataclass(frozen=True)
class SqlForm:
    """How SQL computes a built-in combiner: the one place the materializer's vectorized reducer
    and MERGE, and the batch check in DuckDB, learn it from (each class's :attr:`CombineFn.sql`).

    ``merge``: the SQL aggregate (``sum``, ``min`` or ``max``) that merges the output values of
    parts of a window into the value of the whole; None when output values do not merge so (a
    mean needs sum and count; a list's order is the panes'; a picked value needs its ranking).
    ``batch``: the SQL aggregate over a window's raw values, ``{value}`` standing for the value
    column (``*`` for a combiner that reads no value), ``{by}`` for the second column it reads
    (``max_by``'s ordering), ``{order}`` for the column of the elements' event times (which
    also orders a list) and ``{filter}`` for a filtered aggregate's ``FILTER (WHERE ...)``
    (empty for others). The picked aggregates break ties as :class:`panes.combiners.Picked` does.
    """

    merge: str | None
    batch: str


@dataclass(frozen=True)
class Column:
    """A source column as an aggregate's output type is worked out from it
    (:meth:`CombineFn.output_type_in`): its schema type name (``long``, ``decimal(18,2)``,
    ``struct<...>``) and what is known of that type (the configuration's one parser of type
    names, :mod:`sinks.lake.column_types`, fills these in)."""

    type: str
    numeric: bool = False
    integral: bool = False
    #: A decimal's scale (None: not a decimal).
    scale: int | None = None


@dataclass(frozen=True)
class Glance:
    """What the table "Every aggregate at a glance" of ``docs/aggregates.md`` says of an
    aggregate class in words, beside what :mod:`panes.aggregate_table` works out from its other
    facets (whether it retracts: :attr:`CombineFn.can_retract`).

    ``spelled``: its texts (`` `count()`, `count(col)` ``); ``reads``: the columns it takes;
    ``column``: its pane-log column's type; ``exact``: how its answer compares with the batch
    computation; ``path``: its path over fixed windows (``docs/semantics.md``, "The operator's
    path"); ``retracts``: the retraction cell where it is not the class's own ``yes`` or
    ``refused`` (a wrapper's, a combiner of your own's); ``refusal``: what follows ``refused``
    (why, or what reads retractions instead)."""

    spelled: str
    reads: str
    column: str
    exact: str
    path: str
    retracts: str | None = None
    refusal: str = ""


class AggregateTypeError(ValueError):
    """An aggregate over a column whose type it does not take; the configuration reports the
    message under ``aggregates.<name>``."""


def same_values(a: Any, b: Any) -> bool:
    """Whether two answers of the same elements agree: exactly, floats within a relative 1e-9
    (their sums' rounding depends on the order of additions), lists as multisets (their order is
    the panes'). :meth:`CombineFn.agrees` of every aggregate that is not approximate."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return bool(a == b)


class CombineFn(Generic[A, V, O]):
    """The combiner protocol: ``create``, ``add``, ``merge``, ``extract``; optionally
    ``retract`` (the inverse of ``add``) and a faster ``add_all``; and the facets a built-in
    declares (the module's doc), which a combiner of your own may leave as they are."""

    #: Its spelling in a pipeline's text (``sum``); empty for a combiner of your own.
    name: str = ""
    #: Texts of it as a configuration writes them (``sum(seconds)``): messages show them, and
    #: tests parse them.
    examples: tuple[str, ...] = ()
    #: How many columns its text names, ``NAME(FIELD, ...)``  (``sum(seconds)``: one).
    arity: int = 1
    #: Whether its text may name no column at all (``count()``).
    field_optional: bool = False
    #: Its text's arguments when they are more than columns (a sketch's ``top_k(page, 10)``): a
    #: pattern matched after ``NAME(``, through the closing parenthesis, whose groups
    #: :meth:`from_arguments` reads. None: ``NAME(FIELD, ...)`` with :attr:`arity` columns.
    arguments: ClassVar[re.Pattern[str] | None] = None
    #: Its form in SQL (:class:`SqlForm`); None: the view's fold and ``verify`` compute it in
    #: Python.
    sql: SqlForm | None = None
    #: The columnar engine's kind of its accumulator (``sum``, ``mean``, ``min``, ``max``,
    #: ``list``, ``count``, ``count_rows``: :mod:`panes.columnar.accumulators`); None: its parts
    #: are computed by its own ``add_all`` (lifted), or it is added element by element.
    columnar_kind: str | None = None
    #: Why its elements are added one by one (None: its parts lift, :attr:`path`).
    per_element_reason: str | None = None
    #: Whether it reads an upstream pipeline's sketch column (``merge(...)``).
    reads_sketches: bool = False
    #: Its line in ``docs/aggregates.md``'s table of every aggregate (:class:`Glance`); a
    #: built-in declares its own, this one is a combiner of your own's.
    glance: ClassVar[Glance] = Glance(
        "a `CombineFn` of your own (code only)",
        "its `fields`",
        "its `output_type`",
        "yours",
        "lifted, unless `order_sensitive`",
        retracts="if it defines `retract`",
    )

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

    @classmethod
    def from_arguments(cls, groups: Mapping[str, str | None]) -> CombineFn:
        """The aggregate of a text matching :attr:`arguments` (``groups``: its named groups);
        ``ValueError`` for arguments it does not take."""
        raise NotImplementedError(f"{cls.__name__} declares no arguments")

    def output_type_in(self, columns: Mapping[str, Column]) -> Any:
        """Its output values' type over ``columns`` (the source's, by name): a schema type name
        (``long``, ``decimal(38,2)``, ``list<string>``, ``struct<...>``); raises
        :class:`AggregateTypeError` for a column type it does not take. A combiner of your own
        keeps this one, which gives its declared :attr:`output_type` (a type name or an Arrow
        type, :attr:`declares_output_type`)."""
        return self.output_type

    @property
    def declares_output_type(self) -> bool:
        """Whether its output type is the declared :attr:`output_type` (a combiner of your own),
        not worked out from its columns (a built-in's :meth:`output_type_in`)."""
        return type(self).output_type_in is CombineFn.output_type_in

    @property
    def path(self) -> Path:
        """How the operator adds its elements, where its columns allow (the columnar engine
        may still refuse a column's type: :func:`panes.columnar.columnar_reason`)."""
        if self.per_element_reason is not None or self.reads_event_time:
            return Path.PER_ELEMENT
        return Path.LIFTED if self.columnar_kind is None else Path.COLUMNAR

    def agrees(self, expected: O, actual: O) -> bool:
        """Whether two answers of the same elements agree, ``verify``'s rule: exact
        (:func:`same_values`) unless the aggregate is approximate (a sketch's error bound)."""
        return same_values(expected, actual)

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

    glance = Glance(
        "`AGG filter (condition)`",
        "`AGG`'s and the condition's columns",
        "`AGG`'s",
        "as `AGG`",
        "as `AGG` where built in (the column masked), else per element",
        retracts="as `AGG`",
    )

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

    def output_type_in(self, columns: Mapping[str, Column]) -> Any:
        return self.inner.output_type_in(columns)  # its output is its inner one's

    @property
    def declares_output_type(self) -> bool:
        return self.inner.declares_output_type

    @property
    def path(self) -> Path:
        """The inner one's columnar path, its column masked by the condition's flag; otherwise
        element by element (a list keeps its nulls, so it cannot be masked; a lifted part is a
        combiner's own ``add_all`` of values, which carry no flag)."""
        if self.inner.path is Path.COLUMNAR and self.inner.columnar_kind != "list":
            return Path.COLUMNAR
        return Path.PER_ELEMENT

    @property
    def sql(self) -> SqlForm | None:  # type: ignore[override]
        """Its inner one's, the batch aggregate with the condition in DuckDB."""
        inner = self.inner.sql
        if inner is None:
            return None
        where = self.condition.sql("duckdb").replace("{", "{{").replace("}", "}}")
        batch = inner.batch
        if "{filter}" in batch:
            batch = batch.replace("{filter}", f" FILTER (WHERE {where})")
        elif " FILTER (WHERE " in batch:  # a picked value's own filter: both hold
            batch = batch.replace(" FILTER (WHERE ", f" FILTER (WHERE ({where}) AND ", 1)
        else:
            batch += f" FILTER (WHERE {where})"
        return SqlForm(inner.merge, batch)

    def agrees(self, expected: Any, actual: Any) -> bool:
        return self.inner.agrees(expected, actual)

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
