"""The ``[aggregates]`` table of a pipeline's configuration: its named aggregates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from jobs.config.values import PipelineConfigError
from panes.combine_fn import AggregateTypeError, Column, text_of
from panes.combiners import CombineFn, Filtered, fields_of, unfiltered
from panes.conditions import literal_kinds
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
        ``aggregates.<name>``) an aggregate the column's type does not support. The aggregate
        says (:meth:`panes.combine_fn.CombineFn.output_type_in`); a combiner of your own
        declares it (:attr:`panes.combine_fn.CombineFn.output_type`)."""
        where = f"aggregates.{self.name}"
        for read in self.columns:
            if read not in types:
                raise PipelineConfigError(
                    where, f"column {read!r} is not in source.schema ({', '.join(types)})"
                )
        fn = unfiltered(self.fn)  # a filtered aggregate's output is its inner one's
        merged = getattr(fn, "field", None) if fn.reads_sketches else None
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
        if fn.declares_output_type:  # a combiner of your own
            return _declared_type(where, fn)
        try:  # a built-in works its type out from its columns' (its class's output_type_in)
            return str(fn.output_type_in({c: column_of(types[c]) for c in self.columns}))
        except AggregateTypeError as e:
            raise PipelineConfigError(where, str(e)) from None


def column_of(type_name: str) -> Column:
    """What an aggregate is told of a column of ``type_name`` (:class:`panes.combine_fn.Column`),
    from the one parser of type names (:func:`sinks.lake.column_types.column_type`).

    >>> column_of("decimal(18,2)")
    Column(type='decimal(18,2)', numeric=True, integral=False, scale=2)
    """
    if not is_column_type(type_name):  # an upstream's sketch column: a struct
        return Column(type_name)
    of_column = column_type(type_name)
    scale = getattr(of_column.arrow, "scale", None)  # a decimal's
    return Column(type_name, of_column.numeric, type_name in INTEGRAL, scale)


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
