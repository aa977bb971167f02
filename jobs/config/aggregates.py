"""The ``[aggregates]`` table of a pipeline's configuration: its named aggregates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobs.config.values import PipelineConfigError
from panes.combiners import BUILTINS, CombineFn, fields_of
from panes.sketches import MergeSketches, SketchFn
from sinks.column_types import COLUMN_TYPES, INTEGRAL, TYPES


@dataclass(frozen=True)
class Aggregate:
    """A named aggregate of the pipeline (``watched = "sum(seconds)"``); ``str(fn)`` is its
    text (``sum(seconds)``)."""

    name: str
    fn: CombineFn

    @property
    def column(self) -> str | None:
        """The source column a built-in reads (None: ``count()``, or a combiner of your own)."""
        column = getattr(self.fn, "field", None)
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
        if isinstance(self.fn, SketchFn):
            return sketch_type(where, self.fn, types)
        if type(self.fn) not in BUILTINS.values():
            return _declared_type(where, self.fn)
        kind = getattr(type(self.fn), "name", None)  # the built-ins' SQL name (panes.combiners)
        if kind == "count":
            return "long"
        col = self.column
        if kind not in ("sum", "mean", "min", "max", "to_list") or col is None:
            raise PipelineConfigError(where, f"unsupported aggregate {self.fn!r}")
        typ = types[col]
        numeric = COLUMN_TYPES[typ][1]
        if kind in ("sum", "mean") and not numeric:
            raise PipelineConfigError(where, f"{kind}() needs a numeric column, {col!r} is {typ}")
        if kind == "mean":
            return "double"
        if kind == "sum":
            return "long" if typ in INTEGRAL else "double"
        if kind in ("min", "max"):
            return {"int": "long", "float": "double"}.get(typ, typ)
        return f"list<{typ}>"


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
        if not COLUMN_TYPES[typ][1]:
            raise PipelineConfigError(
                where, f"{fn.name}() needs a numeric column, {col!r} is {typ}"
            )
        return _KLL_TYPES[fn.name]
    if typ not in ("string", *INTEGRAL):
        raise PipelineConfigError(
            where, f"{fn.name}() counts strings or integers, column {col!r} is {typ}"
        )
    item = "string" if typ == "string" else "long"
    return f"struct<items: list<struct<item: {item}, count: long>>, sketch: binary>"


def _declared_type(where: str, fn: CombineFn) -> str:
    """The schema type name of a combiner of your own's declared ``output_type`` (a type name,
    a ``list<name>``, or an Arrow type of one)."""
    declared = fn.output_type
    if isinstance(declared, str):
        inner = declared[5:-1] if declared.startswith("list<") and declared.endswith(">") else None
        if declared in TYPES or inner in TYPES:
            return declared
    else:
        for name, column_type in TYPES.items():
            if declared is not None and column_type.arrow == declared:
                return name
        item = getattr(declared, "value_type", None)
        for name, column_type in TYPES.items():
            if item is not None and column_type.arrow == item:
                return f"list<{name}>"
    raise PipelineConfigError(
        where,
        f"{fn!r} is not a built-in aggregate: declare its output_type, one of "
        f"{', '.join(TYPES)} (or list<...> of one), or an Arrow type of one; got {declared!r}",
    )
