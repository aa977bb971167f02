"""The pipeline definition: what a ``panestore run`` computes, from where, and where it goes.

A :class:`Pipeline` is a frozen dataclass of parsed values (a ``WindowFn``, a ``Trigger``, enums,
durations in µs), built in Python or parsed from TOML by :func:`load_pipeline` (the defaults file,
the configuration file and any overrides merged, then parsed; ``conf/demo.toml`` is a complete
example)::

    name = "ad_views"
    lake = "demo-data/lake"            # Delta tables and the Spark checkpoint live here
    keys = ["device_id"]
    event_time = "ts"
    window = "Sessions(30m)"           # FixedWindows(1m) | SlidingWindows(10m, 1m) | ...
    trigger = "AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))"
    accumulation_mode = "accumulating_and_retracting"   # | discarding | accumulating
    allowed_lateness = "2h"

    [source]
    format = "jsonl"                   # | csv | parquet
    path = "demo-data/landing"
    max_files_per_trigger = 50
    schema = { device_id = "string", ts = "timestamp", seconds = "double" }

    [watermark]
    policy = "bounded_out_of_orderness"   # | ingestion_time
    delay = "5m"

    [aggregates]
    plays = "count()"
    watched = "sum(seconds)"

Everything is validated when the object is built, before Spark starts: a bad value raises
:class:`PipelineConfigError` naming the field (``trigger``, ``source.schema.ts``, ...) and what is
wrong, including two traps of the model:

* ``GlobalWindows`` with a trigger that can only fire when the watermark passes the end of the
  window never fires on an unbounded source (the global window ends at the end of time). Allowed
  only with ``source.bounded = true`` (every run is then a drain run).
* A trigger that can *finish* (e.g. ``AfterWatermark()`` without late firings, ``AfterCount(10)``)
  closes its window for good: later data for it is dropped (to the ``late`` table). Allowed only
  with ``allow_finishing_trigger = true``.

Relative paths (``lake``, ``source.path``) are relative to the working directory of the run.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.config.event_time import EPOCH_UNITS, EventTimeColumn
from jobs.sources.files.paths import landing_path_problem
from jobs.sources.pane_log.upstream import PaneLogColumns
from panes import (
    AccumulationMode,
    ClosingBehavior,
    DefaultTrigger,
    GlobalWindows,
    OnTimeBehavior,
    TimestampCombiner,
    Trigger,
    WindowFn,
    Windowing,
    combiners,
    format_duration,
    parse_duration,
)
from panes.combiners import CombineFn
from panes.engine import Engine
from sinks.column_types import COLUMN_TYPES, INTEGRAL
from sinks.lake_format import FIXED_NAMES
from sinks.object_store import is_object_store


class PipelineConfigError(ValueError):
    """An invalid pipeline configuration; ``field`` names the offending setting."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        self.message = message
        super().__init__(f"{field_name}: {message}")


# -- source settings ---------------------------------------------------------------------

FILE_FORMATS = ("jsonl", "csv", "parquet")
FORMATS = (*FILE_FORMATS, "pane_log", "delta", "dataframe")
WATERMARK_POLICIES = ("bounded_out_of_orderness", "ingestion_time", "writer_noted")
# Key column types the job groups by (a float key has no exact identity; see Pipeline._check_keys)
KEY_TYPES = frozenset({"string", "int", "long", "bigint"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# -- the pipeline --------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where a pipeline's records come from (``format``):

    * ``jsonl``, ``csv``, ``parquet``: a directory of files that grows over time (``path``),
      read as a Spark streaming file source;
    * ``pane_log``: another pipeline's pane log (its ``upstream``; ``schema`` is then the
      columns it offers);
    * ``delta``: a Delta table read as an append-only stream (``path``, a directory or URI):
      every commit's new rows from ``starting_version`` (or the first version committed at or
      after ``starting_timestamp``, ISO-8601; default: version 0) on. A commit that deletes or
      updates rows stops the run, unless ``skip_change_commits`` (the whole commit is then
      skipped). ``schema`` defaults to the table's columns of the types below;
    * ``dataframe``: a streaming DataFrame built in PySpark code, given to
      :func:`jobs.driver.runs.run` (``path`` is only a description, optional).

    ``schema`` lists (column, type) pairs (types: string, int, long, double, float, boolean,
    timestamp); it is explicit for files (no inference). A ``timestamp`` column is an ISO-8601
    string in jsonl/csv; a numeric event-time column counts ``epoch_unit`` (s, ms, us) since
    1970-01-01 UTC. A column whose type in a table or DataFrame differs from the schema's is
    cast; a value that does not cast rejects its record. ``bounded``: the input is finite and
    complete when a run starts, every run drains (see :mod:`jobs.driver.runs`).
    ``create_path``: a missing landing directory is created empty (the producer has not started
    yet) instead of refused as a likely typo.
    """

    path: str
    schema: tuple[tuple[str, str], ...]
    format: str = "jsonl"
    max_files_per_trigger: int | None = None
    csv_header: bool = False
    csv_delimiter: str = ","
    epoch_unit: str = "ms"
    bounded: bool = False
    create_path: bool = False
    pipeline: str | None = None
    upstream: Upstream | None = None
    starting_version: int | None = None
    starting_timestamp: str | None = None
    skip_change_commits: bool = False

    def __post_init__(self) -> None:
        """Check the settings (raising :class:`PipelineConfigError` naming the first bad one)."""
        if self.format not in FORMATS:
            raise PipelineConfigError("source.format", f"{self.format!r} is not one of {FORMATS}")
        if self.is_pane_log and self.upstream is None:
            raise PipelineConfigError(
                "source.path", "a pane_log source needs its upstream (load it with load_pipeline)"
            )
        if not self.path and not self.is_dataframe:
            what = "the Delta table" if self.is_delta else "the landing directory"
            raise PipelineConfigError("source.path", f"is required ({what})")
        self._check_delta_settings()
        if not self.schema:
            raise PipelineConfigError("source.schema", "is required: column = type, ...")
        for col, typ in self.schema:
            if not _NAME.fullmatch(col) or col.startswith("_"):
                raise PipelineConfigError(
                    f"source.schema.{col}", "column names are identifiers not starting with _"
                )
            if typ not in COLUMN_TYPES:
                known = ", ".join(COLUMN_TYPES)
                raise PipelineConfigError(
                    f"source.schema.{col}", f"unknown type {typ!r}; known: {known}"
                )
        mf = self.max_files_per_trigger
        if mf is not None and mf < 1:
            raise PipelineConfigError("source.max_files_per_trigger", f"must be >= 1, got {mf!r}")
        if self.epoch_unit not in EPOCH_UNITS:
            raise PipelineConfigError(
                "source.epoch_unit", f"{self.epoch_unit!r} is not one of {list(EPOCH_UNITS)}"
            )
        if len(self.csv_delimiter) != 1:
            raise PipelineConfigError("source.csv_delimiter", "must be one character")
        problem = landing_path_problem(self.path) if self.is_landing else None
        if problem is not None:
            raise PipelineConfigError("source.path", problem)

    def _check_delta_settings(self) -> None:
        """The settings of a ``delta`` source: on no other format, one starting point."""
        given = [
            name
            for name in ("starting_version", "starting_timestamp", "skip_change_commits")
            if getattr(self, name) not in (None, False)
        ]
        if given and not self.is_delta:
            raise PipelineConfigError(
                f"source.{given[0]}", f"is a setting of a delta source, not of {self.format}"
            )
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise PipelineConfigError(
                "source.starting_timestamp", "give starting_version or starting_timestamp, not both"
            )
        if self.starting_version is not None:
            _expect("source.starting_version", self.starting_version, int, "a version >= 0")
            if self.starting_version < 0:
                raise PipelineConfigError("source.starting_version", "must be >= 0")
        if self.starting_timestamp is not None:
            _expect("source.starting_timestamp", self.starting_timestamp, str, "ISO-8601 text")
            starting_timestamp_ms(self.starting_timestamp)  # raises naming the setting

    @property
    def types(self) -> dict[str, str]:
        return dict(self.schema)

    @property
    def is_pane_log(self) -> bool:
        return self.format == "pane_log"

    @property
    def is_delta(self) -> bool:
        return self.format == "delta"

    @property
    def is_dataframe(self) -> bool:
        """The records are a streaming DataFrame the caller gives the run."""
        return self.format == "dataframe"

    @property
    def is_landing(self) -> bool:
        """The source is a landing directory of files."""
        return self.format in FILE_FORMATS

    def unknown_column(self, column: str) -> str:
        """Why ``column`` cannot be read from this source."""
        if self.upstream is not None:
            return (
                f"column {column!r} is not a column of the upstream pane log "
                f"{self.upstream.pane_log} ({self.upstream.columns.describe()})"
            )
        return f"column {column!r} is not in source.schema"


@dataclass(frozen=True)
class Upstream:
    """The pipeline a ``pane_log`` source reads: the path of its pane-log table and what the
    table offers (:class:`jobs.sources.pane_log.upstream.PaneLogColumns`). Its panes become
    elements: key and aggregate columns as fields, output timestamp as event time, weight -1 for a
    retraction (docs/running.md, "A pipeline over another pipeline's pane log")."""

    pane_log: str
    columns: PaneLogColumns

    @property
    def name(self) -> str:
        return self.columns.pipeline

    @property
    def view(self) -> str:
        """The path of the upstream's current view (next to its pane log)."""
        return str(Path(self.pane_log).parent / "current")

    @property
    def schema(self) -> dict[str, str]:
        """The columns a downstream can use: key and aggregate columns, with their types."""
        return dict((*self.columns.keys, *self.columns.values))


Duration = int | str
"""A duration as a configuration gives it: µs (an int), or text like ``"5m"``, ``"1h30m"``."""


def parse_duration_setting(name: str, value: Any) -> int:
    """The duration setting ``name`` in µs, from an int (µs) or text (``"5m"``, ``"2h"``: the
    forms of :func:`panes.parse_duration`), as a configuration file and the Python API accept
    it. Raises :class:`PipelineConfigError` naming ``name`` for anything else or a negative one.

    >>> parse_duration_setting("watermark.delay", "5m"), parse_duration_setting("x", 1_000)
    (300000000, 1000)
    """
    if isinstance(value, bool):
        raise PipelineConfigError(name, f"expected a duration like '5m', got {value!r}")
    if isinstance(value, int):
        us = value
    elif isinstance(value, str):
        try:
            us = parse_duration(value.strip())
        except ValueError as e:
            raise PipelineConfigError(name, str(e)) from None
    else:
        raise PipelineConfigError(name, f"expected a duration like '5m', got {value!r}")
    if us < 0:
        raise PipelineConfigError(name, "must not be negative")
    return us


@dataclass(frozen=True, init=False)
class Watermark:
    """``bounded_out_of_orderness``: watermark = largest event time seen - ``delay`` (heuristic;
    data behind it is late). ``ingestion_time``: arrival (batch) time is the event time, the
    watermark is perfect and nothing is ever late (the Dataflow paper, §2.3). ``writer_noted``: the
    minimum of the times the live writers noted (:mod:`jobs.driver.writers_watermark`); a writer
    that noted nothing for ``idle_timeout`` stops holding it. ``delay`` must be 0 with
    ``writer_noted``. Durations are given as in a configuration file, µs or text, and held in µs.

    >>> Watermark(delay="5m") == Watermark(delay=300_000_000)
    True
    >>> Watermark("writer_noted", idle_timeout="10m").idle_timeout
    600000000
    """

    policy: str
    delay: int
    idle_timeout: int

    def __init__(
        self,
        policy: str = "bounded_out_of_orderness",
        delay: Duration = 0,
        idle_timeout: Duration = "5m",
    ) -> None:
        """Check the settings (raising :class:`PipelineConfigError` naming the first bad one)."""
        _expect("watermark.policy", policy, str, f"one of {WATERMARK_POLICIES}")
        if policy not in WATERMARK_POLICIES:
            raise PipelineConfigError(
                "watermark.policy", f"{policy!r} is not one of {WATERMARK_POLICIES}"
            )
        object.__setattr__(self, "policy", policy)
        for name, value in (("delay", delay), ("idle_timeout", idle_timeout)):
            object.__setattr__(self, name, parse_duration_setting(f"watermark.{name}", value))
        if self.policy == "writer_noted" and self.delay:
            raise PipelineConfigError(
                "watermark.delay",
                "must be 0 with writer_noted: the writers' marks say how far "
                "event time has come (a writer that lags notes a lower time)",
            )
        if self.policy == "writer_noted" and self.idle_timeout <= 0:
            raise PipelineConfigError("watermark.idle_timeout", "must be positive")


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


@dataclass(frozen=True)
class Pipeline:
    """A pipeline definition; see the module doc. Every field holds its parsed value (a
    ``WindowFn``, a ``Trigger``, enums, durations in µs): :func:`pipeline_from_dict` and
    :func:`load_pipeline` parse the text of a configuration into them. Construction checks the
    whole (raising :class:`PipelineConfigError` naming the first bad setting)."""

    name: str
    source: Source
    lake: str
    keys: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    window: WindowFn
    event_time: str | None = None
    trigger: Trigger = field(default_factory=DefaultTrigger)
    accumulation_mode: AccumulationMode = AccumulationMode.DISCARDING
    allowed_lateness: int = 0
    watermark: Watermark = field(default_factory=Watermark)
    timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW
    on_time_behavior: OnTimeBehavior = OnTimeBehavior.FIRE_ALWAYS
    closing_behavior: ClosingBehavior = ClosingBehavior.FIRE_IF_NON_EMPTY
    allow_finishing_trigger: bool = False
    state_buckets: int = 64
    checkpoint: str | None = None
    single_writer: bool = False

    def __post_init__(self) -> None:
        """Check the settings together (nothing is changed)."""
        self._check_types()
        self._check_names()
        types = self.source.types
        self._check_keys(types)
        self._check_event_time(types)
        self._check_aggregates(types)
        self._check_weighted()
        self._check_traps()
        try:
            self.windowing()
        except (TypeError, ValueError) as e:  # pragma: no cover - covered by the checks above
            raise PipelineConfigError("window", str(e)) from None

    # -- validation ------------------------------------------------------------------------

    def _check_types(self) -> None:
        """Refuse a field of another type than declared, naming it: text for a parsed setting
        (``window="FixedWindows(1m)"``) is for :func:`pipeline_from_dict`."""
        parsed = "a parsed value (text is read by pipeline_from_dict)"
        for name, kind, what in (
            ("name", str, "text"),
            ("lake", str, "a path (text)"),
            ("source", Source, "a Source"),
            ("watermark", Watermark, "a Watermark"),
            ("window", WindowFn, f"a window function, {parsed}"),
            ("trigger", Trigger, f"a trigger, {parsed}"),
            ("accumulation_mode", AccumulationMode, f"an AccumulationMode, {parsed}"),
            ("timestamp_combiner", TimestampCombiner, f"a TimestampCombiner, {parsed}"),
            ("on_time_behavior", OnTimeBehavior, f"an OnTimeBehavior, {parsed}"),
            ("closing_behavior", ClosingBehavior, f"a ClosingBehavior, {parsed}"),
            ("allowed_lateness", int, "a duration in µs (an int)"),
            ("allow_finishing_trigger", bool, "true or false"),
            ("state_buckets", int, "an integer"),
            ("checkpoint", (str, type(None)), "a directory path (text)"),
            ("single_writer", bool, "true or false"),
            ("keys", tuple, "a tuple of column names"),
            ("aggregates", tuple, "a tuple of Aggregate"),
        ):
            _expect(name, getattr(self, name), kind, what)
        for agg in self.aggregates:
            _expect("aggregates", agg, Aggregate, "a tuple of Aggregate")

    def _check_names(self) -> None:
        sb = self.state_buckets
        if not 1 <= sb <= 1 << 20:
            raise PipelineConfigError("state_buckets", f"must be an integer 1..1048576, got {sb!r}")
        if not _NAME.fullmatch(self.name):
            raise PipelineConfigError(
                "name", f"must be an identifier (letters, digits, _), got {self.name!r}"
            )
        if not self.lake:
            raise PipelineConfigError("lake", "is required (directory of the Delta tables)")
        if self.allowed_lateness < 0:
            raise PipelineConfigError("allowed_lateness", "must not be negative")

    def _check_keys(self, types: dict[str, str]) -> None:
        keys = self.keys
        if not keys:
            raise PipelineConfigError("keys", "at least one key column is required")
        for k in keys:
            if k not in types:
                raise PipelineConfigError("keys", f"key {self.source.unknown_column(k)}")
            if types[k] == "timestamp" and k == self.event_time:
                raise PipelineConfigError("keys", f"{k!r} is the event-time column")
            if types[k] not in KEY_TYPES:
                raise PipelineConfigError(
                    "keys", f"key column {k!r} is {types[k]}; keys are one of {sorted(KEY_TYPES)}"
                )
        if len(set(keys)) != len(keys):
            raise PipelineConfigError("keys", f"duplicated key column in {list(keys)}")

    def _check_event_time(self, types: dict[str, str]) -> None:
        if self.source.is_pane_log:
            self._check_pane_log_time()
        elif self.event_time is None:
            if not self.ingestion_time:
                raise PipelineConfigError(
                    "event_time", "is required (or use watermark.policy = 'ingestion_time')"
                )
        elif self.event_time not in types:
            raise PipelineConfigError(
                "event_time", f"column {self.event_time!r} is not in source.schema"
            )
        elif types[self.event_time] not in ("timestamp", *INTEGRAL):
            raise PipelineConfigError(
                "event_time",
                f"column {self.event_time!r} must be a timestamp or an integral "
                f"epoch (source.epoch_unit), not {types[self.event_time]}",
            )
        if self.writer_noted and not self.source.is_landing:
            raise PipelineConfigError(
                "watermark.policy",
                "writer_noted reads the writers' marks in the landing directory: it needs a "
                f"source of files, not {self.source.format}",
            )
        if self.writer_noted and _has_scheme(self.source.path):
            raise PipelineConfigError(
                "watermark.policy",
                "writer_noted reads the writers' marks as local files: "
                "source.path must be a local (or mounted) directory, not a URI",
            )

    def _check_pane_log_time(self) -> None:
        """A pane-log source's event time is the pane's output timestamp and its watermark the
        upstream's: nothing to configure."""
        if self.event_time is not None:
            raise PipelineConfigError(
                "event_time",
                "a pane_log source's event time is the upstream pane's output timestamp: "
                "remove event_time",
            )
        if self.watermark.policy != "bounded_out_of_orderness" or self.watermark.delay != 0:
            raise PipelineConfigError(
                "watermark",
                "a pane_log source follows the upstream's watermark (recorded with each pane): "
                "remove the watermark policy and delay",
            )

    def _check_aggregates(self, types: dict[str, str]) -> None:
        if not self.aggregates:
            raise PipelineConfigError("aggregates", "at least one named aggregate is required")
        names = [a.name for a in self.aggregates]
        for agg in self.aggregates:
            where = f"aggregates.{agg.name}"
            if not _NAME.fullmatch(agg.name):
                raise PipelineConfigError(where, "aggregate names are identifiers")
            if agg.name in self.keys:
                raise PipelineConfigError(where, "an aggregate cannot be named like a key column")
            if names.count(agg.name) > 1:
                raise PipelineConfigError(where, "the name is given twice")
            if agg.column is not None and agg.column not in types:
                raise PipelineConfigError(where, self.source.unknown_column(agg.column))
            agg.output_type(types)
        clash = [n for n in (*self.keys, *names) if n in FIXED_NAMES]
        if clash:
            raise PipelineConfigError(
                "aggregates" if clash[0] in names else "keys",
                f"{clash[0]!r} is a reserved pane-log column",
            )

    def _check_weighted(self) -> None:
        """A source with retractions (weight -1 elements) needs aggregates that withdraw and
        the accumulating & retracting mode (:func:`panes.weights.check_weighted`)."""
        up = self.source.upstream
        if up is None or not up.columns.retracting:  # not self.weighted
            return
        for agg in self.aggregates:
            if not agg.fn.can_retract:
                raise PipelineConfigError(
                    f"aggregates.{agg.name}",
                    f"{agg.fn!r} cannot withdraw a value, and the upstream "
                    f"{up.name!r} writes retractions; use sum, count, mean, "
                    "to_list",
                )
        if self.accumulation_mode is not AccumulationMode.ACCUMULATING_AND_RETRACTING:
            raise PipelineConfigError(
                "accumulation_mode",
                "must be accumulating_and_retracting over an upstream that writes retractions: "
                "a window whose elements were all withdrawn must leave the view",
            )

    def _check_traps(self) -> None:
        """The two traps of the model (see the module doc)."""
        trigger = self.trigger
        if (
            isinstance(self.window, GlobalWindows)
            and not trigger.fires_before_end_of_window
            and not self.source.bounded
        ):
            raise PipelineConfigError(
                "trigger",
                f"{trigger} only fires when the watermark passes the end of the window, and "
                "GlobalWindows() ends at the end of time: on an unbounded source it never fires. "
                "Add early firings (e.g. AfterWatermark(early=AfterProcessingTime(1m))), use "
                "Repeatedly(AfterCount(n)), or set source.bounded = true (every run drains).",
            )
        if trigger.may_finish and not self.allow_finishing_trigger:
            raise PipelineConfigError(
                "trigger",
                f"{trigger} can finish: once it has, every later element of its window is "
                "dropped (to the late table). Add late firings (e.g. AfterWatermark(..., "
                "late=AfterCount(1))), wrap it in Repeatedly(...), or set "
                "allow_finishing_trigger = true.",
            )

    # -- derived --------------------------------------------------------------------------

    def windowing(self) -> Windowing:
        """The window, trigger, modes and lateness, as the model's :class:`Windowing`."""
        return Windowing(
            self.window,
            trigger=self.trigger,
            accumulation_mode=self.accumulation_mode,
            allowed_lateness=self.allowed_lateness,
            timestamp_combiner=self.timestamp_combiner,
            on_time_behavior=self.on_time_behavior,
            closing_behavior=self.closing_behavior,
        )

    def combine_fn(self) -> CombineFn:
        """The named aggregates as one combiner (its values are dicts name -> value)."""
        return combiners.aggregates(**{a.name: a.fn for a in self.aggregates})

    def engine(self) -> Engine:
        return Engine(self.windowing(), self.combine_fn(), weighted=self.weighted)

    @property
    def weighted(self) -> bool:
        """Whether elements can weigh -1: the source is the pane log of a retracting upstream."""
        up = self.source.upstream
        return up is not None and up.columns.retracting

    @property
    def aggregate_types(self) -> dict[str, str]:
        """Aggregate name -> output column type."""
        types = self.source.types
        return {a.name: a.output_type(types) for a in self.aggregates}

    @property
    def value_columns(self) -> tuple[str, ...]:
        """Source columns the aggregates read (the element value is a dict of these)."""
        columns = (a.column for a in self.aggregates)
        return tuple(dict.fromkeys(c for c in columns if c is not None))

    @property
    def ingestion_time(self) -> bool:
        return self.watermark.policy == "ingestion_time"

    @property
    def event_time_column(self) -> EventTimeColumn | None:
        """Where the records hold their event time (None: ingestion time, or a pane-log
        source, whose event time is the upstream pane's output timestamp)."""
        if self.ingestion_time or self.event_time is None:
            return None
        if self.source.types[self.event_time] == "timestamp":
            return EventTimeColumn(self.event_time)
        return EventTimeColumn(self.event_time, EPOCH_UNITS[self.source.epoch_unit])

    @property
    def writer_noted(self) -> bool:
        """The watermark comes from the writers' marks (:mod:`jobs.driver.writers_watermark`)."""
        return self.watermark.policy == "writer_noted"

    @property
    def lake_in_store(self) -> bool:
        """Whether the lake is in an object store (``lake = "s3://bucket/prefix"``)."""
        return is_object_store(self.lake)

    @property
    def lake_location(self) -> str:
        """Where the lake's tables are: an absolute local path (relative paths are taken from the
        working directory), or the object-store URI without a trailing slash."""
        if self.lake_in_store:
            return self.lake.rstrip("/")
        return str(self.lake_path)

    @property
    def lake_path(self) -> Path:
        """The lake directory of a local lake, absolute (relative paths are taken from the
        working directory)."""
        if self.lake_in_store:
            raise ValueError(f"the lake {self.lake} is in an object store, not a local directory")
        return Path(self.lake).absolute()

    @property
    def run_path(self) -> Path:
        """Where runs keep Spark's checkpoint and their own files (the lake's identity,
        fingerprint and state layout, control rows, noted landing changes): ``checkpoint``, a
        directory on a filesystem every node mounts, by default the lake itself. A lake in an
        object store needs ``checkpoint`` (Spark's streaming checkpoint needs a filesystem).
        Docstrings name this directory ``<checkpoint>``."""
        if self.checkpoint is not None:
            return Path(self.checkpoint).absolute()
        if self.lake_in_store:
            raise PipelineConfigError(
                "checkpoint",
                f"is required for a lake in an object store ({self.lake}): the directory where "
                "runs keep Spark's checkpoint, on a filesystem every node of the cluster mounts "
                '(checkpoint = "/shared/checkpoints/NAME")',
            )
        return self.lake_path

    def table_path(self, table: str) -> str:
        """``panes``, ``late``, ``rejected``: the Delta tables under the lake."""
        return f"{self.lake_location}/{table}"

    @property
    def checkpoint_path(self) -> str:
        """Spark's streaming checkpoint: ``<run_path>/_checkpoint``."""
        return str(self.run_path / "_checkpoint")

    @property
    def control_path(self) -> str:
        return str(self.run_path / "_control")

    @property
    def set_aside(self) -> str:
        """How to set the lake aside to rebuild it (a message's words)."""
        if self.checkpoint is None and not self.lake_in_store:
            return f"move its lake aside (mv {self.lake_path} {self.lake_path}.old)"
        return (
            f"move its lake ({self.lake_location}) and its checkpoint directory "
            f"({self.run_path}) aside"
        )

    def describe(self) -> str:
        aggs = ", ".join(f"{a.name} = {a.fn}" for a in self.aggregates)
        up = self.source.upstream
        event_time = self.event_time or "(ingestion time)"
        if up is not None:
            origin = f"the pane log of {up.name} ({up.pane_log}: {up.columns.describe()})"
            event_time = "the upstream panes' output timestamps"
        elif self.source.is_delta:
            origin = f"the Delta table {self.source.path}"
        elif self.source.is_dataframe:
            origin = f"a streaming DataFrame{f' ({self.source.path})' if self.source.path else ''}"
        else:
            origin = f"{self.source.format} files in {self.source.path}"
        return (
            f"pipeline {self.name}: {origin} -> "
            f"{self.lake}\n  keys {list(self.keys)}, event time {event_time}, "
            f"{self.window}, trigger {self.trigger}, "
            f"{self.accumulation_mode.name.lower()}, allowed lateness "
            f"{format_duration(self.allowed_lateness)}\n  aggregates: {aggs}"
        )


def _expect(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    """Refuse ``value`` unless it is of ``kind`` (a bool is no number, a number no path)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise PipelineConfigError(name, f"must be {what}, got {value!r}")


def starting_timestamp_ms(text: str) -> int:
    """``source.starting_timestamp`` in ms since 1970 (ISO-8601; no zone: UTC)."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PipelineConfigError(
            "source.starting_timestamp", f"{text!r} is not an ISO-8601 time (2024-05-01T00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def _has_scheme(path: str) -> bool:
    """A URI with a scheme (``s3://...``): not a local path."""
    return "://" in path
