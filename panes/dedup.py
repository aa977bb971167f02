"""Duplicates dropped by a record id: the rules, stated once.

A pipeline may name columns whose values identify an event (``dedup = "event_id"``): a record
delivered again (a producer's retry, a file landed twice, a replay) is then counted once. The
rules, which the operator (``jobs/executor/dedup_state.py``) applies per key bucket and
``panestore verify`` follows over the raw events:

* **Identity.** Two records are copies of one event when they have the same key and the same
  id (every id column equal). A record with a null in an id column is never deduplicated: it is
  counted as any record is (nothing identifies it).
* **Horizon.** An id taken by a record is remembered until the watermark reaches
  :meth:`panes.rules.WindowRules.forget_at`: by default the first watermark at which the record
  would be dropped as late in every one of its windows (the end of its last window plus the
  allowed lateness: a copy arriving after that is dropped as late anyway, so no copy can be
  counted twice); with a stated ``dedup_horizon``, the first watermark past event time +
  horizon. A record that is already past its own :meth:`~panes.rules.WindowRules.forget_at`
  when it arrives is neither checked nor remembered: it goes on to the engine, which drops it
  as late (every copy is then in the ``late`` table).
* **Which copy is taken.** A copy whose id is remembered is a duplicate. Among the copies of one
  id in one batch (a batch's rows come in no fixed order, a replay may order them otherwise),
  the first in :func:`copy_order` is taken, the others are duplicates: the smallest event time,
  then the value columns in order (null first), then the record's raw text and its file (these
  two only decide which copy's text the ``rejected`` table keeps).
* **Ids are kept as 128-bit hashes** (:func:`id_hash`) of the key and the id. Two distinct ids
  of one key bucket with the same hash would make the second a duplicate (a ``rejected`` row,
  never silent); among a billion remembered ids the chance of any such pair is about 1e-21.

>>> from panes import FixedWindows, Windowing
>>> from panes.rules import WindowRules
>>> rules = Windowing(FixedWindows(10), allowed_lateness=5).rules
>>> rules.forget_at(3, None), rules.forget_at(3, 100)
(16, 104)
>>> copies = [Copy(b"7", 16), Copy(b"7", 16)]
>>> duplicate, ids = take({}, copies, watermark=0, order=[(3, "b"), (3, "a")].__getitem__)
>>> duplicate, ids
([True, False], {b'7': 16})
>>> take(ids, [Copy(b"7", 16)], watermark=15)[0], forget(ids, 16)
([True], {})
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

DUPLICATE = "DUPLICATE"
"""The start of the reason of a duplicate's ``rejected`` row."""


def remembered(forget: int | None, watermark: int) -> bool:
    """Whether an id forgotten at ``forget`` is still remembered at ``watermark``.

    >>> remembered(16, 15), remembered(16, 16), remembered(None, 0)
    (True, False, False)
    """
    return forget is not None and watermark < forget


def copy_order(timestamp: int, values: Sequence[Any], raw: Any = None, source: Any = None) -> tuple:
    """The sort key of a copy among the copies of one id in a batch: event time, then each value
    column (null first), then the raw record's text and its file (null first).

    >>> sorted([copy_order(5, [2.0]), copy_order(5, [None]), copy_order(4, [9.0])])[0][0]
    4
    """

    def nulls_first(v: Any) -> tuple:
        return (0,) if v is None else (1, v)

    return (timestamp, *map(nulls_first, values), nulls_first(raw), nulls_first(source))


def id_hash(key: Any, id_text: str) -> bytes:
    """The 128-bit hash (16 bytes) under which a key's id is remembered: BLAKE2b of the key's
    ``repr`` and the id's text (``jobs.executor.operator_input.DEDUP_ID``).

    >>> len(id_hash("d1", "3:abc")), id_hash("d1", "3:abc") == id_hash("d2", "3:abc")
    (16, False)
    """
    return hashlib.blake2b(f"{key!r}\x00{id_text}".encode(), digest_size=16).digest()


class Copy(NamedTuple):
    """One record of a batch as :func:`take` judges it: its id's hash (None: a null id) and its
    :meth:`panes.rules.WindowRules.forget_at`."""

    id: bytes | None
    forget: int | None


def take(
    ids: Mapping[bytes, int],
    copies: Sequence[Copy],
    watermark: int,
    order: Callable[[int], tuple] = lambda i: (),
) -> tuple[list[bool], dict[bytes, int]]:
    """Which of a bucket's ``copies`` in one batch at ``watermark`` are duplicates (True), and
    the ids remembered after them (``ids``: id -> forget watermark, those not yet forgotten).
    ``order(i)``: copy ``i``'s :func:`copy_order` (asked only of copies of an id that comes more
    than once in the batch).

    A copy with a null id, or already past its own :meth:`~panes.rules.WindowRules.forget_at`, is
    never a duplicate and
    is not remembered. Otherwise it is a duplicate when its id is remembered, or when another
    copy of its id comes before it in :func:`copy_order`; a taken id is remembered until the
    taken copy's forget watermark.
    """
    after = dict(ids)
    duplicate = [False] * len(copies)
    groups: dict[bytes, list[int]] = {}
    for i, c in enumerate(copies):
        if c.id is None or not remembered(c.forget, watermark):
            continue
        if remembered(ids.get(c.id), watermark):
            duplicate[i] = True
        else:
            members = groups.get(c.id)
            if members is None:
                groups[c.id] = [i]
            else:
                members.append(i)
    for id_, members in groups.items():
        first = members[0] if len(members) == 1 else min(members, key=order)
        for j in members:
            duplicate[j] = j != first
        forget_at_ = copies[first].forget
        assert forget_at_ is not None
        after[id_] = forget_at_
    return duplicate, forget(after, watermark)


def forget(ids: Mapping[bytes, int], watermark: int) -> dict[bytes, int]:
    """``ids`` without those forgotten at ``watermark`` (garbage collection)."""
    return {i: f for i, f in ids.items() if remembered(f, watermark)}


__all__ = [
    "DUPLICATE",
    "Copy",
    "copy_order",
    "forget",
    "id_hash",
    "remembered",
    "take",
]
