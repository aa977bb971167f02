"""The column types of a pipeline configuration (``source.schema``) and what each is in Spark SQL,
Arrow and DuckDB: the plain types in one table, :data:`TYPES`, and the parametric
``decimal(p,s)``; :func:`column_type` reads any type name (the one parser of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, localcontext

import pyarrow as pa

from panes.combiners import EXACT_DECIMALS
from sinks.lake.lake_format import TIMESTAMP_TYPE


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

    @property
    def name(self) -> str:
        """The canonical configuration name (``long`` for ``bigint``, ``decimal(10,0)`` for
        ``decimal``)."""
        return next((n for n, t in TYPES.items() if t == self), self.spark)

    @property
    def text_form(self) -> str | None:
        """The regular expression (the whole text, RE2 and Python alike) a text value of this
        type must match to be read exactly, for the types whose casts are lenient (a decimal's
        rounds surplus digits, a date's takes ``2024-1-2``); None: the cast's own reading."""
        if pa.types.is_decimal(self.arrow):
            return decimal_form(self.arrow.precision, self.arrow.scale)
        if pa.types.is_date(self.arrow):
            return DATE_FORM
        return None


TYPES: dict[str, ColumnType] = {
    "string": ColumnType("string", pa.string(), "VARCHAR", False, "string"),
    "int": ColumnType("int", pa.int32(), "INTEGER", True, "int32"),
    "long": ColumnType("bigint", pa.int64(), "BIGINT", True, "int64"),
    "bigint": ColumnType("bigint", pa.int64(), "BIGINT", True, "int64"),
    "double": ColumnType("double", pa.float64(), "DOUBLE", True, "float64"),
    "float": ColumnType("float", pa.float32(), "FLOAT", True, None),
    "boolean": ColumnType("boolean", pa.bool_(), "BOOLEAN", False, "bool"),
    "timestamp": ColumnType("timestamp", TIMESTAMP_TYPE, "VARCHAR", False, None),
    "date": ColumnType("date", pa.date32(), "DATE", False, None),
}
KNOWN = f"{', '.join(TYPES)}, decimal(p,s) (1 <= p <= 38, 0 <= s <= p; decimal: decimal(10,0))"
"""The type names a schema takes, as messages list them."""
INTEGRAL = frozenset({"int", "long", "bigint"})
MAX_PRECISION = 38
_DECIMAL = re.compile(r"decimal(?:\(\s*(\d+)\s*,\s*(\d+)\s*\))?")
DATE_FORM = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
"""A date as text: ``YYYY-MM-DD`` (and a real day of the calendar)."""


def decimal_type(precision: int, scale: int) -> ColumnType:
    """The column type ``decimal(precision,scale)``; ValueError outside 1 <= p <= 38,
    0 <= s <= p.

    >>> decimal_type(18, 2).arrow, decimal_type(18, 2).duckdb
    (Decimal128Type(decimal128(18, 2)), 'DECIMAL(18,2)')
    """
    if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= precision:
        raise ValueError(
            f"decimal({precision},{scale}): the precision is 1 to {MAX_PRECISION}, the scale "
            "0 to the precision"
        )
    text = f"decimal({precision},{scale})"
    return ColumnType(text, pa.decimal128(precision, scale), text.upper(), True, None)


def column_type(name: str) -> ColumnType:
    """The column type of a configuration type name (ValueError, one line, for another name).

    >>> column_type("bigint").name, column_type("decimal").name, column_type("decimal(18, 2)").spark
    ('long', 'decimal(10,0)', 'decimal(18,2)')
    """
    found = TYPES.get(name)
    if found is not None:
        return found
    match = _DECIMAL.fullmatch(name.strip()) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"unknown type {name!r}; known: {KNOWN}")
    if match.group(1) is None:
        return decimal_type(10, 0)  # Spark's decimal
    return decimal_type(int(match.group(1)), int(match.group(2)))


def is_column_type(name: object) -> bool:
    """Whether ``name`` is a configuration type name (:func:`column_type` reads it)."""
    try:
        column_type(name)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False
    return True


def of_arrow(type_: pa.DataType) -> str | None:
    """The canonical configuration type name of an Arrow type (None: no configuration type).

    >>> of_arrow(pa.decimal128(18, 2)), of_arrow(pa.int64()), of_arrow(pa.binary())
    ('decimal(18,2)', 'long', None)
    """
    if pa.types.is_decimal128(type_):
        return decimal_type(type_.precision, type_.scale).name
    return next((n for n, t in TYPES.items() if t.arrow == type_ and n != "bigint"), None)


def decimal_form(precision: int, scale: int) -> str:
    """The text of a ``decimal(precision,scale)`` value read exactly (the whole text): an
    optional minus, digits, optionally a point and digits (no exponent), at most
    ``precision - scale`` digits before the point besides leading zeros and at most ``scale``
    after it besides trailing zeros: a value with more is refused, never rounded.

    >>> [bool(re.fullmatch(decimal_form(4, 2), t)) for t in ("12.30", "-012.3000", "1.234", "123")]
    [True, True, False, False]
    """
    whole = f"0*[0-9]{{1,{precision - scale}}}" if precision > scale else "0+"
    fraction = f"[0-9]{{1,{scale}}}0*" if scale else "0+"
    return f"-?{whole}(\\.{fraction})?"


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
        for part in split_top_level(type_name[7:-1]):
            name, _, inner = part.partition(":")
            fields.append(pa.field(name.strip(), arrow_type(inner)))
        return pa.struct(fields)
    if type_name in OUTPUT_ONLY:
        return OUTPUT_ONLY[type_name]
    return column_type(type_name).arrow


def is_struct_type(type_name: str) -> bool:
    """Whether ``type_name`` is a struct type (a sketch aggregate's output,
    ``struct<estimate: long, sketch: binary>``) that :func:`arrow_type` reads.

    >>> is_struct_type("struct<estimate: long, sketch: binary>"), is_struct_type("long")
    (True, False)
    """
    if not isinstance(type_name, str) or not type_name.strip().startswith("struct<"):
        return False
    try:
        arrow_type(type_name)
    except ValueError:
        return False
    return True


def type_name(type_: pa.DataType) -> str | None:
    """The type name of an Arrow type that :func:`arrow_type` reads back: a configuration
    type's canonical name, ``binary``, ``list<...>`` or ``struct<name: type, ...>`` (None: none).

    >>> type_name(arrow_type("struct<quantiles: list<double>, sketch: binary>"))
    'struct<quantiles: list<double>, sketch: binary>'
    """
    if pa.types.is_struct(type_):
        fields = [(f.name, type_name(f.type)) for f in type_]
        if any(t is None for _, t in fields):
            return None
        return "struct<" + ", ".join(f"{n}: {t}" for n, t in fields) + ">"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        item = type_name(type_.value_type)
        return None if item is None else f"list<{item}>"
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return "binary"
    return of_arrow(type_)


def spark_type(type_name: str) -> str:
    """The Spark SQL type of a configuration type name or of an aggregate's output type
    (``list<...>`` as ``array<...>``, ``struct<...>`` field by field, ``binary``).

    >>> spark_type("struct<estimate: long, sketch: binary>")
    'struct<`estimate`: bigint, `sketch`: binary>'
    """
    type_name = type_name.strip()
    if type_name.startswith("list<") and type_name.endswith(">"):
        return f"array<{spark_type(type_name[5:-1])}>"
    if type_name.startswith("struct<") and type_name.endswith(">"):
        fields = []
        for part in split_top_level(type_name[7:-1]):
            name, _, inner = part.partition(":")
            fields.append(f"`{name.strip()}`: {spark_type(inner)}")
        return "struct<" + ", ".join(fields) + ">"
    if type_name in OUTPUT_ONLY:
        return type_name
    return column_type(type_name).spark


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside angle brackets and parentheses.

    >>> split_top_level("a:decimal(18,2),u:struct<estimate: long, sketch: binary>")
    ['a:decimal(18,2)', 'u:struct<estimate: long, sketch: binary>']
    """
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def sample_value(type_: pa.DataType) -> object:
    """A Python value of a column of Arrow type ``type_``, as the engines hand it to a
    combiner (what ``to_pylist`` gives): a probe's input (None for a type it has none for).

    >>> sample_value(pa.decimal128(18, 2)), sample_value(pa.list_(pa.int64()))
    (Decimal('1.00'), [1])
    """
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "a"
    if pa.types.is_boolean(type_):
        return True
    if pa.types.is_integer(type_):
        return 1
    if pa.types.is_floating(type_):
        return 1.5
    if pa.types.is_decimal(type_):
        return Decimal(1).quantize(Decimal(1).scaleb(-type_.scale))
    if pa.types.is_date(type_) or pa.types.is_timestamp(type_):
        return (
            pa.scalar(0, pa.int32() if pa.types.is_date(type_) else pa.int64()).cast(type_).as_py()
        )
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [sample_value(type_.value_type)]
    return None


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
    """Whether ``value`` is an integer that a column of ``type_`` (an integer type) cannot hold,
    or a ``Decimal`` that a decimal column cannot hold exactly (more digits than its precision,
    or than its scale after the point).

    >>> [beyond_range(Decimal(v), pa.decimal128(4, 2)) for v in ("99.99", "100.00", "0.001")]
    [False, True, True]
    """
    if pa.types.is_decimal(type_) and isinstance(value, Decimal):
        if not value.is_finite():
            return True
        with localcontext(EXACT_DECIMALS):
            scaled = value.scaleb(type_.scale)
            return scaled != scaled.to_integral_value() or abs(scaled) >= 10**type_.precision
    bounds = integer_range(type_)
    if bounds is None or not isinstance(value, int):
        return False
    return not bounds[0] <= value <= bounds[1]


def column_text(type_: pa.DataType) -> str:
    """A column of Arrow type ``type_`` as refusals name it (``64-bit integer``,
    ``decimal(38,2)``).

    >>> column_text(pa.int64()), column_text(pa.decimal128(38, 2))
    ('64-bit integer', 'decimal(38,2)')
    """
    if pa.types.is_decimal(type_):
        return f"decimal({type_.precision},{type_.scale})"
    return f"{type_.bit_width}-bit integer"
