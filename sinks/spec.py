"""What the readers of a pipeline's lake need to know about it: :class:`ViewSpec`.

``sinks`` does not import ``jobs`` (DESIGN.md: ``jobs -> sinks``), so the materializer, the
verifier and the inspection tools take a :class:`ViewSpec`: the pipeline's name, its lake
directory, key columns, named aggregates, window function and accumulation mode.
:func:`spec_from_pipeline` builds one from a ``jobs.pipeline.Pipeline`` (duck-typed).

The *fingerprint* of a spec hashes what decides the meaning of the pane log's rows (keys,
aggregates, window function, accumulation mode). It is stored in the table properties of the
tables the job and the materializer create (:func:`table_properties`), and checked whenever they
are opened (:func:`check_table_properties`): a table built by another configuration is refused with
:class:`ConfigMismatch`, and nothing is written. Tables created before fingerprints were recorded
have none and are not checked.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from panes.combiners import Aggregates, CombineFn
from panes.windowfns import WindowFn
from panes.windowing import AccumulationMode

# Table properties written on the tables panestore creates (the job's ``panes``, ``late`` and
# ``rejected``; the materializer's ``current``).
FINGERPRINT_PROPERTY = "panestore.fingerprint"
CONFIG_PROPERTY = "panestore.config"
PIPELINE_PROPERTY = "panestore.pipeline"
KIND_PROPERTY = "panestore.table"

TABLES = ("panes", "current", "late", "rejected")


class LakeError(RuntimeError):
    """A problem with the pipeline's tables; the message says what and what to do."""


class TableMissing(LakeError):
    pass


class ForeignTable(LakeError):
    pass


class ConfigMismatch(LakeError):
    pass


class MaterializerBusy(LakeError):
    pass


@dataclass(frozen=True)
class ViewSpec:
    """A pipeline as seen by its readers.

    ``aggregates``: column name -> combiner, in pane-log column order. ``combine_fn`` is the
    engine's combiner (its values map to the columns by :meth:`values_of`); by default the
    :func:`~panes.combiners.aggregates` of ``aggregates``.
    """

    name: str
    lake: str
    keys: tuple[str, ...]
    aggregates: tuple[tuple[str, CombineFn], ...]
    window_fn: WindowFn
    mode: AccumulationMode
    combine_fn: CombineFn | None = None
    storage_options: Mapping[str, str] | None = None
    pipeline: Any = field(default=None, compare=False, repr=False)
    tables: Mapping[str, str] | None = None  # table name -> path overrides

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "lake", str(self.lake))
        keys = (self.keys,) if isinstance(self.keys, str) else tuple(self.keys)
        set_(self, "keys", keys)
        aggs = self.aggregates
        aggs = tuple(aggs.items()) if isinstance(aggs, Mapping) else tuple(aggs)
        set_(self, "aggregates", aggs)
        if self.combine_fn is None:
            set_(self, "combine_fn", Aggregates(dict(aggs)))
        if not keys or not aggs:
            raise ValueError("a view needs at least one key column and one aggregate")

    # -- names ---------------------------------------------------------------------------------

    @property
    def value_names(self) -> list[str]:
        return [n for n, _ in self.aggregates]

    @property
    def fns(self) -> dict[str, CombineFn]:
        return dict(self.aggregates)

    def table_path(self, table: str) -> str:
        if self.tables and table in self.tables:
            return str(self.tables[table])
        return os.path.join(self.lake, table)

    @property
    def control_path(self) -> str:
        return os.path.join(self.lake, "_control")

    @property
    def app_id(self) -> str:
        """The application-transaction id of the materializer in the ``current`` table."""
        return f"{self.name}/materializer"

    # -- values ----------------------------------------------------------------------------------

    def values_of(self, value: Any) -> dict[str, Any]:
        """Engine value -> {column: value} (as the pane-log writer maps it)."""
        names = self.value_names
        if isinstance(value, Mapping):
            return {n: value.get(n) for n in names}
        if isinstance(value, (tuple, list)) and len(names) > 1:
            return dict(zip(names, value, strict=True))
        return {names[0]: value}

    def key_of(self, key: Any) -> tuple:
        """Engine key -> tuple of key column values."""
        if isinstance(key, Mapping):
            return tuple(key[k] for k in self.keys)
        if isinstance(key, (tuple, list)):
            return tuple(key)
        return (key,)

    # -- identity --------------------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        return {
            "keys": list(self.keys),
            "aggregates": [[n, repr(fn)] for n, fn in self.aggregates],
            "window": str(self.window_fn),
            "accumulation_mode": self.mode.name,
        }

    @property
    def fingerprint(self) -> str:
        text = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe_config(self, config: Mapping[str, Any] | None) -> str:
        if not config:
            return "(unknown)"
        aggs = ", ".join(f"{n} = {t}" for n, t in config.get("aggregates", []))
        return (
            f"keys {config.get('keys')}, {config.get('window')}, "
            f"{str(config.get('accumulation_mode', '')).lower()}, aggregates {aggs}"
        )


def spec_from_pipeline(pipeline: Any, **overrides: Any) -> ViewSpec:
    """A :class:`ViewSpec` of a ``jobs.pipeline.Pipeline`` (or anything with ``name``, ``lake``,
    ``keys``, ``window``, ``accumulation_mode`` and ``combine_fn()`` giving named aggregates)."""
    combine_fn = pipeline.combine_fn()
    fns = getattr(combine_fn, "fns", None)
    if fns is None:  # a single scalar aggregate
        names = [n for n, _ in getattr(pipeline, "aggregates", (("value", None),))]
        fns = {names[0]: combine_fn}
    kw: dict[str, Any] = dict(
        name=pipeline.name,
        lake=str(pipeline.lake),
        keys=tuple(pipeline.keys),
        aggregates=tuple(fns.items()),
        window_fn=pipeline.window,
        mode=pipeline.accumulation_mode,
        combine_fn=combine_fn,
        pipeline=pipeline,
    )
    kw.update(overrides)
    return ViewSpec(**kw)


def as_spec(obj: Any) -> ViewSpec:
    return obj if isinstance(obj, ViewSpec) else spec_from_pipeline(obj)


def check_key_columns(spec: ViewSpec, names: Sequence[str], what: str, path: str) -> None:
    missing = [n for n in [*spec.keys, *spec.value_names] if n not in names]
    if missing:
        raise ConfigMismatch(
            f"{what} at {path} has no column(s) {missing}: it was written by a pipeline "
            f"configuration with other keys or aggregates (columns: {list(names)}). The current "
            f"configuration is {spec.describe_config(spec.config)}. Use a new lake directory "
            f"(or rebuild) after changing keys or aggregates."
        )


def table_properties(spec: ViewSpec, kind: str) -> dict[str, str]:
    """The Delta table properties of a table of this pipeline (``kind``: panes, current, ...)."""
    return {
        KIND_PROPERTY: kind,
        PIPELINE_PROPERTY: spec.name,
        FINGERPRINT_PROPERTY: spec.fingerprint,
        CONFIG_PROPERTY: json.dumps(spec.config, sort_keys=True),
    }


def mismatch_text(what: str, path: str, spec: ViewSpec, conf: Mapping[str, str]) -> str:
    try:
        theirs = json.loads(conf.get(CONFIG_PROPERTY) or "null")
    except ValueError:
        theirs = None
    return (
        f"{what} at {path} was built by a different pipeline configuration "
        f"({spec.describe_config(theirs)}); this configuration is "
        f"{spec.describe_config(spec.config)}. Nothing was written. Changing keys, aggregates, "
        f"window function or accumulation mode needs a new lake directory, or "
        f"`panestore materialize --rebuild` if only the view is affected."
    )


def check_table_properties(
    spec: ViewSpec, what: str, path: str, conf: Mapping[str, str] | None
) -> None:
    """Refuse a table whose recorded pipeline or fingerprint is not ``spec``'s (tables without
    them, written before they were recorded, pass)."""
    conf = conf or {}
    fp = conf.get(FINGERPRINT_PROPERTY)
    if fp is not None and fp != spec.fingerprint:
        raise ConfigMismatch(mismatch_text(what, path, spec, conf))
    owner = conf.get(PIPELINE_PROPERTY)
    if owner is not None and owner != spec.name:
        raise ForeignTable(f"{what} at {path} belongs to pipeline {owner!r}, not {spec.name!r}")
