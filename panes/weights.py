"""Element weights: elements that withdraw what an earlier element contributed.

An element's weight is +1 (it adds its value to its windows) unless its value is a
:class:`Retracted`: then its weight is -1 and it withdraws one earlier value equal to
``Retracted.value`` from the windows its timestamp is assigned to. Retracted elements are what a
pipeline reads from an upstream pipeline's retraction panes (the Dataflow paper's reason for the
accumulating & retracting mode: a downstream grouping must withdraw what an earlier pane
contributed).

Only an engine built with ``weighted=True`` reads weights (see :func:`check_weighted`); its rules
are in docs/semantics.md ("Weighted input").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from panes.combiners import Aggregates, CombineFn
from panes.windowing import AccumulationMode, Windowing


class Retracted:
    """The value of an element of weight -1: it withdraws one earlier ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is Retracted and other.value == self.value

    def __hash__(self) -> int:
        return hash((Retracted, self.value))

    def __repr__(self) -> str:
        return f"Retracted({self.value!r})"


def weight_of(value: Any) -> int:
    """+1, or -1 for a :class:`Retracted` value."""
    return -1 if type(value) is Retracted else 1


def split_elements_by_weight(
    elements: Sequence[Sequence[Any]],
) -> tuple[list[Sequence[Any]], list[tuple[Any, Any]]]:
    """Elements (tuples ending with ``(value, timestamp)``) of weight +1, and the ``(value,
    timestamp)`` each -1 element withdraws (its value unwrapped): what
    :func:`panes.combiners.inputs_of` makes a combiner's inputs of.

    >>> split_elements_by_weight([(3, 10), (Retracted(2), 20)])
    ([(3, 10)], [(2, 20)])
    """
    added: list[Sequence[Any]] = []
    withdrawn: list[tuple[Any, Any]] = []
    for element in elements:
        value = element[-2]
        if type(value) is Retracted:
            withdrawn.append((value.value, element[-1]))
        else:
            added.append(element)
    return added, withdrawn


class WeightedInputError(ValueError):
    """A configuration cannot take weighted input (it names the aggregate or setting)."""


def check_weighted(windowing: Windowing, combine_fn: CombineFn) -> None:
    """Refuse what cannot apply -1 elements exactly.

    Every aggregate must withdraw a value (a ``retract`` method: sum, count, mean, to_list, user
    CombineFns that define it; min and max cannot, they keep no multiset), and the accumulation
    mode must be accumulating & retracting: a window whose weight drops to zero disappears from
    the view, and only a retraction of its last pane can say so.
    """
    fns = combine_fn.fns if isinstance(combine_fn, Aggregates) else {"value": combine_fn}
    for name, fn in fns.items():
        if not fn.can_retract:
            raise WeightedInputError(
                f"aggregate {name!r} ({fn!r}) cannot withdraw a value, so it cannot read "
                "retractions (weight -1 elements); use sum, count, mean, to_list or a "
                "CombineFn with a retract(acc, value) method"
            )
    if windowing.accumulation_mode is not AccumulationMode.ACCUMULATING_AND_RETRACTING:
        raise WeightedInputError(
            f"accumulation mode {windowing.accumulation_mode.name.lower()} cannot read "
            "retractions (weight -1 elements): a window whose weight drops to zero must be "
            "withdrawn from the view, which only accumulating_and_retracting can do"
        )
