"""Keys as columns: a bundle's or a window table's key columns, and the engine's keys.

The per-key engine names a key by a value: the key column's value, or a tuple of the key
columns' values (:func:`engine_keys`). The columnar engine keeps keys as Arrow columns and
numbers them (:func:`key_ids`) to group and match rows.

>>> import pyarrow as pa
>>> table = pa.table({"k": ["b", "a", "b"]})
>>> ids, firsts = key_ids(table)
>>> ids.tolist(), firsts.tolist(), engine_keys([table.column("k").to_pylist()])
([1, 0, 1], [1, 0], ['b', 'a', 'b'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def engine_keys(columns: Sequence[list]) -> list[Any]:
    """Key columns' values -> engine keys: the one column's values, or tuples of them."""
    return columns[0] if len(columns) == 1 else list(zip(*columns, strict=True))


def key_columns(keys: Sequence[Any], n_keys: int) -> list[list]:
    """Engine keys -> the values of each of their ``n_keys`` key columns (:func:`engine_keys`
    undone)."""
    if n_keys == 1:
        return [list(keys)]
    return [list(c) for c in zip(*keys, strict=True)] if keys else [[] for _ in range(n_keys)]


def key_table(keys: Sequence[Any], fields: Sequence[pa.Field]) -> pa.Table:
    """Engine keys -> a table of their key columns (``fields``)."""
    columns = key_columns(keys, len(fields))
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, fields, strict=True)],
        schema=pa.schema(fields),
    )


def key_ids(keys: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each row's key as an integer (0, 1, ... in the keys' sorted order), and the row of each
    integer's first occurrence."""
    n = keys.num_rows
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = pc.sort_indices(
        keys, sort_keys=[(name, "ascending") for name in keys.column_names]
    ).to_numpy()
    ordered = keys.take(pa.array(order))
    new = np.zeros(n, bool)
    new[0] = True
    for column in ordered.columns:
        values = column.combine_chunks()
        if n > 1:
            differs = pc.not_equal(values.slice(1), values.slice(0, n - 1))
            new[1:] |= differs.to_numpy(zero_copy_only=False).astype(bool)
    rank = np.cumsum(new) - 1
    ids = np.empty(n, np.int64)
    ids[order] = rank
    return ids, order[new]


__all__ = ["engine_keys", "key_columns", "key_ids", "key_table"]
