"""Defining a pipeline in Python: :func:`define`, :func:`dataframe_source`, :func:`delta_source`.

A pipeline built here is the same :class:`jobs.config.Pipeline` value a configuration file
loads to (every setting checked when it is built, a bad one raising
:class:`jobs.config.PipelineConfigError` naming it), so everything that takes a configuration
takes it, and :func:`jobs.config.save_pipeline` writes it as one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from jobs.config.aggregates import Aggregate
from jobs.config.inputs import Input, dedup_by_input
from jobs.config.load import delta_table_columns, parse_setting
from jobs.config.pipeline import Pipeline
from jobs.config.source import Source
from jobs.config.values import Duration, PipelineConfigError
from jobs.config.watermark import Watermark
from panes import (
    AccumulationMode,
    ClosingBehavior,
    OnTimeBehavior,
    TimestampCombiner,
    Trigger,
    WindowFn,
    parse_aggregate,
)
from panes.combiners import CombineFn

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

Schema = Mapping[str, str] | Sequence[tuple[str, str]]
"""Columns and their types (string, int, long, double, float, boolean, timestamp, date,
decimal(p,s): :data:`sinks.lake.column_types.KNOWN`)."""

# Spark's simple type names (DataType.simpleString) -> the configuration's column types
_SPARK_TYPES = {
    "string": "string",
    "tinyint": "int",
    "smallint": "int",
    "int": "int",
    "bigint": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "date": "date",
}


def schema_of(frame: DataFrame | StructType) -> tuple[tuple[str, str], ...]:
    """The columns of a DataFrame (or its schema) a pipeline can read, with their types.

    Columns of other types (binary, arrays, structs, ...) are left out: cast or parse them in
    the DataFrame to use them (``from_json`` of a Kafka value, for example). ``decimal(p,s)``
    and ``date`` columns are read as such.

    >>> from pyspark.sql.types import StructType, StructField, StringType, LongType, BinaryType
    >>> schema_of(StructType([StructField("user", StringType()), StructField("ts", LongType()),
    ...                       StructField("payload", BinaryType())]))
    (('user', 'string'), ('ts', 'long'))
    """
    struct = frame if not hasattr(frame, "schema") else frame.schema
    out = []
    for f in struct.fields:
        simple = f.dataType.simpleString()
        typ = _SPARK_TYPES.get(simple)
        if typ is None and simple.startswith("decimal("):
            typ = simple  # decimal(p,s): a configuration type as it is
        if typ is not None and not f.name.startswith("_"):
            out.append((f.name, typ))
    return tuple(out)


def dataframe_source(
    schema: DataFrame | StructType | Schema, *, description: str = "", bounded: bool = False
) -> Source:
    """The source of a pipeline that reads a streaming DataFrame.

    ``schema``: the streaming DataFrame itself (the pipeline keeps it: :func:`jobs.api.run` reads
    it; its columns of the types a pipeline reads: :func:`schema_of`), or the columns and types
    to read (a column the DataFrame holds in another type is cast; a value that does not cast
    rejects its record, with the reason), the DataFrame then given to :func:`jobs.api.run`.
    ``description`` says where the events come from (shown by ``panestore check``).
    ``bounded``: the stream ends (every run drains). ``define(source=events)`` is
    ``define(source=dataframe_source(events))``.

    >>> dataframe_source({"user": "string", "ts": "timestamp", "amount": "double"}).schema
    (('user', 'string'), ('ts', 'timestamp'), ('amount', 'double'))
    """
    frame = None
    if isinstance(schema, Mapping):
        columns = tuple((str(c), str(t)) for c, t in schema.items())
    elif hasattr(schema, "fields") or hasattr(schema, "schema"):
        columns = schema_of(schema)  # type: ignore[arg-type]
        if getattr(schema, "isStreaming", False):
            frame = schema
    else:
        columns = tuple((str(c), str(t)) for c, t in schema)
    return Source(
        path=description, schema=columns, format="dataframe", bounded=bounded, frame=frame
    )


def delta_source(
    path: str | os.PathLike[str],
    *,
    starting_version: int | None = None,
    starting_timestamp: str | None = None,
    skip_change_commits: bool = False,
    schema: Schema | None = None,
) -> Source:
    """A Delta table read as an append-only stream (``[source] format = "delta"``): every
    commit's new rows from ``starting_version`` (or the first version committed at or after
    ``starting_timestamp``; default version 0). ``schema`` defaults to the table's columns.

    >>> import tempfile, pyarrow as pa, deltalake
    >>> table = tempfile.mkdtemp()
    >>> deltalake.write_deltalake(table, pa.table({"user": ["a"], "n": [1]}))
    >>> delta_source(table).schema
    (('user', 'string'), ('n', 'long'))
    """
    where = os.fspath(path)
    columns = delta_table_columns(where) if schema is None else dataframe_source(schema).schema
    return Source(
        path=where,
        schema=columns,
        format="delta",
        starting_version=starting_version,
        starting_timestamp=starting_timestamp,
        skip_change_commits=skip_change_commits,
    )


def define(
    name: str,
    *,
    source: Source | DataFrame | None = None,
    lake: str | os.PathLike[str],
    keys: str | Sequence[str],
    window: WindowFn | str,
    aggregates: Mapping[str, str | CombineFn],
    event_time: str | Mapping[str, str] | None = None,
    trigger: Trigger | str = "DefaultTrigger()",
    accumulation_mode: AccumulationMode | str = AccumulationMode.DISCARDING,
    allowed_lateness: Duration = 0,
    watermark: Watermark | Mapping[str, Watermark] | None = None,
    timestamp_combiner: TimestampCombiner | str = TimestampCombiner.END_OF_WINDOW,
    on_time_behavior: OnTimeBehavior | str = OnTimeBehavior.FIRE_ALWAYS,
    closing_behavior: ClosingBehavior | str = ClosingBehavior.FIRE_IF_NON_EMPTY,
    allow_finishing_trigger: bool = False,
    state_buckets: int = 64,
    checkpoint: str | os.PathLike[str] | None = None,
    single_writer: bool = False,
    dedup: str | Sequence[str] | Mapping[str, str | Sequence[str]] = (),
    dedup_horizon: Duration | None = None,
    sources: Mapping[str, Source | DataFrame] | None = None,
    idle_timeout: Duration | None = None,
) -> Pipeline:
    """A pipeline, from the model's own objects or their text (each setting as in a
    configuration file: ``docs/running.md``; the defaults are the configuration's).

    ``source``: a streaming DataFrame (the pipeline reads it: ``run(pipeline)``), or a
    :class:`jobs.api.Source` (:func:`dataframe_source`, :func:`delta_source`, a loaded
    configuration's). ``aggregates``: name -> a combiner (``panes.combiners.sum("amount")``)
    or its text (``"sum(amount)"``, ``"count()"``). Durations are a ``timedelta``, text
    (``"2h"``) or µs. ``dedup``: the id column(s) by which a record delivered again is
    rejected as a duplicate, remembered for ``dedup_horizon`` (default: until the record would
    be late in all its windows; docs/running.md, "Duplicates"). A lake in an object store
    (``"s3://bucket/prefix"``) needs ``checkpoint``, a directory on a filesystem every node
    mounts (docs/cluster.md).

    >>> from panes import FixedWindows, AfterWatermark, AfterCount, combiners
    >>> p = define(
    ...     "spend",
    ...     source=dataframe_source({"user": "string", "ts": "timestamp", "amount": "double"}),
    ...     lake="lake/spend",
    ...     keys="user",
    ...     event_time="ts",
    ...     window=FixedWindows(3_600_000_000),
    ...     trigger=AfterWatermark(late=AfterCount(1)),
    ...     allowed_lateness="1d",
    ...     watermark=Watermark(delay=300_000_000),
    ...     aggregates={"total": combiners.sum("amount"), "n": "count()"},
    ... )
    >>> p.aggregate_types
    {'total': 'double', 'n': 'long'}

    Several inputs that meet by key (``docs/sources.md``, "Several inputs"): ``sources`` names
    each input's source (instead of ``source``), and ``event_time``, ``watermark`` and
    ``dedup`` are mappings by input name (an input left out of ``watermark`` gets the default
    one, of ``dedup`` none); ``idle_timeout``: an input silent this long stops holding the
    watermark back.

    >>> ctr = define(
    ...     "ctr",
    ...     sources={
    ...         "views": dataframe_source({"ad": "string", "ts": "timestamp"}),
    ...         "clicks": dataframe_source({"ad": "string", "at": "timestamp", "id": "string"}),
    ...     },
    ...     event_time={"views": "ts", "clicks": "at"},
    ...     watermark={"views": Watermark(delay="1m")},
    ...     dedup={"clicks": "id"},
    ...     idle_timeout="10m",
    ...     lake="lake/ctr",
    ...     keys="ad",
    ...     window=FixedWindows(3_600_000_000),
    ...     aggregates={"clicks": "count() filter (input = 'clicks')", "views": "count()"},
    ... )
    >>> [(i.name, i.event_time, i.dedup) for i in ctr.inputs]
    [('views', 'ts', ()), ('clicks', 'at', ('id',))]
    """
    settings = dict(
        name=name,
        lake=parse_setting("lake", lake),
        aggregates=_aggregates(aggregates),
        window=parse_setting("window", window),
        trigger=parse_setting("trigger", trigger),
        accumulation_mode=parse_setting("accumulation_mode", accumulation_mode),
        allowed_lateness=parse_setting("allowed_lateness", allowed_lateness),
        timestamp_combiner=parse_setting("timestamp_combiner", timestamp_combiner),
        on_time_behavior=parse_setting("on_time_behavior", on_time_behavior),
        closing_behavior=parse_setting("closing_behavior", closing_behavior),
        allow_finishing_trigger=allow_finishing_trigger,
        state_buckets=state_buckets,
        checkpoint=parse_setting("checkpoint", checkpoint),
        single_writer=single_writer,
        dedup_horizon=parse_setting("dedup_horizon", dedup_horizon),
    )
    if sources is not None:
        if source is not None:
            raise PipelineConfigError("source", "give source (one input) or sources, not both")
        inputs = _inputs(sources, event_time, watermark, dedup)
        settings["idle_timeout"] = parse_setting("idle_timeout", idle_timeout)
        return Pipeline.with_inputs(inputs, parse_setting("keys", keys), **settings)
    if idle_timeout is not None:
        raise PipelineConfigError("idle_timeout", "is a setting of several inputs (sources=)")
    for setting, value in (("event_time", event_time), ("watermark", watermark), ("dedup", dedup)):
        if isinstance(value, Mapping):
            raise PipelineConfigError(
                setting, "a mapping by input is for several inputs (sources=)"
            )
    assert not isinstance(event_time, Mapping) and not isinstance(watermark, Mapping)
    assert not isinstance(dedup, Mapping)
    if source is None:
        raise PipelineConfigError("source", "is required (or sources=, several inputs)")
    source = _source(source, "source")
    return Pipeline(
        source=source,
        keys=parse_setting("keys", keys),
        event_time=event_time,
        watermark=Watermark() if watermark is None else watermark,
        dedup=parse_setting("dedup", list(dedup) if not isinstance(dedup, str) else dedup),
        **settings,
    )


def _source(source: Source | DataFrame, setting: str) -> Source:
    """A :class:`Source`, or the source of a streaming DataFrame."""
    if not isinstance(source, Source):
        if not getattr(source, "isStreaming", False):
            raise PipelineConfigError(
                setting,
                f"must be a streaming DataFrame (spark.readStream...) or a Source, got "
                f"{type(source).__name__}",
            )
        source = dataframe_source(source)
    return source


def _inputs(
    sources: Mapping[str, Source | DataFrame],
    event_time: str | Mapping[str, str] | None,
    watermark: Watermark | Mapping[str, Watermark] | None,
    dedup: str | Sequence[str] | Mapping[str, str | Sequence[str]],
) -> tuple[Input, ...]:
    """The inputs of ``define(sources=...)``: each one's source, and its event time, watermark
    and dedup from the mappings by input name."""
    if not isinstance(sources, Mapping) or not sources:
        raise PipelineConfigError("sources", "a mapping of input name -> source, at least one")
    names = tuple(str(n) for n in sources)
    by_name: dict[str, Mapping] = {}
    for setting, value in (("event_time", event_time), ("watermark", watermark), ("dedup", dedup)):
        if value is None or (setting == "dedup" and not value):
            by_name[setting] = {}
        elif not isinstance(value, Mapping):
            raise PipelineConfigError(
                setting, f"with several inputs, a mapping by input name: {{{names[0]!r}: ...}}"
            )
        else:
            unknown = [n for n in value if n not in names]
            if unknown:
                raise PipelineConfigError(
                    f"{setting}.{unknown[0]}",
                    f"no input {unknown[0]!r}: the inputs are {list(names)}",
                )
            by_name[setting] = value
    ids = dedup_by_input(by_name["dedup"], names)
    return tuple(
        Input(
            name,
            _source(source, f"sources.{name}"),
            by_name["event_time"].get(name),
            by_name["watermark"].get(name, Watermark()),
            ids.get(name, ()),
        )
        for name, source in sources.items()
    )


def _aggregates(aggregates: Mapping[str, str | CombineFn]) -> tuple[Aggregate, ...]:
    if not isinstance(aggregates, Mapping):
        raise PipelineConfigError("aggregates", 'must be a mapping: {"n": "count()", ...}')
    out = []
    for name, fn in aggregates.items():
        if isinstance(fn, str):
            try:
                fn = parse_aggregate(fn)
            except ValueError as e:
                raise PipelineConfigError(f"aggregates.{name}", str(e)) from None
        out.append(Aggregate(name, fn))
    return tuple(out)
