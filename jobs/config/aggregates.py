"""The ``[aggregates]`` table of a pipeline's configuration: its named aggregates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from jobs.config.values import PipelineConfigError
from panes.combine_fn import text_of
from panes.combiners import BUILTINS, CombineFn, Filtered, fields_of, unfiltered
from panes.conditions import literal_kinds
from panes.sketches import MergeSketches, SketchFn
from sinks.lake import INTEGRAL, KNOWN, column_type, is_column_type, is_struct_type, of_arrow


@dataclass(frozen=True)
class Aggregate:
    """A named aggregate of the pipeline (``watched = "sum(seconds)"``); ``str(fn)`` is its
    text (``sum(seconds)``)."""

    name: str
    fn: CombineFn

    @property
    def column(self) -> str | None:
        """The source column a built-in reads (None: ``count()``, or a combiner of your own); a
        filtered built-in's is its inner one's."""
        column = getattr(unfiltered(self.fn), "field", None)
        return column if isinstance(column, str) else None

    @property
    def columns(self) -> tuple[str, ...]:
        """The source columns it reads (:func:`panes.combiners.fields_of`)."""
        return fields_of(self.fn)

    def output_type(self, types: Mapping[str, str]) -> str:
        """Its output column type, given the source's column types; refuses (naming
        ``aggregates.<name>``) an aggregate the column's type does not support."""
        where = f"aggregates.{self.name}"
        for read in self.columns:
            if read not in types:
                raise PipelineConfigError(
                    where, f"column {read!r} is not in source.schema ({', '.join(types)})"
                )
        fn = unfiltered(self.fn)  # a filtered aggregate's output is its inner one's
        merged = fn.field if isinstance(fn, MergeSketches) else None
        sketches = [c for c in self.columns if is_struct_type(types[c]) and c != merged]
        if sketches:
            raise PipelineConfigError(
                where,
                f"{text_of(self.fn)} reads {sketches[0]!r}, an upstream's sketch column "
                f"({types[sketches[0]]}): only merge({sketches[0]}) reads it, e.g. "
                f"approx_count_distinct(merge({sketches[0]})), whose accumulator withdraws "
                "a retracted sketch exactly",
            )
        if isinstance(self.fn, Filtered):
            _check_condition(where, self.fn, types)
        if isinstance(fn, SketchFn):
            return sketch_type(where, fn, types)
        if type(fn) not in BUILTINS.values():
            return _declared_type(where, fn)
        kind = getattr(type(fn), "name", None)  # the built-ins' SQL name (panes.combiners)
        if kind == "count":
            return "long"
        col = self.column
        if kind in ("max_by", "min_by", "first", "last"):
            return _picked_type(where, kind, fields_of(fn), types)
        if kind not in ("sum", "mean", "min", "max", "to_list") or col is None:
            raise PipelineConfigError(where, f"unsupported aggregate {fn!r}")
        typ = types[col]
        of_column = column_type(typ)
        if kind in ("sum", "mean") and not of_column.numeric:
            raise PipelineConfigError(where, f"{kind}() needs a numeric column, {col!r} is {typ}")
        scale = getattr(of_column.arrow, "scale", None)  # a decimal's
        if kind == "mean":
            return "double"  # of decimals too: their exact sum over the count, rounded once
        if kind == "sum":
            if scale is not None:  # as Spark's sum: exact, widened to 38 digits
                return f"decimal(38,{scale})"
            return "long" if typ in INTEGRAL else "double"
        if kind in ("min", "max"):
            return {"int": "long", "float": "double"}.get(typ, typ)
        return f"list<{typ}>"


# Types a picked value and its ordering column may have: their accumulator (ordering, value) is
# folded from JSON (discarding mode), which holds these exactly.
_PICKABLE = ("string", "int", "long", "bigint", "double", "float", "boolean")


def _picked_type(where: str, kind: str, columns: tuple[str, ...], types: Mapping[str, str]) -> str:
    """The output type of ``max_by``, ``min_by``, ``first`` and ``last``: their value column's
    (``int`` as ``long``, ``float`` as ``double``, as min and max)."""
    if not columns:
        raise PipelineConfigError(where, f"{kind}() needs the column whose value it picks")
    for i, col in enumerate(columns):
        typ = types[col]
        if typ not in _PICKABLE:
            role = "orders the elements" if i else "is picked"
            raise PipelineConfigError(
                where,
                f"{kind}() of {col!r}: a {typ} column cannot be the one that {role} (one of "
                f"{', '.join(_PICKABLE)})",
            )
    return {"int": "long", "float": "double"}.get(types[columns[0]], types[columns[0]])


_QUANTILES = "struct<quantiles: list<double>, sketch: binary>"
_KLL_TYPES = {
    "approx_percentile": "struct<quantile: double, sketch: binary>",
    "approx_quantiles": _QUANTILES,
}


def sketch_type(where: str, fn: CombineFn, types: Mapping[str, str]) -> str:
    """The output type of a sketch aggregate (:mod:`panes.sketches`) over its column: one struct
    of the answer and the sketch's bytes; refuses a column type the sketch does not take.

    >>> from panes.combiners import approx_percentile
    >>> sketch_type("aggregates.p95", approx_percentile("ms", 0.95), {"ms": "int"})
    'struct<quantile: double, sketch: binary>'
    """
    assert isinstance(fn, SketchFn)
    col = fn.field
    if col is None:
        raise PipelineConfigError(where, f"{fn!r} needs a column, e.g. {fn.name}(user_id, ...)")
    typ = types[col]
    if isinstance(fn, MergeSketches):  # an upstream's sketch column: the same sketch, merged
        hll = "struct<estimate: long, sketch: binary>"
        kll = ("struct<quantile: double, sketch: binary>", _QUANTILES)
        wanted = (hll,) if fn.name == "approx_count_distinct" else kll
        if typ not in wanted:
            raise PipelineConfigError(
                where,
                f"{fn!r} merges sketches of a column of type {' or '.join(wanted)}, "
                f"{col!r} is {typ}",
            )
        return hll if fn.name == "approx_count_distinct" else _KLL_TYPES[fn.name]
    if fn.name == "approx_count_distinct":
        if typ not in ("string", *INTEGRAL):
            raise PipelineConfigError(
                where, f"{fn.name}() counts strings or integers, column {col!r} is {typ}"
            )
        return "struct<estimate: long, sketch: binary>"
    if fn.name in ("approx_quantiles", "approx_percentile"):
        of_column = column_type(typ)
        if not of_column.numeric or getattr(of_column.arrow, "scale", None) is not None:
            raise PipelineConfigError(
                where, f"{fn.name}() needs an integer or floating-point column, {col!r} is {typ}"
            )
        return _KLL_TYPES[fn.name]
    if typ not in ("string", *INTEGRAL):
        raise PipelineConfigError(
            where, f"{fn.name}() counts strings or integers, column {col!r} is {typ}"
        )
    item = "string" if typ == "string" else "long"
    return f"struct<items: list<struct<item: {item}, count: long>>, sketch: binary>"


_LITERAL_KINDS = {  # a column's type -> the kinds of literal it compares with
    **dict.fromkeys(("int", "long", "bigint", "double", "float"), "number"),
    "string": "text",
    "boolean": "boolean",
}


def _check_condition(where: str, fn: Filtered, types: Mapping[str, str]) -> None:
    """Refuse a condition comparing a column with a literal of another kind (a number for a
    ``string`` column, text for a ``long``), or reading a ``timestamp`` column (not yet: its
    value is an instant in the tagger and text in the raw record)."""
    for column, kinds in literal_kinds(fn.condition).items():
        wanted = _LITERAL_KINDS.get(types[column])
        if wanted is None:
            raise PipelineConfigError(
                where, f"the filter reads column {column!r} ({types[column]}): not supported"
            )
        for kind in kinds:
            if kind != wanted:
                raise PipelineConfigError(
                    where,
                    f"the filter compares column {column!r} ({types[column]}) with a {kind} "
                    f"literal; it takes {wanted} literals",
                )


def _declared_type(where: str, fn: CombineFn) -> str:
    """The schema type name of a combiner of your own's declared ``output_type`` (a type name,
    a ``list<name>``, or an Arrow type of one)."""
    declared = fn.output_type
    if isinstance(declared, str):
        inner = declared[5:-1] if declared.startswith("list<") and declared.endswith(">") else None
        if inner is not None and is_column_type(inner):
            return f"list<{column_type(inner).name}>"
        if is_column_type(declared):
            return column_type(declared).name
    elif isinstance(declared, pa.DataType):
        name = of_arrow(declared)
        if name is not None:
            return name
        item = getattr(declared, "value_type", None)
        name = None if item is None else of_arrow(item)
        if name is not None:
            return f"list<{name}>"
    raise PipelineConfigError(
        where,
        f"{text_of(fn)} is not a built-in aggregate: declare its output_type, one of "
        f"{KNOWN} (or list<...> of one), or an Arrow type of one; got {declared!r}",
    )
