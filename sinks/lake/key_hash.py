"""The key hash: a stable 64-bit hash of a row's key, by which a large fold splits its work.

``key_hash`` is the first eight bytes of the MD5 digest of the key's text (the key columns' values
as text, joined by the unit separator ``\\x1f``), read as an unsigned big-endian integer and
shifted into the signed 64-bit range (``- 2**63``) so that its order is kept. MD5 because every
engine computes it the same way, now and after an upgrade (Python's ``hashlib`` here, in the
driver and in Spark's tasks; DuckDB's and Spark's ``md5`` would agree): a hash whose value
changed with a library version would send a resumed fold's keys to other pieces.

The view (``current``) stores it in its ``key_hash`` column. A fold too large for its memory
splits the keys into contiguous ranges of the hash (:mod:`sinks.fold.fold_plan`): each piece's MERGE
names its range, and the files a piece writes hold only keys of its range, so the MERGE of
another piece skips them by their statistics.

>>> key_hash(("key-1",))
-6796095066354858877
>>> key_hash(("key-1",)) == key_hash(["key-1"])
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEY_HASH = "key_hash"
"""The view's column of the key hash (int64)."""
SEPARATOR = "\x1f"
OFFSET = 1 << 63
FINE_BITS = 10
FINE_BUCKETS = 1 << FINE_BITS
"""Fine buckets: the hash's top :data:`FINE_BITS` bits; a fold's pieces are runs of them."""


def key_text(values: Sequence[Any]) -> str:
    """The text a key is hashed by: its columns' values as text, joined by ``\\x1f``."""
    return SEPARATOR.join(str(v) for v in values)


def key_hash(values: Sequence[Any]) -> int:
    """The key hash of a key given as its columns' values."""
    digest = hashlib.md5(key_text(values).encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big") - OFFSET


def fine_bucket_start(bucket: int) -> int:
    """The smallest key hash of fine bucket ``bucket`` (``FINE_BUCKETS``: one past the end of
    the hash range, 2**63)."""
    return (bucket << (64 - FINE_BITS)) - OFFSET


def fine_buckets(table: pa.Table | pa.RecordBatch, keys: Sequence[str]) -> np.ndarray:
    """The fine bucket (the hash's top :data:`FINE_BITS` bits) of each row's key."""
    hashes = key_hashes(table, keys).to_numpy().astype(np.uint64)  # (two's complement)
    return ((hashes + np.uint64(OFFSET)) >> np.uint64(64 - FINE_BITS)).astype(np.int64)


def key_texts(table: pa.Table | pa.RecordBatch, keys: Sequence[str]) -> pa.Array:
    """The key text (:func:`key_text`) of each row of ``table``."""
    columns = [pc.cast(table.column(k), pa.string()) for k in keys]
    if len(columns) == 1:
        return columns[0]
    return pc.binary_join_element_wise(*columns, SEPARATOR)


def key_hashes(table: pa.Table | pa.RecordBatch, keys: Sequence[str]) -> pa.Array:
    """The key hash of each row of ``table`` (an int64 array): each distinct key's hashed once
    (``hashlib``), then taken for its rows."""
    if table.num_rows == 0:
        return pa.array([], pa.int64())
    texts = key_texts(table, keys)
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    distinct = pc.unique(texts)
    hashes = np.fromiter(
        (
            int.from_bytes(
                hashlib.md5(t.encode("utf-8"), usedforsecurity=False).digest()[:8], "big"
            )
            - OFFSET
            for t in distinct.to_pylist()
        ),
        np.int64,
        count=len(distinct),
    )
    return pa.array(hashes[pc.index_in(texts, value_set=distinct).to_numpy()])


__all__ = [
    "FINE_BUCKETS",
    "KEY_HASH",
    "fine_buckets",
    "fine_bucket_start",
    "key_hash",
    "key_hashes",
    "key_text",
]
