"""Key buckets computed in Python exactly as Spark computes them.

The job groups keys into ``state_buckets`` buckets, ``pmod(xxhash64(key columns...), B)`` in
Spark SQL; a bucket's Spark state holds the engine states of its keys, so a key must land in the
same bucket in every batch and run, whichever side computes it. :class:`KeyBuckets` computes the
same function in Python for keys whose columns are strings or integers (the JSON-lines decoder
of :mod:`jobs.jsonl_decoder` packs rows by bucket before Spark sees them).

Spark's ``xxhash64`` is XXH64 with seed 42, chained over the columns: each non-null column is
hashed with the previous result as the seed; strings as their UTF-8 bytes, ``int`` as 4 and
``bigint`` as 8 little-endian bytes. The result is a signed 64-bit integer, and ``pmod`` maps it
to ``0..B-1`` (Python's ``%`` with a positive divisor is that same floor modulo).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

SPARK_SEED = 42
# declared column type -> how Spark's xxhash64 hashes a value of it
HASHED_AS = {"string": "utf8", "int": "int32", "long": "int64", "bigint": "int64"}
_PACK = {"int32": struct.Struct("<i").pack, "int64": struct.Struct("<q").pack}


def _signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


@dataclass
class KeyBuckets:
    """``bucket(key)`` == Spark's ``pmod(xxhash64(key columns), buckets)``, memoized per key.

    ``types`` are the key columns' declared types (each in :data:`HASHED_AS`); a key is the
    column's value for one key column, else a tuple of them; no value may be null (a valid key
    never is).

    >>> KeyBuckets(("string",), 64).bucket("key-0776") in range(64)
    True
    """

    types: Sequence[str]
    buckets: int
    _memo: dict[Any, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        unknown = [t for t in self.types if t not in HASHED_AS]
        if unknown:
            raise ValueError(f"key types {unknown} have no Python bucket function")
        if self.buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {self.buckets}")
        self._kinds = [HASHED_AS[t] for t in self.types]

    def xxhash64(self, key: Any) -> int:
        """Spark's ``xxhash64`` of the key columns (a signed 64-bit integer)."""
        import xxhash

        values = (key,) if len(self._kinds) == 1 else key
        seed = SPARK_SEED
        for kind, value in zip(self._kinds, values, strict=True):
            data = value.encode("utf-8") if kind == "utf8" else _PACK[kind](value)
            seed = xxhash.xxh64_intdigest(data, seed)
        return _signed(seed)

    def bucket(self, key: Any) -> int:
        got = self._memo.get(key)
        if got is None:
            if len(self._memo) >= 1_000_000:  # a bounded memo: keys repeat, but not forever
                self._memo.clear()
            got = self._memo[key] = self.xxhash64(key) % self.buckets
        return got

    def buckets_of(self, keys: Iterable[Any]) -> list[int]:
        """The bucket of each key, in order."""
        bucket = self.bucket
        return [bucket(k) for k in keys]


# -- spreading buckets over Spark's shuffle partitions ------------------------------------------

_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def spark_partition_of_int(value: int, partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives an ``int`` grouping value:
    ``pmod(murmur3_32(value, seed 42), partitions)`` (Spark's ``hash()``)."""
    k1 = (value & _M32) * 0xCC9E2D51 & _M32
    k1 = _rotl32(k1, 15) * 0x1B873593 & _M32
    h1 = SPARK_SEED ^ k1
    h1 = (_rotl32(h1, 13) * 5 + 0xE6546B64) & _M32
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    signed = h1 - (1 << 32) if h1 >= 1 << 31 else h1
    return signed % partitions


def balanced_bucket_ids(buckets: int, partitions: int) -> tuple[int, ...]:
    """Grouping values for buckets ``0..buckets-1`` that Spark spreads evenly over
    ``partitions`` shuffle partitions: bucket ``b`` gets the smallest unused non-negative int
    whose partition is ``b % partitions``.

    The values 0..63 themselves land 27/37 on two partitions (Murmur3 of small ints is skewed),
    and the busier task sets the pace of every operator stage.

    >>> ids = balanced_bucket_ids(64, 2)
    >>> sorted(spark_partition_of_int(i, 2) for i in ids).count(0)
    32
    """
    ids: list[int] = []
    candidate = [0] * partitions  # next int to try, per partition
    for b in range(buckets):
        p = b % partitions
        i = candidate[p]
        while spark_partition_of_int(i, partitions) != p:
            i += 1
        ids.append(i)
        candidate[p] = i + 1
    return tuple(ids)
