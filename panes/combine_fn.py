"""The combiner protocol, :class:`CombineFn` (what :mod:`panes.combiners` builds on, and the
sketch aggregates of :mod:`panes.sketches`): a module of its own so that both import it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

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
