"""The columns a Python data source of panestore reads, as a data source option.

Spark hands a data source its options as text: the driver writes the columns as
``name:type,...`` (configuration types, :mod:`sinks.column_types`) and the source reads them
back, for its Spark schema and its Arrow reads.

>>> decode_columns(encode_columns([("user", "string"), ("n", "long")]))
[('user', 'string'), ('n', 'long')]
>>> spark_columns([("user", "string"), ("n", "long")])
['`user` string', '`n` bigint']
"""

from __future__ import annotations

from collections.abc import Sequence

from sinks.column_types import COLUMN_TYPES


def encode_columns(columns: Sequence[tuple[str, str]]) -> str:
    """``columns`` (name, configuration type) as the option's text."""
    return ",".join(f"{name}:{typ}" for name, typ in columns)


def decode_columns(text: str) -> list[tuple[str, str]]:
    """The (name, configuration type) pairs of the option's text."""
    pairs = (item.split(":", 1) for item in text.split(","))
    return [(name, typ) for name, typ in pairs]


def spark_columns(columns: Sequence[tuple[str, str]]) -> list[str]:
    """``columns`` as the column definitions of a Spark DDL schema."""
    return [f"`{name}` {COLUMN_TYPES[typ][0]}" for name, typ in columns]
