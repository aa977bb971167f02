"""Saving a pipeline as TOML: the inverse of :mod:`jobs.config.load`.

A :class:`Pipeline` built in Python (with the model's own window functions, triggers and
combiners) is written as a complete configuration file, every setting spelled out, so that the
``panestore`` command can inspect, materialize or verify the lake it runs
(:func:`save_pipeline`), and loading the file gives the same pipeline back. What a file cannot
name is refused, naming the setting: a user's own ``CombineFn`` whose text the aggregate grammar
does not read back.

>>> from jobs.config import load_pipeline
>>> demo = load_pipeline("conf/demo.toml")
>>> from jobs.config.load import pipeline_from_dict
>>> pipeline_from_dict(pipeline_to_dict(demo), defaults={}) == demo
True
"""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path
from typing import Any

from jobs.config.pipeline import Pipeline
from jobs.config.source import Source
from jobs.config.values import PipelineConfigError, format_size
from jobs.config.watermark import Watermark
from panes import format_duration, parse_aggregate, parse_trigger, parse_window
from panes.combine_fn import CombineFn, text_of
from sinks.lake import write_atomically

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _text(where: str, value: Any, parse: Any) -> str:
    text = str(value)
    try:
        same = parse(text) == value
    except ValueError:
        same = False
    if not same:
        raise PipelineConfigError(
            where,
            f"{text_of(value) if isinstance(value, CombineFn) else repr(value)} has no text the "
            "configuration grammar reads back as it is",
        )
    return text


def pipeline_to_dict(pipeline: Pipeline) -> dict[str, Any]:
    """The TOML structure of ``pipeline``: every setting, as :func:`load_pipeline` reads it.

    Raises :class:`PipelineConfigError` naming a setting a file cannot hold."""
    conf: dict[str, Any] = {
        "name": pipeline.name,
        "lake": pipeline.lake,
        "keys": list(pipeline.keys),
    }
    if pipeline.checkpoint is not None:
        conf["checkpoint"] = pipeline.checkpoint
    if pipeline.single_writer:
        conf["single_writer"] = True
    inputs: dict[str, Any] = {}
    if pipeline.several_inputs:  # each input's table: its source, event time and watermark
        for one in pipeline.inputs:
            table = _source(one.source)
            if one.event_time is not None:
                table["event_time"] = one.event_time
            table["watermark"] = _watermark(one.watermark)
            inputs[one.name] = table
        conf["dedup"] = {one.name: list(one.dedup) for one in pipeline.inputs if one.dedup}
        if pipeline.idle_timeout is not None:
            conf["idle_timeout"] = format_duration(pipeline.idle_timeout)
    else:
        if pipeline.event_time is not None:
            conf["event_time"] = pipeline.event_time
        conf["dedup"] = list(pipeline.dedup)
    if pipeline.dedup_horizon is not None:
        conf["dedup_horizon"] = format_duration(pipeline.dedup_horizon)

    def enum(value: Enum) -> str:
        return value.name.lower()

    conf.update(
        window=_text("window", pipeline.window, parse_window),
        trigger=_text("trigger", pipeline.trigger, parse_trigger),
        accumulation_mode=enum(pipeline.accumulation_mode),
        allowed_lateness=format_duration(pipeline.allowed_lateness),
        timestamp_combiner=enum(pipeline.timestamp_combiner),
        on_time_behavior=enum(pipeline.on_time_behavior),
        closing_behavior=enum(pipeline.closing_behavior),
        allow_finishing_trigger=pipeline.allow_finishing_trigger,
        state_buckets=pipeline.state_buckets,
        fold_memory=format_size(pipeline.fold_memory),
    )
    if inputs:
        conf["inputs"] = inputs
    else:
        conf.update(source=_source(pipeline.source), watermark=_watermark(pipeline.watermark))
    conf["aggregates"] = {
        a.name: _text(f"aggregates.{a.name}", a.fn, parse_aggregate) for a in pipeline.aggregates
    }
    return conf


def _watermark(wm: Watermark) -> dict[str, Any]:
    """A ``[watermark]`` table."""
    return {
        "policy": wm.policy,
        "delay": format_duration(wm.delay),
        "idle_timeout": format_duration(wm.idle_timeout),
    }


def _source(src: Source) -> dict[str, Any]:
    """A ``[source]`` table (or an input's source settings)."""
    source: dict[str, Any] = {"format": src.format, "path": src.path}
    if src.is_pane_log:
        if src.pipeline is not None:
            source["pipeline"] = src.pipeline
    else:
        source["schema"] = dict(src.schema)
    if src.max_files_per_trigger is not None:
        source["max_files_per_trigger"] = src.max_files_per_trigger
    for name in ("starting_version", "starting_timestamp"):
        if getattr(src, name) is not None:
            source[name] = getattr(src, name)
    if src.skip_change_commits:
        source["skip_change_commits"] = True
    source.update(
        csv_header=src.csv_header,
        csv_delimiter=src.csv_delimiter,
        epoch_unit=src.epoch_unit,
        bounded=src.bounded,
        create_path=src.create_path,
    )
    return source


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # TOML's basic strings take JSON's escapes
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def pipeline_to_toml(pipeline: Pipeline) -> str:
    """``pipeline`` as the text of a configuration file (see :func:`pipeline_to_dict`)."""
    conf = pipeline_to_dict(pipeline)
    tables = ("source", "watermark", "inputs", "aggregates")
    lines = [f"{_key(k)} = {_value(v)}" for k, v in conf.items() if k not in tables]
    for name, table in conf.get("inputs", {}).items():
        lines += ["", f"[inputs.{_key(name)}]"]
        lines += [f"{_key(k)} = {_value(v)}" for k, v in table.items() if k != "watermark"]
        lines += ["", f"[inputs.{_key(name)}.watermark]"]
        lines += [f"{_key(k)} = {_value(v)}" for k, v in table["watermark"].items()]
    for table in ("source", "watermark", "aggregates"):
        if table not in conf:
            continue
        lines += ["", f"[{table}]"]
        lines += [f"{_key(k)} = {_value(v)}" for k, v in conf[table].items()]
    return "\n".join(lines) + "\n"


def save_pipeline(pipeline: Pipeline, path: str | Path) -> Path:
    """Write ``pipeline`` as a configuration file at ``path`` (replaced whole) and return it:
    ``panestore check|materialize|verify|query PATH`` then work on the lake it runs."""
    target = Path(path)
    write_atomically(target, pipeline_to_toml(pipeline))
    return target
