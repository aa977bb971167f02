"""A deduplicated pipeline's ids in the operator: kept with each key bucket's state.

A pipeline with ``dedup`` columns (docs/running.md, "Duplicates") drops a record delivered
again by the rules of :mod:`panes.dedup`, applied here per key bucket (a record's copies have
its key, so they reach the same bucket) before the bucket's rows reach the pipeline's path
(:meth:`jobs.executor.operator.OperatorConfig.engines`): :meth:`Dedup.split` masks the rows of
a visit into the records taken and the duplicates, which the operator sends to the ``rejected``
table.

The ids a bucket remembers are stored in the bucket's own state bytes, in the same versioned
state files as its windows (:mod:`jobs.executor.state_store`), so a batch replayed after a kill
reads the ids its first attempt read and decides the same. :func:`wrap` prefixes the windows'
bytes (:mod:`jobs.executor.bucket_state` or :mod:`jobs.executor.window_store`) with
:data:`MAGIC`, the number of ids and, per id, its 128-bit hash and the watermark at which it is
forgotten (24 bytes an id: the hashes in order, then their forget watermarks), then the
windows' own timer and bytes. The bucket's timer is the earlier of its windows' and the first
forget watermark, so ids are collected as the watermark moves even in a bucket
that gets no more data.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.executor import rejection_reasons as why
from jobs.executor.operator_input import DEDUP_ID, REJECTED_COLUMNS, TS_US
from jobs.executor.state_store import Stored
from panes.dedup import Copy, copy_order, forget, id_hash, take
from panes.rules import WindowRules

MAGIC = b"PSD1"
_HEADER = struct.Struct(">4sI")  # magic, number of ids
_INNER_TIMER = struct.Struct(">q")  # the windows' own timer (-1: none)
HASH_BYTES = 16


def unwrap(stored: Stored | None) -> tuple[dict[bytes, int], Stored | None]:
    """A deduplicated bucket's stored state -> (its ids: hash -> forget watermark, the windows'
    stored state, None when it has no windows).

    >>> ids, windows = unwrap(wrap({b"0123456789abcdef": 100}, Stored(b"w", 7), timer_ms=3))
    >>> ids, windows
    ({b'0123456789abcdef': 100}, Stored(blob=b'w', timer_ms=7))
    """
    if stored is None:
        return {}, None
    blob = stored.blob
    magic, n = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise ValueError("a deduplicated pipeline's bucket state without its ids (magic)")
    at = _HEADER.size
    hashes = blob[at : at + n * HASH_BYTES]
    at += n * HASH_BYTES
    forgets = np.frombuffer(blob, ">i8", n, at).tolist()
    at += n * 8
    ids = {hashes[i * HASH_BYTES : (i + 1) * HASH_BYTES]: f for i, f in enumerate(forgets)}
    if at == len(blob):
        return ids, None
    timer = _INNER_TIMER.unpack_from(blob, at)[0]
    return ids, Stored(blob[at + _INNER_TIMER.size :], None if timer < 0 else timer)


def wrap(ids: dict[bytes, int], inner: Stored | None, timer_ms: int | None) -> Stored | None:
    """The bucket's stored state from its ``ids`` and its windows' ``inner`` state (None when
    both are empty); ``timer_ms``: the bucket's one timer. The ids in hash order, so the same
    ids make the same bytes."""
    if not ids and inner is None:
        return None
    hashes = sorted(ids)
    forgets = np.array([ids[h] for h in hashes], ">i8")
    parts = [_HEADER.pack(MAGIC, len(ids)), b"".join(hashes), forgets.tobytes()]
    if inner is not None:
        t = inner.timer_ms
        parts += [_INNER_TIMER.pack(-1 if t is None else t), inner.blob]
    return Stored(b"".join(parts), timer_ms)


@dataclass(frozen=True)
class Dedup:
    """How a pipeline deduplicates (picklable): its id ``columns``, the rules of its windows,
    its ``horizon`` (None: the windows', :meth:`panes.rules.WindowRules.forget_at`)."""

    columns: tuple[str, ...]
    rules: WindowRules
    horizon: int | None
    keys: tuple[str, ...]
    values: tuple[str, ...]

    @property
    def reason(self) -> str:
        return why.duplicate(self.columns)

    def copies(self, table: pa.Table) -> tuple[list[Copy], Callable[[int], tuple]]:
        """Each row of ``table`` (a bucket's element rows) as :func:`panes.dedup.take` judges
        it, and its :func:`panes.dedup.copy_order` (computed when asked)."""
        keys = [table.column(k).to_pylist() for k in self.keys]
        key_of = keys[0] if len(keys) == 1 else list(zip(*keys, strict=True))
        ids = table.column(DEDUP_ID).to_pylist()
        ts = table.column(TS_US).to_pylist()
        memo: dict[int, int | None] = {}
        forget_at = self.rules.forget_at
        builtin = type(self.rules.window_fn).__module__ == "panes.windowfns"
        values: list[list] = []
        if not builtin:
            values = [table.column(v).to_pylist() for v in self.values]
        out = []
        for i, (t, text) in enumerate(zip(ts, ids, strict=True)):
            if builtin:  # their windows depend on the time only
                f = memo.get(t, -1)
                if f == -1:
                    f = memo[t] = forget_at(t, self.horizon)
            else:
                value = {v: col[i] for v, col in zip(self.values, values, strict=True)}
                f = forget_at(t, self.horizon, value)
            out.append(Copy(None if text is None else id_hash(key_of[i], text), f))
        return out, _Order(table, self.values)

    def split(
        self, table: pa.Table | None, ids: dict[bytes, int], watermark: int
    ) -> tuple[pa.Table | None, pa.Table | None, dict[bytes, int]]:
        """A visit's element rows -> (the rows taken, the duplicates with their reason in
        ``pst_reason``, the ids remembered after the visit); ``ids`` are first forgotten at
        ``watermark``."""
        ids = forget(ids, watermark)
        if table is None or table.num_rows == 0:
            return table, None, ids
        copies, order = self.copies(table)
        duplicate, ids = take(ids, copies, watermark, order)
        if not any(duplicate):
            return table, None, ids
        mask = pa.array(duplicate, pa.bool_())
        dups = table.filter(mask)
        reason = pa.array([self.reason] * dups.num_rows, pa.string())
        at = dups.schema.get_field_index(REJECTED_COLUMNS[2])
        if at < 0:  # (the decoder's blobs hold no reason column)
            dups = dups.append_column(REJECTED_COLUMNS[2], reason)
        else:
            dups = dups.set_column(at, REJECTED_COLUMNS[2], reason)
        kept = table.filter(pc.invert(mask))
        return (kept if kept.num_rows else None), dups, ids


class _Order:
    """:func:`panes.dedup.copy_order` of a table's rows, their columns read on first use."""

    def __init__(self, table: pa.Table, values: tuple[str, ...]) -> None:
        self.table, self.values = table, values
        self._columns: list[list] | None = None

    def __call__(self, i: int) -> tuple:
        if self._columns is None:
            names = (TS_US, *self.values, *REJECTED_COLUMNS[:2])
            self._columns = [self.table.column(c).to_pylist() for c in names]
        ts, *rest = (c[i] for c in self._columns)
        *values, raw, source = rest
        return copy_order(ts, values, raw, source)


def first_forget(ids: dict[bytes, int]) -> int | None:
    """The earliest forget watermark among ``ids`` (None: none)."""
    return min(ids.values()) if ids else None


def sizes(stored: Sequence[Stored]) -> int:
    """The number of ids in deduplicated buckets' ``stored`` states (a measure of state size:
    24 bytes each)."""
    return sum(_HEADER.unpack_from(s.blob)[1] for s in stored)


__all__ = ["MAGIC", "Dedup", "first_forget", "sizes", "unwrap", "wrap"]
