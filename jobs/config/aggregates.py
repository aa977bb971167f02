"""The ``[aggregates]`` table of a pipeline's configuration: its named aggregates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobs.config.values import PipelineConfigError
from panes.combiners import CombineFn
from sinks.column_types import COLUMN_TYPES, INTEGRAL


@dataclass(frozen=True)
class Aggregate:
    """A named aggregate of the pipeline (``watched = "sum(seconds)"``); ``str(fn)`` is its
    text (``sum(seconds)``)."""

    name: str
    fn: CombineFn

    @property
    def column(self) -> str | None:
        """The source column it reads (None: ``count()``, or a combiner of no column)."""
        column = getattr(self.fn, "field", None)
        return column if isinstance(column, str) else None

    def output_type(self, types: Mapping[str, str]) -> str:
        """Its output column type, given the source's column types; refuses (naming
        ``aggregates.<name>``) an aggregate the column's type does not support."""
        where = f"aggregates.{self.name}"
        kind = getattr(type(self.fn), "name", None)  # the built-ins' SQL name (panes.combiners)
        if kind == "count":
            return "long"
        col = self.column
        if kind not in ("sum", "mean", "min", "max", "to_list") or col is None:
            raise PipelineConfigError(where, f"unsupported aggregate {self.fn!r}")
        if col not in types:
            raise PipelineConfigError(
                where, f"column {col!r} is not in source.schema ({', '.join(types)})"
            )
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
