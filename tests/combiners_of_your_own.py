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
