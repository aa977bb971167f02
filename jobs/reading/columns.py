"""The columns a Python data source of panestore reads, as a data source option.

Spark hands a data source its options as text: the driver writes the columns as
``name:type,...`` (configuration types, :mod:`sinks.lake.column_types`) and the source reads them
back, for its Spark schema and its Arrow reads (:class:`ColumnsDataSource`, the base of
panestore's data sources).

>>> decode_columns(encode_columns([("user", "string"), ("x", "decimal(18,2)")]))
[('user', 'string'), ('x', 'decimal(18,2)')]
>>> decode_columns(encode_columns([("users", "struct<estimate: long, sketch: binary>")]))
[('users', 'struct<estimate: long, sketch: binary>')]
>>> spark_columns([("user", "string"), ("n", "long")])
['`user` string', '`n` bigint']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

try:  # pyspark is optional at import time (the pure test suite runs without it)
    from pyspark.sql.datasource import DataSource
except ImportError:  # pragma: no cover - exercised only without pyspark
    DataSource = object  # type: ignore[assignment,misc]  # a stand-in so that the module imports

from sinks.lake import spark_type, split_top_level


def encode_columns(columns: Sequence[tuple[str, str]]) -> str:
    """``columns`` (name, configuration type) as the option's text."""
    return ",".join(f"{name}:{typ}" for name, typ in columns)


def decode_columns(text: str) -> list[tuple[str, str]]:
    """The (name, configuration type) pairs of the option's text."""
    items = split_top_level(text)  # not the comma of decimal(p,s) or of a struct
    pairs = (item.split(":", 1) for item in items)
    return [(name, typ) for name, typ in pairs]


def spark_columns(columns: Sequence[tuple[str, str]]) -> list[str]:
    """``columns`` as the column definitions of a Spark DDL schema."""
    return [f"`{name}` {spark_type(typ)}" for name, typ in columns]


class ColumnsDataSource(DataSource):
    """A panestore data source: registered as :attr:`format_name`, reading the columns of its
    ``columns`` option (:func:`encode_columns`) and the :meth:`extra_columns` it adds."""

    format_name: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def columns(self) -> list[tuple[str, str]]:
        """The (name, configuration type) pairs of the ``columns`` option."""
        return decode_columns(self.options["columns"])

    def extra_columns(self) -> list[str]:
        """Spark DDL of the columns the source adds after :meth:`columns`."""
        return []

    def schema(self) -> str:
        return ", ".join([*spark_columns(self.columns()), *self.extra_columns()])
