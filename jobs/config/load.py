"""Loading a pipeline: TOML layers merged, then parsed into a :class:`Pipeline`.

:func:`load_pipeline` reads the defaults shipped in the package (``jobs/config/defaults.toml``),
the configuration file and any overrides, merges them (:func:`merge_layers`: one merge, a table
setting by setting, anything else replaced) and parses the result: every setting is parsed into
its type once (a ``WindowFn``, a ``Trigger``, an enum, a duration in µs) before the
:class:`Pipeline` is built, so no field is rewritten afterwards. A bad setting raises
:class:`PipelineConfigError` naming it. A ``pane_log`` source's upstream is resolved here too
(:func:`resolve_upstream`: its configuration file, or its lake's pane log).

Several inputs (``[inputs.NAME]`` tables, :mod:`jobs.config.inputs`) take the defaults of
``[source]`` and ``[watermark]`` each, and a file gives them or ``[source]``, not both
(:func:`merge_layers`).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Any

from jobs.config.aggregates import Aggregate
from jobs.config.inputs import Input, dedup_by_input
from jobs.config.pipeline import Pipeline
from jobs.config.source import FORMATS, Source, Upstream
from jobs.config.values import (
    PipelineConfigError,
    expect,
    parse_duration_setting,
    parse_size_setting,
)
from jobs.config.watermark import WATERMARK_POLICIES, Watermark

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from jobs.config.event_time import EPOCH_UNITS
from jobs.reading.pane_log.upstream import (
    PaneLogColumns,
    has_pane_log,
    offered_type,
    pane_log_columns,
)
from panes import (
    AccumulationMode,
    ClosingBehavior,
    Inputs,
    OnTimeBehavior,
    TimestampCombiner,
    Trigger,
    WindowFn,
    parse_aggregate,
    parse_trigger,
    parse_window,
)
from sinks.lake import LakeError, is_object_store


def resolve_upstream(path: str, pipeline: str | None) -> Upstream:
    """The upstream of a ``pane_log`` source: ``path`` is the upstream's configuration file
    (TOML), or its lake directory (then its pane log's table says what it holds; ``pipeline``,
    if given, must be the name it was written by)."""
    if is_object_store(path):
        return _upstream_lake(path.rstrip("/") + "/panes", pipeline)
    location = Path(path)
    if location.is_file():
        up = load_pipeline(location)
        if pipeline is not None and pipeline != up.name:
            raise PipelineConfigError(
                "source.pipeline", f"{path} configures pipeline {up.name!r}, not {pipeline!r}"
            )
        types = up.source.types
        values = [(n, t) for n, t in up.aggregate_types.items() if offered_type(t)]
        columns = PaneLogColumns(
            up.name,
            tuple((k, types[k]) for k in up.keys),
            tuple(values),
            up.windowing().accumulation_mode.name,
        )
        return Upstream(up.table_path("panes"), columns)
    if not location.is_dir():
        raise PipelineConfigError(
            "source.path",
            f"{path} does not exist: name the upstream's configuration file or its lake directory "
            "(an upstream that has not run yet has no lake: name its configuration file)",
        )
    return _upstream_lake(str(location.absolute() / "panes"), pipeline)


def _upstream_lake(pane_log: str, pipeline: str | None) -> Upstream:
    """The upstream whose pane log is ``pane_log`` (in its lake, local or in an object store)."""
    if not has_pane_log(pane_log):
        raise PipelineConfigError(
            "source.path",
            f"the upstream has no pane log yet ({pane_log}): run it first, or name its "
            "configuration file as source.path, which tells this pipeline its columns so it can "
            "run before the upstream has (reading nothing)",
        )
    try:
        return Upstream(pane_log, pane_log_columns(pane_log, pipeline))
    except LakeError as e:
        raise PipelineConfigError("source.path", str(e)) from None


# -- the parser: TOML structure -> Pipeline -------------------------------------------------

_TOP = {f.name for f in fields(Pipeline)}
_SOURCE = {f.name for f in fields(Source)} - {"upstream"}
_WATERMARK = {f.name for f in fields(Watermark)}


def merge_layers(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration ``layers`` make together, each over the ones before it (defaults,
    file, overrides): a table (``[source]``, ``[watermark]``, each ``[inputs.NAME]`` and its
    ``watermark``) is merged setting by setting; anything else, ``[aggregates]`` included (the
    list of aggregates is the last layer's), is replaced.

    When a layer after the first has ``[inputs.NAME]`` tables, the first layer's (the
    defaults') ``[source]`` and ``[watermark]`` are each input's defaults, and a later layer
    giving ``[source]``, ``[watermark]`` or ``event_time`` as well is refused: those are the
    inputs' own."""
    first, rest = (layers[0], layers[1:]) if layers else ({}, ())
    if any("inputs" in layer for layer in rest):
        for layer in rest:
            for one_input in ("source", "watermark", "event_time"):
                if one_input in layer:
                    raise PipelineConfigError(
                        one_input,
                        f"with [inputs.NAME] tables each input has its own: inputs.NAME."
                        f"{'' if one_input == 'source' else one_input} "
                        f"({'its settings' if one_input == 'source' else 'in its table'})",
                    )
        defaults = {k: v for k, v in first.items() if k not in ("source", "watermark")}
        per_input = {"watermark": dict(first.get("watermark", {})), **first.get("source", {})}
        names = [n for layer in rest for n in layer.get("inputs", {}) or {}]
        first = {**defaults, "inputs": {n: per_input for n in dict.fromkeys(names)}}
    merged: dict[str, Any] = {}
    for layer in (first, *rest):
        for k, v in layer.items():
            before = merged.get(k)
            if k == "inputs" and isinstance(v, Mapping) and isinstance(before, Mapping):
                merged[k] = {**before, **{n: _merge_input(before.get(n), t) for n, t in v.items()}}
            elif isinstance(v, Mapping) and isinstance(before, Mapping) and k != "aggregates":
                merged[k] = {**before, **v}
            else:
                merged[k] = v
    return merged


def _merge_input(before: Any, table: Any) -> Any:
    """One ``[inputs.NAME]`` table over an earlier layer's: setting by setting, its watermark
    too."""
    if not isinstance(before, Mapping) or not isinstance(table, Mapping):
        return table
    merged = {**before, **table}
    if isinstance(before.get("watermark"), Mapping) and isinstance(table.get("watermark"), Mapping):
        merged["watermark"] = {**before["watermark"], **table["watermark"]}
    return merged


def pipeline_from_dict(
    data: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> Pipeline:
    """A :class:`Pipeline` from the TOML structure (``defaults`` merged under it)."""
    return _parse(merge_layers(defaults or {}, data))


def _parse(conf: Mapping[str, Any]) -> Pipeline:
    """Parse the settings of a merged configuration into a :class:`Pipeline`. A setting that is
    absent takes the dataclass's default; a bad one raises :class:`PipelineConfigError`."""
    _check_keys("", conf, _TOP)
    if "inputs" in conf:
        return _parse_inputs(conf)
    if "idle_timeout" in conf:
        raise PipelineConfigError(
            "idle_timeout", "is a setting of several inputs ([inputs.NAME] tables)"
        )
    for required in ("name", "source", "lake", "keys", "aggregates", "window"):
        if required not in conf:
            raise PipelineConfigError(required, "is required")
    source = _parse_source(conf["source"])
    watermark = conf.get("watermark", {})
    if not isinstance(watermark, Mapping):
        raise PipelineConfigError("watermark", "must be a table ([watermark])")
    _check_keys("watermark", watermark, _WATERMARK)
    settings = _parse_settings("", conf, _SETTINGS, skip=frozenset({"source", "watermark"}))
    wm_settings = _parse_settings("watermark.", watermark, _WATERMARK_SETTINGS)
    return Pipeline(source=source, watermark=Watermark(**wm_settings), **settings)


_INPUT = _SOURCE | {"event_time", "watermark"}


def _parse_inputs(conf: Mapping[str, Any]) -> Pipeline:
    """A configuration of several inputs (``[inputs.NAME]`` tables): each input's source,
    event time, watermark and dedup, then the pipeline of them."""
    for required in ("name", "inputs", "lake", "keys", "aggregates", "window"):
        if required not in conf:
            raise PipelineConfigError(required, "is required")
    tables = conf["inputs"]
    if not isinstance(tables, Mapping) or not tables:
        raise PipelineConfigError("inputs", "must be tables, one per input: [inputs.NAME]")
    dedup = conf.get("dedup", [])
    if dedup == []:
        dedup = {}
    if not isinstance(dedup, Mapping):
        raise PipelineConfigError(
            "dedup", 'with several inputs, per input: dedup = { NAME = "id_column" }'
        )
    try:  # the names first: errors name the inputs' settings by them
        Inputs(tables)
    except ValueError as e:
        raise PipelineConfigError("inputs", str(e)) from None
    by_input = dedup_by_input(dedup, tuple(tables))
    inputs = tuple(_parse_input(str(n), t, by_input.get(n, ())) for n, t in tables.items())
    skip = frozenset({"inputs", "dedup"})
    settings = _parse_settings("", conf, _SETTINGS, skip=skip)
    keys = settings.pop("keys")
    return Pipeline.with_inputs(inputs, keys, **settings)


def _parse_input(name: str, table: Any, dedup: tuple[str, ...]) -> Input:
    """One ``[inputs.NAME]`` table: a source's settings, its ``event_time`` and its
    ``[inputs.NAME.watermark]``; errors name the input's settings (``inputs.clicks.path``)."""
    where = f"inputs.{name}"
    if not isinstance(table, Mapping):
        raise PipelineConfigError(where, f"must be a table ([{where}])")
    _check_keys(where, table, _INPUT)
    watermark = table.get("watermark", {})
    if not isinstance(watermark, Mapping):
        raise PipelineConfigError(f"{where}.watermark", f"must be a table ([{where}.watermark])")
    _check_keys(f"{where}.watermark", watermark, _WATERMARK)
    source_table = {k: v for k, v in table.items() if k not in ("event_time", "watermark")}
    try:
        source = _parse_source(source_table)
        wm = Watermark(**_parse_settings("watermark.", watermark, _WATERMARK_SETTINGS))
    except PipelineConfigError as e:
        setting = e.field.split(".", 1)[1] if e.field.startswith("source.") else e.field
        raise PipelineConfigError(f"{where}.{setting}", e.message) from None
    event_time = _SETTINGS["event_time"](f"{where}.event_time", table.get("event_time"))
    return Input(name, source, event_time, wm, dedup)


def _parse_source(table: Any) -> Source:
    """The ``[source]`` table; a ``pane_log`` source is completed with its upstream and the
    columns the upstream's pane log offers."""
    if not isinstance(table, Mapping):
        raise PipelineConfigError("source", "must be a table ([source])")
    _check_keys("source", table, _SOURCE)
    upstream = None
    schema: Mapping[Any, Any]
    if table.get("format") == "pane_log":
        upstream = _pane_log_upstream(table)
        schema = upstream.schema
    elif isinstance(table.get("schema"), Mapping):
        schema = table["schema"]
    elif table.get("format") == "delta" and "schema" not in table:
        schema = dict(delta_table_columns(table.get("path")))
    else:
        raise PipelineConfigError("source.schema", "is required: a table of column = type")
    if "path" not in table and table.get("format") != "dataframe":
        raise PipelineConfigError("source.path", "is required")
    settings = _parse_settings("source.", table, _SOURCE_SETTINGS, skip=frozenset({"schema"}))
    columns = tuple((str(c), str(t).lower()) for c, t in schema.items())
    settings.setdefault("path", "")  # a dataframe source's description
    return Source(schema=columns, upstream=upstream, **settings)


def _pane_log_upstream(src: Mapping[str, Any]) -> Upstream:
    """The upstream a ``pane_log`` source's ``[source]`` names."""
    if "schema" in src:
        raise PipelineConfigError(
            "source.schema", "a pane_log source's columns are the upstream's: remove the schema"
        )
    path = src.get("path")
    if not isinstance(path, str) or not path:
        raise PipelineConfigError(
            "source.path", "is required: the upstream's configuration file or lake directory"
        )
    name = src.get("pipeline")
    if name is not None and not isinstance(name, str):
        raise PipelineConfigError("source.pipeline", f"must be a pipeline name, got {name!r}")
    return resolve_upstream(path, name)


def delta_table_columns(path: Any) -> tuple[tuple[str, str], ...]:
    """The schema of a ``delta`` source that gives none: the table's columns of the types a
    pipeline reads (:func:`jobs.reading.delta_table.log.source_table_columns`)."""
    from jobs.reading.delta_table.log import source_table_columns

    if not isinstance(path, str) or not path:
        raise PipelineConfigError("source.path", "is required: the Delta table's path or URI")
    try:
        return source_table_columns(path).columns
    except LakeError as e:
        raise PipelineConfigError("source.path", str(e)) from None


def parse_setting(name: str, value: Any) -> Any:
    """The field value of the top-level setting ``name`` from its form in a configuration file
    (text for a window, trigger, mode or duration; a list of keys), or ``value`` as it is when it
    is already parsed (a ``WindowFn``, a ``Trigger``, an enum member, a duration in µs):
    :class:`Pipeline` checks its type. Raises :class:`PipelineConfigError` naming ``name``.

    >>> parse_setting("allowed_lateness", "2h")
    7200000000
    >>> parse_setting("keys", ("user", "country"))
    ('user', 'country')
    """
    if isinstance(value, (WindowFn, Trigger, Enum)):
        return value
    if name == "keys" and isinstance(value, tuple):
        value = list(value)
    return _SETTINGS[name](name, value)


def _check_keys(where: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    for k in table:
        if k not in allowed:
            prefix = f"{where}." if where else ""
            close = difflib.get_close_matches(k, sorted(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PipelineConfigError(f"{prefix}{k}", f"unknown setting{hint}")


Parse = Callable[[str, Any], Any]
"""Turns the TOML value of the setting named by its first argument into the field's value."""


def _parse_settings(
    prefix: str,
    table: Mapping[str, Any],
    parsers: Mapping[str, Parse],
    skip: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The fields the settings of ``table`` give (by ``parsers``, one per setting; ``skip``:
    settings parsed by the caller), keyed by field name."""
    return {k: parsers[k](prefix + k, v) for k, v in table.items() if k not in skip}


def _of(kind: type, what: str) -> Parse:
    """A parser accepting a value of ``kind`` as it is."""

    def parse(name: str, value: Any) -> Any:
        expect(name, value, kind, what)
        return value

    return parse


def _optional(parse: Parse) -> Parse:
    """``parse``, and None for a setting that may be absent (a caller in Python passing None)."""

    def parse_optional(name: str, value: Any) -> Any:
        return None if value is None else parse(name, value)

    return parse_optional


def _path(name: str, value: Any) -> str:
    expect(name, value, (str, os.PathLike), "a path (text)")
    return str(os.fspath(value))


def _enum(enum: type[Enum]) -> Parse:
    """A parser of the (case-insensitive) name of a member of ``enum``."""

    def parse(name: str, value: Any) -> Enum:
        try:
            return enum[str(value).upper()]
        except KeyError:
            known = ", ".join(m.name.lower() for m in enum)
            raise PipelineConfigError(name, f"{value!r} is not one of: {known}") from None

    return parse


def _window(name: str, value: Any) -> WindowFn:
    if not isinstance(value, str):
        raise PipelineConfigError(name, f"not a window function: {value!r}")
    try:
        return parse_window(value)
    except (ValueError, TypeError) as e:
        raise PipelineConfigError(name, str(e)) from None


def _trigger(name: str, value: Any) -> Trigger:
    if not isinstance(value, str):
        raise PipelineConfigError(name, f"not a trigger: {value!r}")
    try:
        return parse_trigger(value)
    except ValueError as e:
        raise PipelineConfigError(name, str(e)) from None


def _keys(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(k, str) for k in value):
        return tuple(value)
    raise PipelineConfigError(name, "a column name or a list of column names")


def _dedup(name: str, value: Any) -> tuple[str, ...]:
    """The id columns: one name, or a list of them (empty: no deduplication)."""
    if isinstance(value, tuple) and all(isinstance(k, str) for k in value):
        return value
    if isinstance(value, list) and not value:
        return ()
    return _keys(name, value)


def _aggregates(name: str, value: Any) -> tuple[Aggregate, ...]:
    if not isinstance(value, Mapping):
        raise PipelineConfigError(name, 'must be a table: name = "count()", ...')
    aggregates = []
    for agg, text in value.items():
        where = f"{name}.{agg}"
        if not isinstance(text, str):
            raise PipelineConfigError(where, f"expected text like 'sum(x)', got {text!r}")
        try:
            aggregates.append(Aggregate(agg, parse_aggregate(text)))
        except ValueError as e:
            raise PipelineConfigError(where, str(e)) from None
    return tuple(aggregates)


_SETTINGS: dict[str, Parse] = {
    "name": _of(str, "an identifier (letters, digits, _)"),
    "lake": _path,
    "keys": _keys,
    "aggregates": _aggregates,
    "window": _window,
    "event_time": _optional(_of(str, "a column name")),
    "trigger": _trigger,
    "accumulation_mode": _enum(AccumulationMode),
    "allowed_lateness": parse_duration_setting,
    "timestamp_combiner": _enum(TimestampCombiner),
    "on_time_behavior": _enum(OnTimeBehavior),
    "closing_behavior": _enum(ClosingBehavior),
    "allow_finishing_trigger": _of(bool, "true or false"),
    "state_buckets": _of(int, "an integer 1..1048576"),
    "checkpoint": _optional(_path),
    "single_writer": _of(bool, "true or false"),
    "dedup": _dedup,
    "dedup_horizon": _optional(parse_duration_setting),
    "fold_memory": parse_size_setting,
    "idle_timeout": _optional(parse_duration_setting),
}
_SOURCE_SETTINGS: dict[str, Parse] = {
    "path": _path,
    "format": _of(str, f"one of {FORMATS}"),
    "max_files_per_trigger": _optional(_of(int, "an integer >= 1")),
    "csv_header": _of(bool, "true or false"),
    "csv_delimiter": _of(str, "one character"),
    "epoch_unit": _of(str, f"one of {list(EPOCH_UNITS)}"),
    "bounded": _of(bool, "true or false"),
    "create_path": _of(bool, "true or false"),
    "pipeline": _optional(_of(str, "a pipeline name")),
    "starting_version": _optional(_of(int, "a version >= 0")),
    "starting_timestamp": _optional(_of(str, "an ISO-8601 time (2024-05-01T00:00Z)")),
    "skip_change_commits": _of(bool, "true or false"),
}
_WATERMARK_SETTINGS: dict[str, Parse] = {
    "policy": _of(str, f"one of {WATERMARK_POLICIES}"),
    "delay": parse_duration_setting,
    "idle_timeout": parse_duration_setting,
}


DEFAULTS_FILE = Path(__file__).resolve().parent / "defaults.toml"
"""The defaults under every configuration, shipped in the package (package data)."""


def load_pipeline(
    path: str | Path,
    *,
    defaults: str | Path | None = DEFAULTS_FILE,
    overrides: Mapping[str, Any] | None = None,
) -> Pipeline:
    """Load a pipeline from TOML (``defaults`` first, None for none; ``overrides`` last,
    e.g. ``{"lake": ..., "source": {"path": ...}}``). A defaults file that is missing is an
    error, not a silent fall-back (an installation without its package data)."""
    base = {} if defaults is None else _read_toml(Path(defaults))
    return _parse(merge_layers(base, _read_toml(Path(path)), overrides or {}))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise PipelineConfigError("config", f"file not found: {path}") from None
    except OSError as e:  # a directory, no permission, ...
        raise PipelineConfigError("config", f"{path}: cannot be read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise PipelineConfigError("config", f"{path}: not valid TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise PipelineConfigError("config", f"{path}: not valid TOML: {e}") from None
