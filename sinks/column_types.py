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
    file's column is read as (timestamps as text, parsed afterwards) and whether it is numeric."""

    spark: str
    arrow: pa.DataType
    duckdb: str
    numeric: bool


TYPES: dict[str, ColumnType] = {
    "string": ColumnType("string", pa.string(), "VARCHAR", False),
    "int": ColumnType("int", pa.int32(), "INTEGER", True),
    "long": ColumnType("bigint", pa.int64(), "BIGINT", True),
    "bigint": ColumnType("bigint", pa.int64(), "BIGINT", True),
    "double": ColumnType("double", pa.float64(), "DOUBLE", True),
    "float": ColumnType("float", pa.float32(), "FLOAT", True),
    "boolean": ColumnType("boolean", pa.bool_(), "BOOLEAN", False),
    "timestamp": ColumnType("timestamp", TIMESTAMP_TYPE, "VARCHAR", False),
}

# name -> (Spark SQL type name, numeric?)
COLUMN_TYPES: dict[str, tuple[str, bool]] = {n: (t.spark, t.numeric) for n, t in TYPES.items()}
INTEGRAL = frozenset({"int", "long", "bigint"})


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type of a configuration type name, or of an aggregate's ``list<name>``."""
    if type_name.startswith("list<") and type_name.endswith(">"):
        return pa.list_(arrow_type(type_name[5:-1]))
    return TYPES[type_name].arrow
