"""The column types of a pipeline configuration (``source.schema``) and what each is in Spark SQL,
Arrow and DuckDB: one table, :data:`TYPES`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from sinks.lake_format import TIMESTAMP_TYPE


@dataclass(frozen=True)
class ColumnType:
    """One configuration type name: its Spark SQL type, its Arrow type, the DuckDB type a landing
    file's column is read as (timestamps as text, parsed afterwards), whether it is numeric, and
    the Arrow type name Arrow's JSON reader must produce for a value to equal Spark's reading of
    it (None: the job's JSON-lines decoder leaves such columns to Spark)."""

    spark: str
    arrow: pa.DataType
    duckdb: str
    numeric: bool
    arrow_json: str | None


TYPES: dict[str, ColumnType] = {
    "string": ColumnType("string", pa.string(), "VARCHAR", False, "string"),
    "int": ColumnType("int", pa.int32(), "INTEGER", True, "int32"),
    "long": ColumnType("bigint", pa.int64(), "BIGINT", True, "int64"),
    "bigint": ColumnType("bigint", pa.int64(), "BIGINT", True, "int64"),
    "double": ColumnType("double", pa.float64(), "DOUBLE", True, "float64"),
    "float": ColumnType("float", pa.float32(), "FLOAT", True, None),
    "boolean": ColumnType("boolean", pa.bool_(), "BOOLEAN", False, "bool"),
    "timestamp": ColumnType("timestamp", TIMESTAMP_TYPE, "VARCHAR", False, None),
}

# name -> (Spark SQL type name, numeric?)
COLUMN_TYPES: dict[str, tuple[str, bool]] = {n: (t.spark, t.numeric) for n, t in TYPES.items()}
INTEGRAL = frozenset({"int", "long", "bigint"})
# name -> Arrow type name of the JSON reader, for the types the JSON-lines decoder reads itself
ARROW_JSON_TYPES: dict[str, str] = {n: t.arrow_json for n, t in TYPES.items() if t.arrow_json}


OUTPUT_ONLY: dict[str, pa.DataType] = {"binary": pa.binary()}
"""Types an aggregate's output may hold but a source column may not (a sketch's bytes)."""


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type of a configuration type name, or of an aggregate's output type:
    ``list<name>``, ``binary`` and ``struct<field: type, ...>`` (a sketch aggregate's).

    >>> arrow_type("struct<estimate: long, sketch: binary>")
    StructType(struct<estimate: int64, sketch: binary>)
    """
    type_name = type_name.strip()
    if type_name.startswith("list<") and type_name.endswith(">"):
        return pa.list_(arrow_type(type_name[5:-1]))
    if type_name.startswith("struct<") and type_name.endswith(">"):
        fields = []
        for part in _top_level(type_name[7:-1]):
            name, _, inner = part.partition(":")
            fields.append(pa.field(name.strip(), arrow_type(inner)))
        return pa.struct(fields)
    if type_name in OUTPUT_ONLY:
        return OUTPUT_ONLY[type_name]
    return TYPES[type_name].arrow


def _top_level(text: str) -> list[str]:
    """``text`` split at the commas outside angle brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def integer_range(type_: pa.DataType) -> tuple[int, int] | None:
    """The smallest and the largest value of an Arrow integer type (None: not an integer type).
    The one rule for every integer the lake writes from a computation (a pane's value, a folded
    window's): it fits its column, or the write stops naming it (:func:`beyond_range`)."""
    if not pa.types.is_integer(type_):
        return None
    bits = type_.bit_width
    if pa.types.is_unsigned_integer(type_):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def beyond_range(value: object, type_: pa.DataType) -> bool:
    """Whether ``value`` is an integer that a column of ``type_`` (an integer type) cannot hold."""
    bounds = integer_range(type_)
    if bounds is None or not isinstance(value, int):
        return False
    return not bounds[0] <= value <= bounds[1]
