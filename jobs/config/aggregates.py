"""The ``[aggregates]`` table of a pipeline's configuration: its named aggregates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobs.config.values import PipelineConfigError
from panes.combiners import BUILTINS, CombineFn, Filtered, fields_of, unfiltered
from panes.conditions import literal_kinds
from sinks.column_types import COLUMN_TYPES, INTEGRAL, TYPES


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
        if isinstance(self.fn, Filtered):
            _check_condition(where, self.fn, types)
        fn = unfiltered(self.fn)  # a filtered aggregate's output is its inner one's
        if type(fn) not in BUILTINS.values():
            return _declared_type(where, fn)
        kind = getattr(type(fn), "name", None)  # the built-ins' SQL name (panes.combiners)
        if kind == "count":
            return "long"
        col = self.column
        if kind not in ("sum", "mean", "min", "max", "to_list") or col is None:
            raise PipelineConfigError(where, f"unsupported aggregate {fn!r}")
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
