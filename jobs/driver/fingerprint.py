"""A lake's configuration fingerprint: the settings a lake is bound to from its first run on.

Some settings of a pipeline decide what its lake holds: the types of the columns in its tables,
how the operator's state is encoded, what the panes already in the pane log mean. Changing one of
them between runs would corrupt the lake (a ``long`` column receiving doubles, a trigger reading
another trigger's state). :class:`Fingerprint` lists these settings as canonical text; the first
run of a lake records it in ``<checkpoint>/_fingerprint.json`` (atomically, before Spark starts and
before any table is created), and every later run, and ``panestore check``, compares the
configuration with it before anything else: the first setting that differs is refused with
:class:`~jobs.config.values.PipelineConfigError` naming it, and nothing is written.

What is in it, and why (docs/running.md, "What may change on a live lake"):

* ``name``: the pipeline's name is the application id of its tables' exactly-once commits;
* ``source.format`` (and the upstream ``source.pipeline`` of a ``pane_log`` source): what the
  checkpoint's source offsets count;
* ``keys`` and the key columns' types: the state's keys and the tables' key columns;
* ``event_time``, its type (and ``source.epoch_unit`` for a numeric one), ``watermark.policy``:
  the event times of the elements already in windows;
* ``aggregates`` (names, order, expressions) and the types of the columns they read: the
  accumulators in state and the tables' value columns;
* ``window``, ``trigger``, ``accumulation_mode``, ``allowed_lateness``, ``timestamp_combiner``,
  ``on_time_behavior``, ``closing_behavior``: the windows in state, their trigger state, expiry
  times and holds, and the meaning of the panes already emitted;
* ``state_buckets``: how the state is laid out (:func:`jobs.driver.preflight.check_state_layout`);
* ``dedup`` (its columns' types) and ``dedup_horizon``, when given: the ids remembered in state
  and which records the counts already left out (docs/running.md, "Duplicates"). Absent from
  the fingerprint of a pipeline without them, so adding them to a live lake is refused too.

A pipeline of several inputs (``[inputs.NAME]``, :mod:`jobs.config.inputs`) has the same
settings, each input's under ``inputs.NAME.`` (its format, upstream, event time and its type,
epoch unit, watermark policy, dedup columns), and ``inputs``: the inputs' names. Adding or
removing an input (a lake of ``[source]`` given ``[inputs.NAME]`` tables, or the other way) is
refused as ``inputs`` (the checkpoint's offsets are the old inputs'); the one-input spelling's
settings are as they were before several inputs, so lakes written then keep their fingerprint.

Everything else may change: source columns no aggregate, key or event time reads,
``source.path``, ``max_files_per_trigger``, the csv options, ``bounded``, ``create_path``,
``watermark.delay`` and ``idle_timeout``, ``allow_finishing_trigger``.

A lake written before fingerprints (it has tables or a checkpoint but no ``_fingerprint.json``)
adopts the configuration's fingerprint if its pane log agrees with it (pipeline, keys,
aggregates, window and mode as its table properties record them; key and value column types)
and its recorded ``state_buckets`` is the configuration's; otherwise it is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from jobs.checkpoint.logs import LogFile
from jobs.config.pipeline import Pipeline
from jobs.config.sink_spec import view_spec
from jobs.config.values import PipelineConfigError
from panes import format_duration
from panes.combiners import text_of
from sinks.lake import (
    INTEGRAL,
    TABLES,
    LakeError,
    TableMissing,
    arrow_schema,
    arrow_type,
    check_table_properties,
    column_type,
    is_struct_type,
    open_table,
    plain_type,
    table_exists,
)

FINGERPRINT_FILE = "_fingerprint.json"
FINGERPRINT_FORMAT = 1
"""The version of the fingerprint file's layout (``format`` in it)."""
STATE_LAYOUT_FILE = "_state_layout.json"  # jobs.driver.runs's: read here to adopt an older lake

REBUILD = "docs/running.md, 'Recovering a lake'"

# Why a setting cannot change, by setting name (or its prefix, up to a dot)
_WHY = {
    "name": "it is the application id of the tables' exactly-once commits",
    "inputs": "the checkpoint's offsets count the old inputs, the state holds their elements",
    "source.format": "the checkpoint's source offsets count the old source",
    "source.pipeline": "the checkpoint's source offsets count the old upstream's pane log",
    "source.schema": "the tables and the operator's state hold the column with that type",
    "source.epoch_unit": "the windows in state were assigned by event times in that unit",
    "keys": "the operator's state and the tables are keyed by them",
    "event_time": "the windows in state were assigned by that event time",
    "watermark.policy": "the windows in state were assigned and held by that event time",
    "aggregates": "the accumulators in state and the tables' value columns are theirs",
    "window": "the pane log and the state hold that window function's windows",
    "trigger": "the windows held in state carry the old trigger's state",
    "accumulation_mode": "the panes already in the pane log were emitted in that mode",
    "allowed_lateness": "windows in state expire by it, and expired ones would be re-opened",
    "timestamp_combiner": "the windows in state hold output timestamps combined that way",
    "on_time_behavior": "the windows in state have fired under it",
    "closing_behavior": "the windows in state have fired under it",
    "state_buckets": "the operator's state is laid out by it",
    "dedup": "the operator's state remembers the ids it took, and the counts hold its decisions",
    "dedup_horizon": "the ids in the operator's state are remembered by it",
}


def canonical_type(name: str) -> str:
    """The first configuration type name of the same column type (``bigint`` -> ``long``); an
    upstream's sketch column's struct type as it is written."""
    if is_struct_type(name):
        return name
    return column_type(name).name


def _why(setting: str) -> str:
    """Why ``setting`` cannot change (an input's, ``inputs.NAME.X``, as ``source.X`` or ``X``)."""
    parts = setting.split(".")
    if parts[0] == "inputs" and len(parts) > 2:
        rest = ".".join(parts[2:])
        return _why(f"source.{rest}") or _why(rest)
    return _WHY.get(setting) or _WHY.get(setting.rsplit(".", 1)[0], "")


@dataclass(frozen=True)
class Difference:
    """The first setting where a configuration differs from its lake's recorded fingerprint
    (``None``: the setting is absent on that side)."""

    setting: str
    recorded: str | None
    configured: str | None

    def error(self, lake: str | Path) -> PipelineConfigError:
        """The refusal of a run with this difference: one line, naming the setting."""
        was = "without it" if self.recorded is None else f"with {self.recorded}"
        now = "has none" if self.configured is None else f"says {self.configured}"
        why = _why(self.setting)
        keep = "" if self.recorded is None else f"keep {self.setting} = {self.recorded}, or "
        return PipelineConfigError(
            self.setting,
            f"the lake {lake} was written {was}, the configuration {now}"
            f"{f' ({why})' if why else ''}. Nothing was run: {keep}rebuild the lake under the "
            f"new configuration ({REBUILD}).",
        )


@dataclass(frozen=True)
class Fingerprint:
    """The settings of a configuration whose change would corrupt its lake (see the module
    doc): ``(setting, canonical text)`` pairs, in a fixed order."""

    settings: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, pipeline: Pipeline) -> Fingerprint:
        """The fingerprint of ``pipeline``."""
        if pipeline.several_inputs:
            return cls._of_inputs(pipeline)
        types = {c: canonical_type(t) for c, t in pipeline.source.types.items()}
        source = pipeline.source
        out: list[tuple[str, str]] = [("name", pipeline.name), ("source.format", source.format)]
        if source.upstream is not None:
            out.append(("source.pipeline", source.upstream.name))
        out.append(("keys", ", ".join(pipeline.keys)))
        out += [(f"source.schema.{k}", types[k]) for k in pipeline.keys]
        et = pipeline.event_time
        out.append(("event_time", et or "none"))
        if et is not None:
            out.append((f"source.schema.{et}", types[et]))
            if types[et] in INTEGRAL:
                out.append(("source.epoch_unit", source.epoch_unit))
        out.append(("watermark.policy", pipeline.watermark.policy))
        out.append(("aggregates", ", ".join(a.name for a in pipeline.aggregates)))
        out += [(f"aggregates.{n}", text_of(fn)) for n, fn in view_spec(pipeline).aggregates]
        out += [(f"source.schema.{c}", types[c]) for c in pipeline.value_columns]
        out += _windowing_settings(pipeline)
        if pipeline.dedup:  # (absent without it: lakes written before dedup keep their fingerprint)
            horizon = pipeline.dedup_horizon
            out.append(("dedup", ", ".join(pipeline.dedup)))
            out += [(f"source.schema.{c}", types[c]) for c in pipeline.dedup]
            out.append(
                ("dedup_horizon", "windows" if horizon is None else format_duration(horizon))
            )
        return cls(tuple(dict(out).items()))  # a column both key and value is listed once

    @classmethod
    def _of_inputs(cls, pipeline: Pipeline) -> Fingerprint:
        """The fingerprint of a pipeline of several inputs: :meth:`of`'s settings, each input's
        under ``inputs.NAME.``, a column's type under the first input that has it."""
        types = {c: canonical_type(t) for c, t in pipeline.source.types.items()}
        owner: dict[str, str] = {}
        for one in pipeline.inputs:
            for c in one.types:
                owner.setdefault(c, f"inputs.{one.name}.schema.{c}")

        def typed(column: str) -> tuple[str, str]:
            return owner.get(column, f"inputs.schema.{column}"), types[column]

        out: list[tuple[str, str]] = [
            ("name", pipeline.name),
            ("inputs", ", ".join(i.name for i in pipeline.inputs)),
        ]
        for one in pipeline.inputs:
            where, source = f"inputs.{one.name}", one.source
            out.append((f"{where}.format", source.format))
            if source.upstream is not None:
                out.append((f"{where}.pipeline", source.upstream.name))
            et = one.event_time
            out.append((f"{where}.event_time", et or "none"))
            if et is not None:
                out.append(typed(et))
                if types[et] in INTEGRAL:
                    out.append((f"{where}.epoch_unit", source.epoch_unit))
            out.append((f"{where}.watermark.policy", one.watermark.policy))
        out.append(("keys", ", ".join(pipeline.keys)))
        out += [typed(k) for k in pipeline.keys]
        out.append(("aggregates", ", ".join(a.name for a in pipeline.aggregates)))
        out += [(f"aggregates.{n}", text_of(fn)) for n, fn in view_spec(pipeline).aggregates]
        out += [typed(c) for c in pipeline.value_columns]
        out += _windowing_settings(pipeline)
        for one in pipeline.inputs:
            if one.dedup:
                out.append((f"dedup.{one.name}", ", ".join(one.dedup)))
                out += [typed(c) for c in one.dedup]
        if any(one.dedup for one in pipeline.inputs):
            horizon = pipeline.dedup_horizon
            out.append(
                ("dedup_horizon", "windows" if horizon is None else format_duration(horizon))
            )
        return cls(tuple(dict(out).items()))

    @property
    def digest(self) -> str:
        """A short hash of the settings."""
        text = json.dumps(self.settings, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def difference(self, configured: Fingerprint) -> Difference | None:
        """The first setting (in this fingerprint's order, then the ones only ``configured``
        has) whose value differs, or None."""
        mine, theirs = dict(self.settings), dict(configured.settings)
        if ("inputs" in mine) != ("inputs" in theirs):  # an input added to [source], or removed
            one = "one input, [source]"
            return Difference("inputs", mine.get("inputs", one), theirs.get("inputs", one))
        for name in [*mine, *(n for n in theirs if n not in mine)]:
            if mine.get(name) != theirs.get(name):
                return Difference(name, mine.get(name), theirs.get(name))
        return None

    def to_json(self) -> str:
        """The text of the fingerprint file: format version, digest and settings."""
        return json.dumps(
            {"format": FINGERPRINT_FORMAT, "digest": self.digest, "settings": dict(self.settings)},
            indent=1,
        )

    @classmethod
    def read(cls, path: Path | LogFile) -> Fingerprint:
        """The fingerprint recorded at ``path`` (a local path or a run file on its store);
        refused (naming ``lake``) if unreadable or of another format version."""
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
            fmt = recorded.get("format")
            if fmt == FINGERPRINT_FORMAT:
                return cls(tuple((str(k), str(v)) for k, v in recorded["settings"].items()))
        except (OSError, ValueError, AttributeError, KeyError, TypeError) as e:
            raise PipelineConfigError(
                "lake",
                f"{path} cannot be read ({type(e).__name__}: {e}); restore it from the "
                f"lake's backup, or rebuild the lake ({REBUILD})",
            ) from None
        raise PipelineConfigError(
            "lake",
            f"{path} records fingerprint format {fmt}, this version reads format "
            f"{FINGERPRINT_FORMAT}: rebuild the lake ({REBUILD})",
        )


def holds_data(pipeline: Pipeline) -> bool:
    """Whether the lake holds anything a run wrote: a checkpoint or a table."""
    if pipeline.run_files.exists("_checkpoint"):
        return True
    spec = view_spec(pipeline)
    return any(table_exists(spec, t) for t in TABLES)


def check_lake_configuration(pipeline: Pipeline) -> Fingerprint | None:
    """Refuse ``pipeline`` if its lake is bound to another configuration (the module doc),
    raising :class:`PipelineConfigError` naming the first differing setting. Returns the
    fingerprint to record (a new lake, an older lake that agrees with the configuration, a lake
    whose recorded fingerprint binds nothing yet), or None when the recorded one matches.
    Reads only: nothing is written."""
    fingerprint = Fingerprint.of(pipeline)
    files = pipeline.run_files
    if files.exists(FINGERPRINT_FILE):
        diff = Fingerprint.read(LogFile(files, FINGERPRINT_FILE)).difference(fingerprint)
        if diff is None:
            return None
        if holds_data(pipeline):
            raise diff.error(pipeline.lake_location)
        return fingerprint  # recorded by a run that wrote nothing: the lake is still new
    if holds_data(pipeline):
        _check_older_lake(pipeline)
    return fingerprint


def bind_lake_configuration(pipeline: Pipeline) -> None:
    """:func:`check_lake_configuration`, then record the fingerprint if it is to be recorded
    (atomically: a killed run leaves no file or the whole file). Call it holding the lake's
    run lock, before Spark starts."""
    fingerprint = check_lake_configuration(pipeline)
    if fingerprint is None:
        return
    pipeline.run_files.replace(FINGERPRINT_FILE, fingerprint.to_json())


def _check_older_lake(pipeline: Pipeline) -> None:
    """Refuse a lake written before fingerprints unless its pane log and state layout agree
    with ``pipeline`` (the module doc)."""
    lake = pipeline.lake_location
    older = f"the lake {lake} has no {FINGERPRINT_FILE} (written by an older version)"
    files = pipeline.run_files
    if files.exists(STATE_LAYOUT_FILE):
        try:
            buckets = json.loads(files.read_text(STATE_LAYOUT_FILE)).get("state_buckets")
        except (OSError, ValueError, AttributeError):
            buckets = None
        if buckets != pipeline.state_buckets:
            raise Difference("state_buckets", str(buckets), str(pipeline.state_buckets)).error(lake)
    path = pipeline.table_path("panes")
    try:
        table = open_table(path, "pane log")
    except TableMissing:
        if files.exists("_checkpoint"):
            raise PipelineConfigError(
                "lake",
                f"{older} and a checkpoint but no pane log: which configuration wrote "
                f"it cannot be told. Rebuild the lake ({REBUILD})",
            ) from None
        return  # only tables a run created before its first batch: nothing to disagree with
    except LakeError as e:
        raise PipelineConfigError("lake", f"{older}, and {e}") from None
    try:
        spec = view_spec(pipeline)
        check_table_properties(spec, "pane log", path, table.metadata().configuration)
    except LakeError as e:
        raise PipelineConfigError("lake", f"{older}, and {e}") from None
    schema = arrow_schema(table)
    types = pipeline.source.types
    expected = [(k, f"source.schema.{k}", types[k]) for k in pipeline.keys]
    for name, out in pipeline.aggregate_types.items():
        read = getattr(spec.fns[name], "field", None)  # the source column it reads, if any
        expected.append((name, f"source.schema.{read}" if read else f"aggregates.{name}", out))
    for column, setting, type_name in expected:
        found = plain_type(schema.field(column).type) if column in schema.names else None
        if found != arrow_type(type_name):
            raise PipelineConfigError(
                setting,
                f"{older}, and its pane log holds column {column} as {found}, the "
                f"configuration makes it {arrow_type(type_name)}. Nothing was run: change the "
                f"configuration back, or rebuild the lake ({REBUILD}).",
            )


def _windowing_settings(pipeline: Pipeline) -> list[tuple[str, str]]:
    """The settings of the pipeline's windowing and state layout that bind a lake."""
    w = pipeline.windowing()
    return [
        ("window", str(w.window_fn)),
        ("trigger", str(w.trigger)),
        ("accumulation_mode", w.accumulation_mode.name.lower()),
        ("allowed_lateness", format_duration(w.rules.lateness)),
        ("timestamp_combiner", w.timestamp_combiner.name.lower()),
        ("on_time_behavior", w.on_time_behavior.name.lower()),
        ("closing_behavior", w.closing_behavior.name.lower()),
        ("state_buckets", str(pipeline.state_buckets)),
    ]
