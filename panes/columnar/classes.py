"""Evaluating the model's scalar rules once per class of rows.

The columnar engine states no rule of its own. A rule is a Python function of a few facts of
one window (:mod:`panes.rules`, a trigger's methods); most rows of a window table share their
facts, so :func:`per_class` calls the rule once per distinct combination of facts and spreads
the answers over the rows. A trigger's state becomes a small integer (:class:`TriggerClasses`)
so that it can be one of the facts.

>>> import numpy as np
>>> per_class(lambda a, b: (a + b, a * b), np.array([1, 2, 1]), np.array([3, 3, 3]))[1].tolist()
[3, 6, 3]
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from panes.triggers import ROOT, ClassContext, NotByClass, Trigger


def per_class(fn: Callable[..., Any], *columns: np.ndarray) -> list[np.ndarray]:
    """``fn`` of each distinct row of ``columns`` (integers, or booleans), its answers (an
    integer, or a tuple of integers) spread over the rows: one array per item of the answer."""
    if len(columns[0]) == 0:
        return [np.zeros(0, np.int64) for _ in range(4)]  # an empty answer of any width
    ints = [np.asarray(c).astype(np.int64) for c in columns]
    lows = [int(c.min()) for c in ints]
    radices = [int(c.max()) - low + 1 for c, low in zip(ints, lows, strict=True)]
    if np.prod([float(r) for r in radices]) < 2**62:  # one integer per row, in mixed radix
        combined = np.zeros(len(ints[0]), np.int64)
        for c, low, radix in zip(ints, lows, radices, strict=True):
            combined = combined * radix + (c - low)
        classes, inverse = np.unique(combined, return_inverse=True)
        rows = []
        for value in classes.tolist():
            digits = []
            for low, radix in zip(reversed(lows), reversed(radices), strict=True):
                value, digit = divmod(value, radix)
                digits.append(digit + low)
            rows.append(digits[::-1])
    else:
        distinct, inverse = np.unique(np.stack(ints, axis=1), axis=0, return_inverse=True)
        rows = distinct.tolist()
    answers = [fn(*row) for row in rows]
    table = np.array(answers, dtype=np.int64).reshape(len(answers), -1)
    return [table[:, i][inverse.reshape(-1)] for i in range(table.shape[1])]


def by_value(fn: Callable[[int], int], column: np.ndarray) -> np.ndarray:
    """``fn`` of each distinct value of ``column`` (integers), spread over the rows."""
    if len(column) == 0:
        return np.zeros(0, np.int64)
    values, inverse = np.unique(column, return_inverse=True)
    answers = np.array([fn(v) for v in values.tolist()], dtype=np.int64)
    return answers[inverse.reshape(-1)]


class TriggerClasses:
    """A trigger's states interned as small integers (-1: a closed window, no state), its
    methods run once per class of windows (:class:`panes.triggers.ClassContext`). Only for a
    trigger that is :attr:`~panes.triggers.Trigger.by_class`; one that reads the clocks
    otherwise raises :class:`~panes.triggers.NotByClass` naming it."""

    def __init__(self, trigger: Trigger) -> None:
        if not trigger.by_class:
            raise NotByClass(f"{trigger} cannot be evaluated once per class of windows")
        self.trigger = trigger
        self.states: list[tuple] = []
        self._codes: dict[tuple, int] = {}
        self._contexts = (ClassContext(past_end=False), ClassContext(past_end=True))

    def code(self, state: Sequence[Any]) -> int:
        key = tuple(state)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.states)
            self.states.append(key)
        return code

    def state(self, code: int) -> list:
        """The trigger state list of ``code`` (a fresh copy)."""
        return list(self.states[code])

    def codes_of(self, column: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """The codes of a stored trigger column (pickled tuples; null: closed)."""
        encoded = pc.dictionary_encode(column)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        mine = np.array(
            [self.code(pickle.loads(s)) for s in encoded.dictionary.to_pylist()] or [0],
            dtype=np.int64,
        )
        indices = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(indices < 0, -1, mine[np.maximum(indices, 0)])

    def column(self, codes: np.ndarray) -> pa.Array:
        """``codes`` as a stored trigger column."""
        states = [pickle.dumps(s, protocol=5) for s in self.states] or [b""]
        return pa.DictionaryArray.from_arrays(
            pa.array(codes.astype(np.int32), mask=codes < 0), pa.array(states, pa.binary())
        ).cast(pa.binary())

    def _each(self, fn: Callable[..., tuple], *columns: np.ndarray) -> list[np.ndarray]:
        try:
            return per_class(fn, *columns)
        except NotByClass as e:
            raise NotByClass(f"{self.trigger}: {e}") from None

    def after_elements(self, codes, past, n) -> tuple[np.ndarray, np.ndarray]:
        """``on_elements`` of ``n`` elements, then ``should_fire``: (codes after, fires)."""

        def one(code: int, past: int, n: int) -> tuple[int, int]:
            state, ctx = self.state(code), self._contexts[past]
            self.trigger.on_elements(state, ROOT, ctx, n)
            return self.code(state), int(self.trigger.should_fire(state, ROOT, ctx))

        after, fires = self._each(one, codes, past, n)
        return after, fires.astype(bool)

    def should_fire(self, codes, past) -> np.ndarray:
        def one(code: int, past: int) -> tuple[int]:
            return (int(self.trigger.should_fire(self.state(code), ROOT, self._contexts[past])),)

        return self._each(one, codes, past)[0].astype(bool)

    def on_fire(self, codes, past) -> tuple[np.ndarray, np.ndarray]:
        """``next`` (a firing): (codes after, finished)."""

        def one(code: int, past: int) -> tuple[int, int]:
            state = self.state(code)
            self.trigger.on_fire(state, ROOT, self._contexts[past])
            return self.code(state), int(self.trigger.is_done(state, ROOT))

        after, done = self._each(one, codes, past)
        return after, done.astype(bool)

    def waits_for_end(self, codes, past) -> np.ndarray:
        """Whether the trigger's next event-time wake-up is the end of the window (a trigger
        evaluated by class has no other)."""

        def one(code: int, past: int) -> tuple[int]:
            wake = self.trigger.event_wakeup(self.state(code), ROOT, self._contexts[past])
            if wake not in (None, ClassContext.END):
                raise NotByClass(f"an event-time wake-up {wake} that is not the end of window")
            return (int(wake is not None),)

        return self._each(one, codes, past)[0].astype(bool)


__all__ = ["TriggerClasses", "by_value", "per_class"]
