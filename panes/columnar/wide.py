"""Integer sums that cannot leave their column: 128 bits, as Arrow's ``decimal128(38, 0)``.

A window's integer sum (``sum(v)``, a mean's sum) adds 64-bit values; Python's integers do not stop
at 64 bits (the per-key engine's), and neither may the columnar engine's accumulators, or a pane
would depend on the engine. Sums of fewer than 2^63 values of 64 bits fit 127 bits, so the columnar
engine keeps them in 128 bits: stored as ``decimal128(38, 0)`` (whose 16 bytes per value are a
little-endian two's-complement integer), held in memory as an ``(n, 2)`` int64 numpy array of the
same bytes (column 0 the low 64 bits, column 1 the high 64 bits, signed), added with a carry. A pane
whose value does not fit its pane-log column is refused where it is written
(:func:`sinks.lake.pane_log.value_out_of_range`).

Lifting's Arrow sums (:mod:`panes.columnar.bundle`) wrap at 64 bits: :func:`exact_sums` gives
them exactly, as int64 where no running sum can leave 64 bits (one ``min_max`` per column finds
it) and as ``decimal128(38, 0)`` otherwise, from the sums of each value's high and low 32 bits.

>>> import pyarrow as pa
>>> big = pairs_of(pa.array([2**62, -5], pa.int64()))
>>> python_ints(add(big, big)), fits_int64(add(big, big)).tolist()
([9223372036854775808, -10], [False, True])
>>> python_ints(pairs_of(decimals(add(big, big))))
[9223372036854775808, -10]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

WIDE = pa.decimal128(38, 0)
"""The stored type of a 128-bit sum."""
_LOW_32 = 0xFFFFFFFF
_INT64_LIMIT = 2**63
_MAX_ROWS = 2**31  # rows whose 32-bit halves still sum within 64 bits
assert sys.byteorder == "little", "decimal128 buffers are read as little-endian int64 pairs"


def pairs_of(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An int64 or ``decimal128(38, 0)`` Arrow array (no nulls) as ``(n, 2)`` int64 pairs."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_decimal(values.type):
        data = np.frombuffer(values.buffers()[1], dtype=np.int64)
        start = values.offset * 2
        return data[start : start + 2 * len(values)].reshape(-1, 2).copy()
    low = values.to_numpy(zero_copy_only=False).astype(np.int64)
    return np.stack([low, low >> 63], axis=1)


def zeros(n: int) -> np.ndarray:
    return np.zeros((n, 2), np.int64)


def decimals(pairs: np.ndarray) -> pa.Array:
    """``pairs`` as a ``decimal128(38, 0)`` array (the stored form)."""
    data = np.ascontiguousarray(pairs, dtype=np.int64)
    return pa.Array.from_buffers(WIDE, len(data), [None, pa.py_buffer(data.tobytes())])


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b``, 128-bit; OverflowError beyond (2^63 values of 64 bits do not get there)."""
    low_a, low_b = a[:, 0].view(np.uint64), b[:, 0].view(np.uint64)
    low = low_a + low_b
    carry = (low < low_a).astype(np.int64)
    with np.errstate(over="ignore"):
        high = a[:, 1] + b[:, 1] + carry
    wrapped = ((a[:, 1] >= 0) == (b[:, 1] >= 0)) & ((high >= 0) != (a[:, 1] >= 0))
    if wrapped.any():
        raise OverflowError("an integer sum beyond 127 bits")
    return np.stack([low.view(np.int64), high], axis=1)


def fits_int64(pairs: np.ndarray) -> np.ndarray:
    """Which values fit 64 bits (their high half is their low half's sign)."""
    return pairs[:, 1] == (pairs[:, 0] >> 63)


def python_ints(pairs: np.ndarray) -> list[int]:
    """The values as Python integers."""
    lows = pairs[:, 0].tolist()
    if fits_int64(pairs).all():
        return lows
    highs = pairs[:, 1].tolist()
    return [(h << 64) | (lo & 0xFFFFFFFFFFFFFFFF) for h, lo in zip(highs, lows, strict=True)]


def python_ints_of(values: pa.Array | pa.ChunkedArray) -> list[Any]:
    """An int64 or ``decimal128(38, 0)`` column (sums: :func:`exact_sums`) as Python integers."""
    if pa.types.is_decimal(values.type):
        return python_ints(pairs_of(values))
    return values.to_pylist()


def exact_sums(table: pa.Table, columns: Sequence[str]) -> tuple[pa.Table, set[str]]:
    """``table`` with, for each of ``columns`` whose running sums could leave 64 bits (its
    largest magnitude times the rows reaches 2^63), its high and low 32 bits as columns
    :func:`split_names` names; and those columns. Their group sums (each within 64 bits for
    fewer than 2^31 rows) make the exact sum: :func:`joined`."""
    split = set()
    for column in columns:
        extremes = pc.min_max(table.column(column))
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        if low is None or max(abs(low), abs(high)) * table.num_rows < _INT64_LIMIT:
            continue
        if table.num_rows >= _MAX_ROWS:
            raise ValueError(f"{table.num_rows} rows in one bucket's visit: too many to sum")
        values = table.column(column)
        high_name, low_name = split_names(column)
        table = table.append_column(high_name, pc.shift_right(values, 32))
        table = table.append_column(low_name, pc.bit_wise_and(values, _LOW_32))
        split.add(column)
    return table, split


def split_names(column: str) -> tuple[str, str]:
    """The columns of ``column``'s high and low 32 bits (:func:`exact_sums`)."""
    return f"pst_high_{column}", f"pst_low_{column}"


def joined(high_sums: pa.Array | pa.ChunkedArray, low_sums: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The exact sums (``decimal128(38, 0)``) from the sums of the high and the low 32 bits."""
    high = pairs_of(high_sums)  # high * 2^32, 128-bit: shift the pair left by 32
    shifted = np.stack(
        [
            (high[:, 0] << 32),
            (high[:, 1] << 32) | (high[:, 0].view(np.uint64) >> 32).view(np.int64),
        ],
        axis=1,
    )
    return decimals(add(shifted, pairs_of(low_sums)))


__all__ = [
    "WIDE",
    "add",
    "decimals",
    "exact_sums",
    "fits_int64",
    "joined",
    "pairs_of",
    "python_ints",
    "python_ints_of",
    "split_names",
    "zeros",
]
