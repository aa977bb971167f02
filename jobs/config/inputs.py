"""The inputs of a pipeline: each a source with its own event time, watermark and duplicates.

A pipeline reads one input or several whose elements meet by key in the same windows (Beam's
``CoGroupByKey``; the model's rules: :mod:`panes.inputs`). In a configuration file::

    keys = ["campaign"]
    idle_timeout = "10m"            # an input silent this long stops holding the watermark back
    dedup = { clicks = "click_id" } # per input (a list or one column, for the input named)

    [inputs.impressions]            # a full source, as [source] (format, path, schema, options)
    format = "jsonl"
    path = "landing/impressions"
    schema = { campaign = "string", ts = "timestamp" }
    event_time = "ts"               # its own event-time column
    [inputs.impressions.watermark]  # its own watermark (every policy)
    delay = "1m"

    [inputs.clicks]
    format = "jsonl"
    path = "landing/clicks"
    schema = { campaign = "string", click_ts = "timestamp", click_id = "string", cost = "double" }
    event_time = "click_ts"

    [aggregates]
    impressions = "count() filter (input = 'impressions')"
    clicks = "count() filter (input = 'clicks')"
    cost = "sum(cost)"              # cost is a column of clicks alone: it reads only clicks

``[source]`` with the top-level ``event_time``, ``[watermark]`` and ``dedup`` is the one-input
spelling of the same thing: :attr:`jobs.config.pipeline.Pipeline.input_list` makes it the one
:class:`Input` named :data:`SINGLE` and every check of an input runs on it, so a pipeline of one
input is checked by the same code as one of several.

What several inputs must agree on (:func:`union_columns`), checked before Spark starts:

* every key is a column of every input, of the same type in each (else refused naming the input
  and the column);
* a column present in several inputs has one type (the elements' records are one table: the
  union of the inputs' columns, and a column an input lacks is null in its records);
* no input has a column named ``input``: each element carries its input's name there
  (:data:`panes.inputs.INPUT_COLUMN`), what filters read: ``count() filter (input = 'clicks')``.

An aggregate over a column only some inputs have reads only their elements (the others' are
null there, which aggregates skip as SQL's do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobs.config.source import Source
from jobs.config.values import PipelineConfigError, expect
from jobs.config.watermark import Watermark
from panes.inputs import INPUT_COLUMN, Inputs
from sinks.lake import column_type, is_struct_type

SINGLE = "source"
"""The name of the one input of a pipeline configured with ``[source]``."""


@dataclass(frozen=True)
class Input:
    """One input of a pipeline (the module doc): its ``name``, its ``source`` (format, path,
    schema, options), its ``event_time`` column (None: ingestion time, or a pane-log source's
    upstream output timestamps), its own ``watermark`` and its ``dedup`` id columns."""

    name: str
    source: Source
    event_time: str | None = None
    watermark: Watermark = field(default_factory=Watermark)
    dedup: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Check the types of the fields (the pipeline checks them against its keys)."""
        expect(self.setting("source"), self.source, Source, "a Source")
        expect(self.setting("watermark"), self.watermark, Watermark, "a Watermark")
        expect(self.setting("event_time"), self.event_time, (str, type(None)), "a column name")
        expect(self.setting("dedup"), self.dedup, tuple, "a tuple of column names")

    @property
    def single(self) -> bool:
        """Whether this is the one input of a pipeline configured with ``[source]``."""
        return self.name == SINGLE

    def setting(self, name: str) -> str:
        """The name of one of this input's settings in a configuration file, for errors:
        ``event_time`` / ``inputs.clicks.event_time``; ``watermark.policy`` /
        ``inputs.clicks.watermark.policy``."""
        return name if self.single else f"inputs.{self.name}.{name}"

    def source_setting(self, name: str) -> str:
        """The name of one of this input's source settings: ``source.path`` /
        ``inputs.clicks.path``."""
        return f"source.{name}" if self.single else f"inputs.{self.name}.{name}"

    def dedup_setting(self) -> str:
        """The name of this input's dedup setting: ``dedup`` / ``dedup.clicks``."""
        return "dedup" if self.single else f"dedup.{self.name}"

    @property
    def types(self) -> dict[str, str]:
        """The input's columns and their types."""
        return self.source.types

    def unknown_column(self, column: str) -> str:
        """Why ``column`` cannot be read from this input."""
        if self.single:
            return self.source.unknown_column(column)
        if self.source.upstream is not None:
            offered = self.source.upstream.columns.describe()
            return f"column {column!r} is not a column of input {self.name!r} ({offered})"
        return (
            f"column {column!r} is not a column of input {self.name!r} (inputs.{self.name}.schema)"
        )

    @property
    def ingestion_time(self) -> bool:
        return self.watermark.policy == "ingestion_time"

    @property
    def writer_noted(self) -> bool:
        return self.watermark.policy == "writer_noted"


def union_columns(inputs: tuple[Input, ...], keys: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The columns of the elements of several ``inputs`` (the module doc's rules checked,
    raising :class:`PipelineConfigError` naming the input and the column): every input's
    columns, in the order first seen, each with its one type, then :data:`INPUT_COLUMN`."""
    try:
        Inputs(i.name for i in inputs)
    except ValueError as e:
        raise PipelineConfigError("inputs", str(e)) from None
    seen: dict[str, tuple[str, str, str]] = {}  # column -> (input, its type, canonical type)
    for one in inputs:
        for column, type_name in one.source.schema:
            if column == INPUT_COLUMN:
                raise PipelineConfigError(
                    f"inputs.{one.name}.schema.{INPUT_COLUMN}",
                    f"the column {INPUT_COLUMN!r} names each element's input "
                    f"({INPUT_COLUMN} = '{one.name}'): rename input {one.name!r}'s column",
                )
            canonical = _canonical(type_name)
            first = seen.setdefault(column, (one.name, type_name, canonical))
            if first[2] != canonical:
                raise PipelineConfigError(
                    f"inputs.{one.name}.schema.{column}",
                    f"column {column!r} is {type_name} in input {one.name!r} and {first[1]} in "
                    f"input {first[0]!r}: a column of several inputs has one type",
                )
    for key in keys:
        for one in inputs:
            if key not in one.types:
                raise PipelineConfigError(
                    "keys",
                    f"key {key!r} is not a column of input {one.name!r}: the keys are columns "
                    f"of every input (inputs.{one.name}.schema)",
                )
    return (*((c, t) for c, (_, t, _) in seen.items()), (INPUT_COLUMN, "string"))


def union_source(inputs: tuple[Input, ...], keys: tuple[str, ...]) -> Source:
    """What the records of several ``inputs`` make together, as the rest of the pipeline reads
    them (its aggregates' and keys' columns and types): the union of their columns
    (:func:`union_columns`), bounded when every input is. Not a source a run reads: a run reads
    each input's own."""
    return Source(
        path=", ".join(f"{i.name}: {i.source.path or i.source.format}" for i in inputs),
        schema=union_columns(inputs, keys),
        format="dataframe",
        bounded=all(i.source.bounded for i in inputs),
    )


def dedup_by_input(
    value: Mapping[str, object], names: tuple[str, ...]
) -> dict[str, tuple[str, ...]]:
    """``dedup = { clicks = "click_id" }``: each named input's id columns (one name or a list),
    refusing an input the pipeline does not have."""
    out: dict[str, tuple[str, ...]] = {}
    for name, columns in value.items():
        where = f"dedup.{name}"
        if name not in names:
            raise PipelineConfigError(where, f"no input {name!r}: the inputs are {list(names)}")
        if isinstance(columns, str):
            out[name] = (columns,)
        elif isinstance(columns, (list, tuple)) and all(isinstance(c, str) for c in columns):
            out[name] = tuple(columns)
        else:
            raise PipelineConfigError(where, "a column name or a list of column names")
    return out


def _canonical(type_name: str) -> str:
    """One spelling per column type (``bigint`` and ``long`` alike)."""
    if is_struct_type(type_name):
        return type_name
    return column_type(type_name).name
