"""A condition (:mod:`panes.conditions`) rendered in Arrow compute: its value for each row of a
table, with SQL's three-valued logic (null: unknown; Kleene's ``and``/``or``). Here and not in
:mod:`panes.conditions` because the model imports pyarrow only in its columnar engine.

>>> import pyarrow as pa
>>> from panes.conditions import parse_condition
>>> t = pa.table({"status": ["error", "ok", None], "n": [1, 5, 7]})
>>> arrow_flag(parse_condition("status = 'error' or n > 4"), t).to_pylist()
[True, True, True]
>>> arrow_flag(parse_condition("status = 'error' and n > 4"), t).to_pylist()
[False, False, None]
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from panes.conditions import And, Comparison, Condition, In, IsNull, Not, Or

_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _scalar(value: Any, column: pa.ChunkedArray | pa.Array) -> pa.Scalar:
    """``value`` as a scalar comparable with ``column`` (an int against a float column as a
    float, as SQL widens it)."""
    if isinstance(value, bool):
        return pa.scalar(value, pa.bool_())
    if isinstance(value, str):
        return pa.scalar(value, pa.string())
    if isinstance(value, float) or pa.types.is_floating(column.type):
        return pa.scalar(float(value), pa.float64())
    return pa.scalar(value, pa.int64())


def arrow_flag(condition: Condition, table: pa.Table | pa.RecordBatch) -> pa.Array:
    """The condition's value (boolean, null where unknown) for each row of ``table``, which
    holds the columns it reads."""

    def value(c: Condition) -> Any:
        if isinstance(c, Comparison):
            column = table.column(c.column)
            return _COMPARE[c.op](column, _scalar(c.value, column))
        if isinstance(c, In):
            column = table.column(c.column)
            hits = [pc.equal(column, _scalar(v, column)) for v in c.values]
            found = hits[0]
            for hit in hits[1:]:
                found = pc.or_kleene(found, hit)
            return pc.invert(found) if c.negated else found
        if isinstance(c, IsNull):
            column = table.column(c.column)
            return pc.is_valid(column) if c.negated else pc.is_null(column)
        if isinstance(c, Not):
            return pc.invert(value(c.operand))
        if isinstance(c, And | Or):
            join = pc.and_kleene if isinstance(c, And) else pc.or_kleene
            out = value(c.operands[0])
            for operand in c.operands[1:]:
                out = join(out, value(operand))
            return out
        raise TypeError(f"not a condition: {c!r}")

    out = value(condition)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks() if out.num_chunks != 1 else out.chunk(0)
    return pc.cast(out, pa.bool_())
