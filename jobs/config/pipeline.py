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
    dedup = "event_id"                 # a record whose key and id were counted is rejected
    # dedup_horizon = "2h"             # how long an id is remembered (default: the windows')

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

Several inputs that meet by key (``[inputs.NAME]`` tables instead of ``[source]``, each with
its own event time, watermark and duplicates): :mod:`jobs.config.inputs`. Every check of an
input runs over :attr:`Pipeline.input_list`, the one input of ``[source]`` included.

Relative paths (``lake``, ``source.path``) are relative to the working directory of the run.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.config.aggregates import Aggregate
from jobs.config.event_time import EPOCH_UNITS, EventTimeColumn
from jobs.config.inputs import SINGLE, Input, union_source
from jobs.config.source import Source
from jobs.config.values import IDENTIFIER, PipelineConfigError, expect
from jobs.config.watermark import Watermark
from jobs.reading.files.paths import has_scheme
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
)
from panes.accumulator_text import UnstorableAccumulator, to_text
from panes.combine_fn import text_of
from panes.combiners import RETRACTING, CombineFn, count, inputs_of
from panes.conditions import Condition
from panes.engine import Engine
from panes.inputs import INPUT_COLUMN
from panes.rules import WindowRules
from sinks.lake import FIXED_NAMES, INTEGRAL, arrow_type, is_object_store, sample_value

if TYPE_CHECKING:
    from jobs.checkpoint.files import CheckpointFiles

_RECORDS = "pst_records"
"""The aggregate of an input's reading view (:meth:`Pipeline.read_as`): a count, read nowhere."""

# Key column types the job groups by (a float key has no exact identity; see Pipeline._check_keys)
KEY_TYPES = frozenset({"string", "int", "long", "bigint"})


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
    dedup: tuple[str, ...] = ()
    dedup_horizon: int | None = None
    fold_memory: int = 512 * 1024 * 1024
    #: Several inputs (:mod:`jobs.config.inputs`); empty: the one input of ``source``. With
    #: them, ``source`` is what their records make together (``union_source``; :meth:`with_inputs`
    #: builds it), and ``event_time``, ``watermark`` and ``dedup`` are each input's own.
    inputs: tuple[Input, ...] = ()
    #: With several inputs: an input that has delivered no data for this long stops holding the
    #: pipeline's watermark back (µs; None: never; :mod:`panes.inputs`).
    idle_timeout: int | None = None

    @classmethod
    def with_inputs(cls, inputs: tuple[Input, ...], keys: tuple[str, ...], **settings) -> Pipeline:
        """A pipeline of several ``inputs`` (every other setting as the constructor's, but no
        ``source``, ``event_time``, ``watermark`` or ``dedup``: those are the inputs' own)."""
        if not isinstance(inputs, tuple) or not inputs:
            raise PipelineConfigError("inputs", "a tuple of at least one Input")
        for one in inputs:
            expect("inputs", one, Input, "a tuple of Input")
        return cls(source=union_source(inputs, keys), keys=keys, inputs=inputs, **settings)

    def __post_init__(self) -> None:
        """Check the settings together (nothing is changed)."""
        self._check_types()
        self._check_names()
        self._check_inputs()
        types = self.source.types
        self._check_keys(types)
        for one in self.input_list:
            self._check_event_time(one)
            self._check_dedup(one)
        self._check_aggregates(types)
        self._check_weighted()
        self._check_traps()
        try:  # the model checks the windowing (a negative allowed lateness: once, there)
            self.rules()
        except (TypeError, ValueError) as e:
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
            ("dedup", tuple, "a tuple of column names"),
            ("dedup_horizon", (int, type(None)), "a duration in µs (an int) or None"),
            ("fold_memory", int, "a number of bytes (an int)"),
            ("inputs", tuple, "a tuple of Input"),
            ("idle_timeout", (int, type(None)), "a duration in µs (an int) or None"),
        ):
            expect(name, getattr(self, name), kind, what)
        for agg in self.aggregates:
            expect("aggregates", agg, Aggregate, "a tuple of Aggregate")

    def _check_names(self) -> None:
        sb = self.state_buckets
        if not 1 <= sb <= 1 << 20:
            raise PipelineConfigError("state_buckets", f"must be an integer 1..1048576, got {sb!r}")
        if not IDENTIFIER.fullmatch(self.name):
            raise PipelineConfigError(
                "name", f"must be an identifier (letters, digits, _), got {self.name!r}"
            )
        if not self.lake:
            raise PipelineConfigError("lake", "is required (directory of the Delta tables)")
        if self.fold_memory < 1:
            raise PipelineConfigError("fold_memory", "must be at least 1 byte")

    def _check_inputs(self) -> None:
        """With several inputs: the records they make together are ``source``, and the settings
        of one input are theirs (each input's own); ``idle_timeout`` is a positive duration
        given only with them."""
        if not self.inputs:
            if self.idle_timeout is not None:
                raise PipelineConfigError(
                    "idle_timeout", "is a setting of several inputs ([inputs.NAME] tables)"
                )
            return
        for one in self.inputs:
            expect("inputs", one, Input, "a tuple of Input")
            if one.single:
                raise PipelineConfigError(
                    f"inputs.{one.name}", f"{SINGLE!r} names the one input of [source]"
                )
        for name, default in (("event_time", None), ("watermark", Watermark()), ("dedup", ())):
            if getattr(self, name) != default:
                raise PipelineConfigError(
                    name, f"with several inputs each has its own: inputs.NAME.{name}"
                )
        if self.source != union_source(self.inputs, self.keys):
            raise PipelineConfigError(
                "source",
                "a pipeline of several inputs reads them: build it with Pipeline.with_inputs",
            )
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise PipelineConfigError("idle_timeout", "must be a positive duration")

    def _unknown_column(self, column: str) -> str:
        """Why ``column`` cannot be read from the pipeline's records."""
        if not self.inputs:
            return self.source.unknown_column(column)
        names = ", ".join(f"inputs.{i.name}.schema" for i in self.inputs)
        return f"column {column!r} is not a column of any input ({names})"

    @property
    def input_list(self) -> tuple[Input, ...]:
        """The pipeline's inputs: its several inputs, or the one of ``[source]`` (named
        :data:`~jobs.config.inputs.SINGLE`, with the pipeline's event time, watermark and
        dedup): what every check of an input reads."""
        if self.inputs:
            return self.inputs
        return (Input(SINGLE, self.source, self.event_time, self.watermark, self.dedup),)

    def read_as(self, one: Input) -> Pipeline:
        """The pipeline as input ``one``'s reader sees it (several inputs): a pipeline of that
        one input, its own source, event time and watermark, counting its records. What a
        reader of a source takes from a pipeline (the source's settings, keys and event time to
        read as text, the lake's paths) is then this input's; the aggregates are not a
        reader's business."""
        return replace(
            self,
            source=one.source,
            event_time=one.event_time,
            watermark=one.watermark,
            dedup=(),
            aggregates=(Aggregate(_RECORDS, count()),),
            inputs=(),
            idle_timeout=None,
        )

    def tag_as(self, one: Input) -> Pipeline:
        """The pipeline as input ``one``'s records are tagged (several inputs): one input whose
        records have every column of the pipeline's (the inputs' union: a column ``one`` lacks
        is null in its records, and :data:`~panes.inputs.INPUT_COLUMN` holds its name), with
        its own event time, watermark and dedup, and the pipeline's aggregates. Every input's
        tagged rows thus have the same columns, and meet in one stream."""
        return replace(
            self,
            source=replace(one.source, schema=self.source.schema, path=one.source.path),
            event_time=one.event_time,
            watermark=one.watermark,
            dedup=one.dedup,
            inputs=(),
            idle_timeout=None,
        )

    @property
    def several_inputs(self) -> bool:
        """Whether the pipeline reads several inputs (``[inputs.NAME]`` tables)."""
        return bool(self.inputs)

    def _check_keys(self, types: dict[str, str]) -> None:
        keys = self.keys
        if not keys:
            raise PipelineConfigError("keys", "at least one key column is required")
        for k in keys:
            if k not in types:
                raise PipelineConfigError("keys", f"key {self._unknown_column(k)}")
            if types[k] == "timestamp" and k in {i.event_time for i in self.input_list}:
                raise PipelineConfigError("keys", f"{k!r} is the event-time column")
            if types[k] not in KEY_TYPES:
                raise PipelineConfigError(
                    "keys", f"key column {k!r} is {types[k]}; keys are one of {sorted(KEY_TYPES)}"
                )
        if len(set(keys)) != len(keys):
            raise PipelineConfigError("keys", f"duplicated key column in {list(keys)}")

    def _check_dedup(self, one: Input) -> None:
        """An input's ``dedup`` names its columns (each once), ``dedup_horizon`` is a positive
        duration given only with them (docs/running.md, "Duplicates")."""
        where, dedup = one.dedup_setting(), one.dedup
        for c in dedup:
            if not isinstance(c, str) or c not in one.types:
                raise PipelineConfigError(where, one.unknown_column(str(c)))
        if len(set(dedup)) != len(dedup):
            raise PipelineConfigError(where, f"duplicated column in {list(dedup)}")
        if dedup and one.source.is_pane_log:
            raise PipelineConfigError(
                where,
                "a pane_log source's rows are panes, each once in the upstream's pane log (a "
                "retraction repeats its pane's columns on purpose): remove dedup",
            )
        if self.dedup_horizon is not None:
            if not any(i.dedup for i in self.input_list):
                raise PipelineConfigError("dedup_horizon", "is given without dedup columns")
            if self.dedup_horizon <= 0:
                raise PipelineConfigError("dedup_horizon", "must be a positive duration")

    def _check_event_time(self, one: Input) -> None:
        """An input's event time: a timestamp or integral column of it (or ingestion time; a
        pane-log source's is the upstream's), and a writer-noted watermark over local files."""
        types, event_time, setting = one.types, one.event_time, one.setting("event_time")
        policy = one.setting("watermark.policy")
        if one.source.is_pane_log:
            self._check_pane_log_time(one)
        elif event_time is None:
            if not one.ingestion_time:
                raise PipelineConfigError(
                    setting, f"is required (or use {policy} = 'ingestion_time')"
                )
        elif event_time not in types:
            raise PipelineConfigError(setting, one.unknown_column(event_time))
        elif types[event_time] not in ("timestamp", *INTEGRAL):
            raise PipelineConfigError(
                setting,
                f"column {event_time!r} must be a timestamp or an integral "
                f"epoch ({one.source_setting('epoch_unit')}), not {types[event_time]}",
            )
        if one.writer_noted and not one.source.is_landing:
            raise PipelineConfigError(
                policy,
                "writer_noted reads the writers' marks in the landing directory: it needs a "
                f"source of files, not {one.source.format}",
            )
        if one.writer_noted and has_scheme(one.source.path):
            raise PipelineConfigError(
                policy,
                "writer_noted reads the writers' marks as local files: "
                f"{one.source_setting('path')} must be a local (or mounted) directory, not a URI",
            )

    @staticmethod
    def _check_pane_log_time(one: Input) -> None:
        """A pane-log source's event time is the pane's output timestamp and its watermark the
        upstream's: nothing to configure."""
        if one.event_time is not None:
            raise PipelineConfigError(
                one.setting("event_time"),
                "a pane_log source's event time is the upstream pane's output timestamp: "
                "remove event_time",
            )
        if one.watermark.policy != "bounded_out_of_orderness" or one.watermark.delay != 0:
            raise PipelineConfigError(
                one.setting("watermark"),
                "a pane_log source follows the upstream's watermark (recorded with each pane): "
                "remove the watermark policy and delay",
            )

    def _check_aggregates(self, types: dict[str, str]) -> None:
        if not self.aggregates:
            raise PipelineConfigError("aggregates", "at least one named aggregate is required")
        names = [a.name for a in self.aggregates]
        for agg in self.aggregates:
            where = f"aggregates.{agg.name}"
            if not IDENTIFIER.fullmatch(agg.name):
                raise PipelineConfigError(where, "aggregate names are identifiers")
            if agg.name in self.keys:
                raise PipelineConfigError(where, "an aggregate cannot be named like a key column")
            if names.count(agg.name) > 1:
                raise PipelineConfigError(where, "the name is given twice")
            if agg.column is not None and agg.column not in types:
                raise PipelineConfigError(where, self._unknown_column(agg.column))
            agg.output_type(types)
        if not self.combine_fn().value_is_accumulator:  # the pane log stores accumulators
            record = {c: sample_value(arrow_type(t)) for c, t in types.items()}
            for agg in self.aggregates:
                _check_storable(agg, record)
        clash = [n for n in (*self.keys, *names) if n in FIXED_NAMES]
        if clash:
            raise PipelineConfigError(
                "aggregates" if clash[0] in names else "keys",
                f"{clash[0]!r} is a reserved pane-log column",
            )

    def _check_weighted(self) -> None:
        """A source with retractions (weight -1 elements) needs aggregates that withdraw and
        the accumulating & retracting mode (:func:`panes.weights.check_weighted`)."""
        ups = [i.source.upstream for i in self.input_list]
        retracting = [up for up in ups if up is not None and up.columns.retracting]
        if not retracting:  # not self.weighted
            return
        up = retracting[0]
        for agg in self.aggregates:
            if not agg.fn.can_retract:
                raise PipelineConfigError(
                    f"aggregates.{agg.name}",
                    f"{text_of(agg.fn)} cannot withdraw a value, and the upstream "
                    f"{up.name!r} writes retractions; use {', '.join(RETRACTING)}",
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

    def rules(self) -> WindowRules:
        """The rules of the pipeline's windows (:class:`~panes.rules.WindowRules`): what every
        layer past the configuration takes, the one holder of its allowed lateness."""
        return self.windowing().rules

    def windowing(self) -> Windowing:
        """The window, trigger, modes and lateness, as the model's :class:`Windowing` (its
        rules: :meth:`rules`)."""
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

    def engine_factory(self) -> Callable[[], Engine]:
        """What builds :meth:`engine` where it runs (on a Python worker): of the model's values
        only. A worker that unpickled the pipeline itself would import the configuration, the
        driver's modules and pandas first (~0.4 s each worker)."""
        return functools.partial(
            Engine, self.windowing(), self.combine_fn(), weighted=self.weighted
        )

    def engine(self) -> Engine:
        return self.engine_factory()()

    @property
    def weighted(self) -> bool:
        """Whether elements can weigh -1: an input is the pane log of a retracting upstream."""
        ups = [i.source.upstream for i in self.input_list]
        return any(up is not None and up.columns.retracting for up in ups)

    @property
    def aggregate_types(self) -> dict[str, str]:
        """Aggregate name -> output column type."""
        types = self.source.types
        return {a.name: a.output_type(types) for a in self.aggregates}

    @property
    def value_columns(self) -> tuple[str, ...]:
        """Source columns the aggregates read, their filters' conditions included (what a
        tagger reads of a record)."""
        return tuple(dict.fromkeys(c for a in self.aggregates for c in a.columns))

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The distinct conditions of the filtered aggregates, each computed once per record
        where records are tagged (:mod:`panes.conditions`)."""
        found = (c for a in self.aggregates for c in combiners.conditions_of(a.fn))
        return tuple(dict.fromkeys(found))

    @property
    def carried_columns(self) -> tuple[str, ...]:
        """The fields of a tagged element's value (the operator's value columns): the source
        columns the aggregates read themselves, and each condition's flag
        (:func:`panes.combiners.carried_fields_of`); equal to :attr:`value_columns` without
        filtered aggregates. With several inputs, also the element's input
        (:data:`~panes.inputs.INPUT_COLUMN`), which a late element's row thus names."""
        carried = (c for a in self.aggregates for c in combiners.carried_fields_of(a.fn))
        named = (INPUT_COLUMN,) if self.several_inputs else ()  # a late element names its input
        return tuple(dict.fromkeys((*carried, *named)))

    def carried_type(self, column: str) -> str:
        """The schema type name of a carried column (a condition's flag: ``boolean``)."""
        flags = {c.flag for c in self.conditions}
        return "boolean" if column in flags else self.source.types[column]

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
    def run_location(self) -> str:
        """Where runs keep Spark's checkpoint and their own files (the lake's identity,
        fingerprint and state layout, control rows, noted landing changes): ``checkpoint``, a
        directory on a filesystem every node mounts or the URI of any filesystem Spark's Hadoop
        connectors write a checkpoint to (``gs://``, ``s3a://``, ``abfss://``, ``hdfs://``,
        ``file://``), by default the lake itself. A lake in an object store needs
        ``checkpoint``. An absolute local path, or the URI without a trailing slash. Docstrings
        name this directory ``<checkpoint>``."""
        from jobs.checkpoint.files import is_local, local_path

        if self.checkpoint is not None:
            if not is_local(self.checkpoint):
                return self.checkpoint.rstrip("/")
            return str(Path(local_path(self.checkpoint) or self.checkpoint).absolute())
        if self.lake_in_store:
            raise PipelineConfigError(
                "checkpoint",
                f"is required for a lake in an object store ({self.lake}): the directory where "
                "runs keep Spark's checkpoint, on a filesystem every node of the cluster mounts "
                '(checkpoint = "/shared/checkpoints/NAME") or a URI Spark\'s Hadoop filesystems '
                'write to (checkpoint = "gs://BUCKET/checkpoints/NAME")',
            )
        return str(self.lake_path)

    @property
    def run_in_store(self) -> bool:
        """Whether the run's directory is a URI of a filesystem other than the local one."""
        from jobs.checkpoint.files import is_local

        return not is_local(self.run_location)

    @property
    def run_path(self) -> Path:
        """:attr:`run_location` as a local path; ValueError when it is another filesystem's URI
        (read it through :attr:`run_files`)."""
        if self.run_in_store:
            raise ValueError(f"the checkpoint {self.run_location} is not a local directory")
        return Path(self.run_location)

    @property
    def run_files(self) -> CheckpointFiles:
        """The run's directory on its filesystem (:class:`jobs.checkpoint.files.CheckpointFiles`:
        the JVM's Hadoop filesystem while a Spark session runs, else a Python one)."""
        from jobs.checkpoint.files import CheckpointFiles

        return CheckpointFiles.at(self.run_location)

    def table_path(self, table: str) -> str:
        """``panes``, ``late``, ``rejected``: the Delta tables under the lake."""
        return f"{self.lake_location}/{table}"

    @property
    def checkpoint_path(self) -> str:
        """Spark's streaming checkpoint: ``<run_location>/_checkpoint``."""
        return f"{self.run_location}/_checkpoint"

    @property
    def control_path(self) -> str:
        return f"{self.run_location}/_control"

    @property
    def set_aside(self) -> str:
        """How to set the lake aside to rebuild it (a message's words)."""
        if self.checkpoint is None and not self.lake_in_store:
            return f"move its lake aside (mv {self.lake_path} {self.lake_path}.old)"
        return (
            f"move its lake ({self.lake_location}) and its checkpoint directory "
            f"({self.run_location}) aside"
        )

    def describe(self) -> str:
        """The pipeline in a few lines (``panestore check`` prints them)."""
        aggs = ", ".join(f"{a.name} = {a.fn}" for a in self.aggregates)
        if self.inputs:
            return self._describe_inputs(aggs)
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
            f"{self._describe_dedup()}"
        )

    def _describe_inputs(self, aggs: str) -> str:
        """:meth:`describe` of a pipeline of several inputs: a line per input."""
        lines = [f"pipeline {self.name}: {len(self.inputs)} inputs -> {self.lake}"]
        for one in self.inputs:
            src = one.source
            if src.upstream is not None:
                origin = f"the pane log of {src.upstream.name} ({src.upstream.pane_log})"
            elif src.is_delta:
                origin = f"the Delta table {src.path}"
            elif src.is_dataframe:
                origin = f"a streaming DataFrame{f' ({src.path})' if src.path else ''}"
            else:
                origin = f"{src.format} files in {src.path}"
            if src.upstream is not None:
                clock = "the upstream's watermark"
            elif one.ingestion_time:
                clock = "ingestion time"
            else:
                delay = format_duration(one.watermark.delay)
                clock = f"event time {one.event_time}, watermark {one.watermark.policy} {delay}"
            dedup = f", duplicates by {', '.join(one.dedup)}" if one.dedup else ""
            lines.append(f"  input {one.name}: {origin}; {clock}{dedup}")
        idle = "never" if self.idle_timeout is None else format_duration(self.idle_timeout)
        lines.append(
            f"  keys {list(self.keys)}, watermark: the inputs' minimum (idle after {idle}), "
            f"{self.window}, trigger {self.trigger}, {self.accumulation_mode.name.lower()}, "
            f"allowed lateness {format_duration(self.allowed_lateness)}"
        )
        lines.append(f"  aggregates: {aggs}")
        return "\n".join(lines)

    def _describe_dedup(self) -> str:
        """The dedup line of :meth:`describe` (empty without dedup)."""
        if not self.dedup:
            return ""
        h = self.dedup_horizon
        horizon = "the windows' (end + allowed lateness)" if h is None else format_duration(h)
        return f"\n  duplicates dropped by key and {', '.join(self.dedup)}, horizon {horizon}"


def _check_storable(agg: Aggregate, record: dict[str, Any]) -> None:
    """Refuse an aggregate whose accumulator the pane log cannot store, as far as its empty
    accumulator and its accumulator of one ``record`` (a value of each source column) show;
    one that holds such a value only later fails its batch, naming it."""
    fn = agg.fn
    accs = [fn.create()]
    # a combiner's own code may refuse the probe's values: that is no verdict on its storage
    with contextlib.suppress(Exception):
        accs.append(fn.add_all(fn.create(), inputs_of(fn, [(record, 0)])))
    for acc in accs:
        try:
            to_text(fn, acc, agg.name)
        except UnstorableAccumulator as e:
            raise PipelineConfigError(f"aggregates.{agg.name}", e.detail) from None
