"""What the readers and writers of a pipeline's lake need to know about it: :class:`ViewSpec`.

``sinks`` does not know the job's configuration (``jobs -> sinks``): the materializer, the
verifier, the inspection tools and the table-identity checks take a :class:`ViewSpec`, a typed
description of a pane log and its view: the pipeline's name, its lake (a directory, or
``s3://bucket/prefix``; table path overrides, storage options, whether one writer at a time is
guaranteed), key columns, named aggregates, window function and accumulation
mode. ``jobs.config.sink_spec`` builds one from a pipeline configuration.

The *fingerprint* of a spec hashes what decides the meaning of the pane log's rows (keys,
aggregates, window function, accumulation mode); :mod:`sinks.lake.tables` records it in the table
properties and checks it when a table is opened.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from panes.combiners import Aggregates, CombineFn, text_of
from panes.rules import WindowRules
from panes.windowfns import WindowFn
from panes.windowing import AccumulationMode, Windowing
from sinks.lake.object_store import delta_storage_options, join_location


@dataclass(frozen=True)
class ViewSpec:
    """A pipeline's pane log and view, as ``sinks`` knows them.

    ``keys``: the key columns. ``aggregates``: column name -> combiner, in pane-log column order.
    ``combine_fn`` is the engine's combiner (its values map to the columns by
    :meth:`values_of`); by default the :func:`~panes.combiners.aggregates` of ``aggregates``.
    ``window_fn`` and ``mode`` are the pipeline's window function and accumulation mode. Tables
    live under ``lake`` (``tables``: path overrides by table name; ``storage_options``: delta-rs
    options of a remote lake). ``single_writer``: the user guarantees one writer at a time, for a
    lake on a store without conditional writes: nothing locks the lake
    (:class:`sinks.lake.lock.LakeLock`), and ``storage_options`` gains what delta-rs needs to commit
    there (:func:`sinks.lake.object_store.delta_storage_options`). Column types are the pane log's
    (:mod:`sinks.lake.pane_log`). ``rules``: the pipeline's rules of a window's life
    (:class:`~panes.rules.WindowRules`, the holder of its allowed lateness; None: the window
    function's at no lateness; rules of another window function take ``window_fn``); ``verify``
    and ``report`` tell by them which windows are final at the pane log's watermark
    (:meth:`~panes.rules.WindowRules.gone`).
    ``fold_memory`` (bytes): the working memory a fold may take; a larger backlog is folded in
    pieces (:mod:`sinks.fold.fold_plan`).
    """

    name: str
    lake: str
    keys: tuple[str, ...]
    aggregates: tuple[tuple[str, CombineFn], ...]
    window_fn: WindowFn
    mode: AccumulationMode
    combine_fn: CombineFn | None = None
    storage_options: Mapping[str, str] | None = field(default=None, repr=False)  # may hold keys
    tables: Mapping[str, str] | None = None  # table name -> path overrides
    single_writer: bool = False
    rules: WindowRules | None = None
    fold_memory: int = 512 * 1024 * 1024

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "lake", str(self.lake))
        needed = delta_storage_options(self.lake, self.single_writer)
        if needed:
            set_(self, "storage_options", {**(self.storage_options or {}), **needed})
        keys = (self.keys,) if isinstance(self.keys, str) else tuple(self.keys)
        set_(self, "keys", keys)
        aggs = self.aggregates
        aggs = tuple(aggs.items()) if isinstance(aggs, Mapping) else tuple(aggs)
        set_(self, "aggregates", aggs)
        if self.combine_fn is None:
            set_(self, "combine_fn", Aggregates(dict(aggs)))
        if self.rules is None:
            set_(self, "rules", Windowing(self.window_fn).rules)
        elif self.rules.window_fn != self.window_fn:  # a spec replaced with another window
            set_(self, "rules", replace(self.rules, window_fn=self.window_fn))
        if not keys or not aggs:
            raise ValueError("a view needs at least one key column and one aggregate")
        if self.fold_memory < 1:
            raise ValueError(
                f"fold_memory must be a positive number of bytes, not {self.fold_memory}"
            )

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
        return join_location(self.lake, table)

    @property
    def app_id(self) -> str:
        """The application-transaction id of the materializer in the ``current`` table."""
        return f"{self.name}/materializer"

    @property
    def window_rules(self) -> WindowRules:
        """:attr:`rules`, as set when the spec was made."""
        assert self.rules is not None  # set by __post_init__
        return self.rules

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
            "aggregates": [[n, text_of(fn)] for n, fn in self.aggregates],
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
