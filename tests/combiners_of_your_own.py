"""Combiners of a user's own (``CombineFn`` subclasses) that the tests share: each written once.

A test that needs another column, an output type or other traits subclasses one and sets the
class attributes a user would (``fields``, ``output_type``, ``order_sensitive``). Plain Python
with no test-framework imports: Spark's Python workers import it (through
``tests/spark/counter_source.py``).
"""

from __future__ import annotations

from panes.combiners import CombineFn


class Spread(CombineFn):
    """``max - min`` of field ``v``, skipping nulls; ``None`` for no values. A subclass names
    another field in ``fields``, or none (``fields = ()``) to read whole values. Its accumulator,
    ``None`` or ``(min, max)``, is JSON.
    """

    fields: tuple[str, ...] = ("v",)

    def create(self):
        return None

    def add(self, acc, value):
        x = value[self.fields[0]] if self.fields else value
        if x is None:
            return acc
        return (x, x) if acc is None else (min(acc[0], x), max(acc[1], x))

    def merge(self, accs):
        present = [a for a in accs if a is not None]
        if not present:
            return None
        return (min(a[0] for a in present), max(a[1] for a in present))

    def extract(self, acc):
        return None if acc is None else acc[1] - acc[0]


class Distinct(CombineFn):
    """The exact number of distinct non-null values of field ``s`` (a subclass names another in
    ``fields``), with its own ``add_all``. Its accumulator is a sorted tuple, so that its state's
    bytes are the same however it was built.
    """

    fields: tuple[str, ...] = ("s",)

    def create(self):
        return ()

    def add_all(self, acc, values):
        (field,) = self.fields
        return tuple(sorted({*acc, *(v[field] for v in values if v[field] is not None)}))

    def add(self, acc, value):
        return self.add_all(acc, [value])

    def merge(self, accs):
        return tuple(sorted({t for acc in accs for t in acc}))

    def extract(self, acc):
        return len(acc)


class Seen(CombineFn):
    """The number of distinct values (of field ``s`` in a subclass whose ``fields`` name it;
    whole values by default), its accumulator a ``set`` (no JSON value: the pane log stores it
    tagged)."""

    fields: tuple[str, ...] = ()

    def create(self):
        return set()

    def add(self, acc, value):
        return acc | {value[self.fields[0]] if self.fields else value}

    def merge(self, accs):
        return set().union(*accs)

    def extract(self, acc):
        return len(acc)


class Trail(CombineFn):
    """The number of distinct bytes among the values (each taken modulo 256), its accumulator
    the ``bytes`` of every value seen (a sketch of its own: the pane log stores it as base64)."""

    def create(self):
        return b""

    def add(self, acc, value):
        return acc + bytes([value % 256])

    def merge(self, accs):
        return b"".join(sorted(accs))

    def extract(self, acc):
        return len(set(acc))


class Opaque:
    """An object of a user's own: the pane log has no text for it."""


class OpaqueFrom(CombineFn):
    """The sum of field ``v`` (whole values, ``fields = ()``) while every value is below
    ``limit``; a value at or above it makes the accumulator an :class:`Opaque` (its value -1).
    Neither ``create()`` nor a small value shows that it cannot be stored: only the panes of a
    window that added such a value do."""

    fields: tuple[str, ...] = ("v",)
    limit = 12

    def create(self):
        return 0

    def add(self, acc, value):
        x = value[self.fields[0]] if self.fields else value
        if isinstance(acc, Opaque) or (x is not None and x >= self.limit):
            return Opaque()
        return acc + (x or 0)

    def merge(self, accs):
        return Opaque() if any(isinstance(a, Opaque) for a in accs) else sum(accs)

    def extract(self, acc):
        return -1 if isinstance(acc, Opaque) else acc
