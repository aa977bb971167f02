"""The state of one key bucket: its keys' engine states as one compressed Arrow table.

The operator keeps one Spark ValueState per key bucket (:mod:`jobs.executor.operator`). Its
``blob`` is an Arrow IPC stream, buffers compressed with zstd, of one row per live key:

=====================  ==========================================================================
column                 what it holds
=====================  ==========================================================================
the key columns        the key's value, in the operator input's types
``state``              the key's :meth:`panes.state.KeyState.to_bytes`
``next_event_us``      the key's next event-time wake-up (model µs; null: none)
``next_processing_us`` its next processing-time wake-up (null: none)
=====================  ==========================================================================

Why this form (``docs/decisions.md``, "A bucket's state: one compressed Arrow table"): a state
call's cost in Spark grows with the bytes it moves (the JVM side copies the value through its own
pickling and RocksDB), and a visit that touches one key of a bucket used to unpickle and pickle
every key of it. Compressed, the bucket is ~30x smaller (the keys' states repeat their shape);
columnar, a visit finds the keys whose wake-up is due with one vectorized comparison and decodes
only the states it touches, and a visit that changed nothing writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from panes.columnar.keys import engine_keys, key_columns

STATE, NEXT_EVENT, NEXT_PROCESSING = "state", "next_event_us", "next_processing_us"
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


class BucketState:
    """The keys of one bucket, as loaded from its ValueState, and the changes of one visit.

    >>> import pyarrow as pa
    >>> bucket = BucketState.load(None, (pa.field("key", pa.string()),))
    >>> bucket.put("a", b"state-a", 10, None); bucket.put("b", b"state-b", 30, None)
    >>> saved = BucketState.load(bucket.save().blob, (pa.field("key", pa.string()),))
    >>> saved.due(watermark=20, processing_time=0), saved.state_of("b"), saved.state_of("c")
    (['a'], b'state-b', None)
    """

    def __init__(self, key_fields: Sequence[pa.Field], table: pa.Table, blob: bytes | None):
        self._key_fields = tuple(key_fields)
        self._table = table
        self._blob = blob  # what was loaded (None: an empty bucket)
        self._rows: dict[Any, int] | None = None  # key -> row of _table, built on first lookup
        self._changed: dict[Any, tuple[bytes, int | None, int | None] | None] = {}

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, blob: bytes | None, key_fields: Sequence[pa.Field]) -> BucketState:
        """The bucket stored as ``blob`` (None: a bucket with no keys yet)."""
        schema = bucket_schema(key_fields)
        if not blob:
            return cls(key_fields, schema.empty_table(), None)
        with pa.ipc.open_stream(blob) as reader:
            return cls(key_fields, reader.read_all(), blob)

    # -- reading ---------------------------------------------------------------------------------

    def all_states(self) -> dict[Any, bytes]:
        """Every key's state bytes as loaded."""
        keys = _keys_of(self._table, len(self._key_fields))
        return dict(zip(keys, self._table.column(STATE).to_pylist(), strict=True))

    @property
    def keys(self) -> int:
        """How many keys the bucket held when loaded."""
        return self._table.num_rows

    def due(self, watermark: int, processing_time: int) -> list[Any]:
        """The keys whose event-time wake-up is at or before ``watermark`` or whose
        processing-time wake-up is at or before ``processing_time`` (in row order)."""
        table = self._table
        if table.num_rows == 0:
            return []
        event = pc.less_equal(table.column(NEXT_EVENT), watermark)
        processing = pc.less_equal(table.column(NEXT_PROCESSING), processing_time)
        mask = pc.fill_null(pc.or_kleene(event, processing), False)
        picked = table.filter(mask)
        return _keys_of(picked, len(self._key_fields))

    def states_of(self, keys: Sequence[Any]) -> list[bytes | None]:
        """The keys' state bytes as loaded (None: the bucket did not hold the key)."""
        if not keys or self._table.num_rows == 0:
            return [None] * len(keys)
        states = self._table.column(STATE)
        if len(self._key_fields) == 1 and self._rows is None:  # one vectorized lookup
            wanted = pa.array(keys, self._key_fields[0].type)
            rows = pc.index_in(wanted, value_set=self._table.column(0)).to_pylist()
        else:
            index = self._index()
            rows = [index.get(k) for k in keys]
        return [None if r is None else states[r].as_py() for r in rows]

    def state_of(self, key: Any) -> bytes | None:
        """One key's state bytes as loaded (None: the bucket did not hold the key)."""
        return self.states_of([key])[0]

    # -- changing --------------------------------------------------------------------------------

    def put(self, key: Any, state: bytes, next_event: int | None, next_processing: int | None):
        """Replace (or add) the key's state and wake-ups."""
        self._changed[key] = (state, next_event, next_processing)

    def remove(self, key: Any) -> None:
        """The key has no state any more."""
        self._changed[key] = None

    def save(self) -> Saved:
        """The bucket with this visit's changes: its blob (None: no key is left), its earliest
        event-time wake-up and whether a key waits for processing time."""
        if not self._changed:
            return _summary(self._table, self._blob)
        schema, kept = self._table.schema, self._table
        if kept.num_rows:  # the rows of changed keys go; their new rows are added below
            if len(self._key_fields) == 1:
                changed = pa.array(list(self._changed), self._key_fields[0].type)
                kept = kept.filter(pc.invert(pc.is_in(kept.column(0), value_set=changed)))
            else:
                index = self._index()
                keep = np.ones(kept.num_rows, dtype=bool)
                keep[[index[k] for k in self._changed if k in index]] = False
                kept = kept.filter(pa.array(keep))
        added = [(k, v) for k, v in self._changed.items() if v is not None]
        table = pa.concat_tables([kept, _rows_table(schema, added)]) if added else kept
        if table.num_rows == 0:
            return Saved(None, None, False)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(table)
        return _summary(table, sink.getvalue().to_pybytes())

    def _index(self) -> dict[Any, int]:
        if self._rows is None:
            keys = _keys_of(self._table, len(self._key_fields))
            self._rows = {k: i for i, k in enumerate(keys)}
        return self._rows


class Saved(NamedTuple):
    """What :meth:`BucketState.save` gives: the blob to store (None: no key is left), the
    bucket's earliest event-time wake-up, and whether a key waits for processing time."""

    blob: bytes | None
    next_event_time: int | None
    polls: bool


def bucket_schema(key_fields: Sequence[pa.Field]) -> pa.Schema:
    """The Arrow schema of a bucket's table (see the module doc)."""
    return pa.schema(
        [
            *key_fields,
            pa.field(STATE, pa.binary(), nullable=False),
            pa.field(NEXT_EVENT, pa.int64()),
            pa.field(NEXT_PROCESSING, pa.int64()),
        ]
    )


def _rows_table(schema: pa.Schema, entries: list[tuple[Any, Any]]) -> pa.Table:
    """``[(key, (state, next event, next processing)), ...]`` as a table of ``schema``."""
    columns = key_columns([k for k, _ in entries], len(schema) - 3)
    values = [v for _, v in entries]
    columns += [[v[0] for v in values], [v[1] for v in values], [v[2] for v in values]]
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )


def _keys_of(table: pa.Table, n_keys: int) -> list[Any]:
    """The engine keys of ``table``'s rows: the key column's values, or tuples of them."""
    return engine_keys([table.column(i).to_pylist() for i in range(n_keys)])


def _summary(table: pa.Table, blob: bytes | None) -> Saved:
    if table.num_rows == 0:
        return Saved(None, None, False)
    earliest = pc.min(table.column(NEXT_EVENT)).as_py()
    polls = table.column(NEXT_PROCESSING).null_count < table.num_rows
    return Saved(blob, earliest, polls)
