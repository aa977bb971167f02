"""The pane log: one append-only Delta table per pipeline, one row per emitted pane.

Columns:

- ``pipeline_id``; the key column(s) (configured; default one string column ``key``);
- ``window_start_us`` / ``window_end_us`` (int64 µs, always set) and ``window_start`` /
  ``window_end`` (UTC timestamps, null when outside 0001-01-01..9999-12-31, e.g. the global
  window);
- the aggregate column(s) (configured; default one float64 column ``value``);
- ``timestamp_us`` / ``timestamp``: the pane's output timestamp;
- pane info: ``pane_index``, ``nonspeculative_index``, ``timing`` (EARLY / ON_TIME / LATE),
  ``is_first``, ``is_last``; ``is_retraction``;
- ``supersedes``: list of ``{start_us, end_us}``, the previously emitted windows this pane
  replaces (session merges);
- ``watermark_us`` / ``processing_time_us`` at emission (model time, µs);
- ``batch_id`` (the Spark micro-batch id) and ``pane_id``, a deterministic id (see
  :func:`pane_id`);
- ``accumulator``: the pane's combiner accumulator as text (:mod:`panes.accumulator_text`:
  lossless, or the batch is refused naming the aggregate), so discarding mode can fold
  aggregates whose value is not their accumulator (a mean needs sum and count, a sketch its
  bytes). Null only when every aggregate's value is its accumulator (sum, count, min, max,
  to_list: ``PaneLogLayout.combine_fn`` is then None).

Two stages build a row: :func:`pane_record` turns an engine ``Pane`` into the *core* record, all
plain ints/strings/bools (what the Spark operator emits; no timestamp columns, no ``pipeline_id`` /
``batch_id`` / ``pane_id``), and :func:`finish_batch` derives the timestamp columns and adds those
three to a batch of core records before the exactly-once commit.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from panes.accumulator_text import UnstorableAccumulator, to_text
from panes.columnar.output import TIMINGS, PaneColumns
from panes.combine_fn import CombineFn
from sinks.lake.column_types import beyond_range, column_text, integer_range
from sinks.lake.delta_append import ExactlyOnceAppender
from sinks.lake.errors import AccumulatorNotStorable, PaneValueOutOfRange
from sinks.lake.lake_format import (
    ACCUMULATOR,
    BATCH_FIELDS,
    DERIVED_TIMESTAMPS,
    FIXED_NAMES,
    MAX_TIMESTAMP_US,
    MIN_TIMESTAMP_US,
    NOT_NULL,
    PANE_CORE,
    PANE_FIELDS,
    TIMESTAMP_TYPE,
    WINDOW_CORE,
    WINDOW_FIELDS,
    Field,
)

MAPPED_VALUES = "the pane-log layout maps the values itself (value_mapper)"
"""Why a layout with a ``value_mapper`` keeps its pipeline off the columnar engine."""


@dataclass(frozen=True)
class PaneLogLayout:
    """Names and types of the configurable columns: key(s) and aggregate value(s)."""

    key_fields: Sequence[Field] = (("key", pa.string()),)
    value_fields: Sequence[Field] = (("value", pa.float64()),)
    # Maps the engine's ``pane.value`` to {column: value}; None means the default rules of
    # :meth:`values_of`.
    value_mapper: Callable[[Any], Mapping[str, Any]] | None = field(default=None, compare=False)
    # The combiner whose accumulators the rows carry in ``accumulator`` (its text:
    # panes.accumulator_text); None for a pipeline whose aggregate values are their
    # accumulators (``CombineFn.value_is_accumulator``): the column is left null.
    combine_fn: CombineFn | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        names = [n for n, _ in self.key_fields] + [n for n, _ in self.value_fields]
        clash = sorted(set(names) & set(FIXED_NAMES))
        dup = sorted({n for n in names if names.count(n) > 1})
        if clash or dup or not self.key_fields or not self.value_fields:
            raise ValueError(
                f"bad pane-log layout: reserved names {clash}, duplicated {dup}, "
                f"{len(self.key_fields)} key and {len(self.value_fields)} value columns"
            )

    @property
    def not_columnar(self) -> str | None:
        """Why a pipeline writing this layout stays off the columnar engine (None: it need
        not): a layout that maps the values itself (``value_mapper``) is written from the
        per-key engine's panes (:func:`panes.engines.choose`'s ``columnar_off``)."""
        return None if self.value_mapper is None else MAPPED_VALUES

    @property
    def key_names(self) -> list[str]:
        return [n for n, _ in self.key_fields]

    @property
    def value_names(self) -> list[str]:
        return [n for n, _ in self.value_fields]

    def keys_of(self, key: Any) -> dict[str, Any]:
        """The key column values of an engine key (a scalar, a tuple or a mapping)."""
        names = self.key_names
        if isinstance(key, Mapping):
            return {n: key[n] for n in names}
        if isinstance(key, (tuple, list)):
            if len(key) != len(names):
                raise ValueError(f"key {key!r} does not match key columns {names}")
            return dict(zip(names, key, strict=True))
        if len(names) != 1:
            raise ValueError(f"scalar key {key!r} but key columns {names}")
        return {names[0]: key}

    def values_of(self, value: Any) -> dict[str, Any]:
        """The aggregate column values of an engine value (mapping, tuple or scalar)."""
        if self.value_mapper is not None:
            return dict(self.value_mapper(value))
        names = self.value_names
        if isinstance(value, Mapping):
            return {n: value.get(n) for n in names}
        if isinstance(value, (tuple, list)) and len(names) > 1:
            return dict(zip(names, value, strict=True))
        if len(names) != 1:
            raise ValueError(f"value {value!r} does not match value columns {names}")
        return {names[0]: value}


DEFAULT_LAYOUT = PaneLogLayout()


def _fields(fields: Iterable[Field]) -> list[pa.Field]:
    return [pa.field(n, t, nullable=n not in NOT_NULL) for n, t in fields]


def core_schema(layout: PaneLogLayout = DEFAULT_LAYOUT) -> pa.Schema:
    """Schema of the records the stateful operator emits (no pipeline/batch/pane id)."""
    return pa.schema(_fields([*layout.key_fields, *WINDOW_CORE, *layout.value_fields, *PANE_CORE]))


def pane_log_schema(layout: PaneLogLayout = DEFAULT_LAYOUT) -> pa.Schema:
    """Schema of the pane-log Delta table."""
    return pa.schema(
        _fields(
            [
                ("pipeline_id", pa.string()),
                *layout.key_fields,
                *WINDOW_FIELDS,
                *layout.value_fields,
                *PANE_FIELDS,
                *BATCH_FIELDS,
            ]
        )
    )


def _timing_name(timing: Any) -> str:
    return getattr(timing, "name", None) or str(timing)


_TIMING_CODES = {t.name: code for code, t in enumerate(TIMINGS)}


def pane_figures(panes: pa.Table) -> tuple[dict[str, int], int]:
    """What is counted of pane rows (core records or pane-log rows) besides their number: how
    many of each ``timing`` (``EARLY``, ``ON_TIME``, ``LATE``) and how many are retractions
    (a batch's progress and the run history count them so)."""
    if not panes.num_rows:
        return {}, 0
    timing = pc.value_counts(panes.column("timing")).to_pylist()
    retractions = pc.sum(panes.column("is_retraction").cast(pa.int64())).as_py() or 0
    return {t["values"]: t["counts"] for t in timing}, retractions


def _split(
    items: list[Any],
    names: list[str],
    to_dict: Callable[[Any], Mapping[str, Any]],
    plain: bool,
    dicts_by_get: bool = False,
) -> dict[str, list[Any]]:
    """Key or value objects -> one list per column: what ``to_dict`` gives per object, without
    calling it in the common cases (``plain``: ``to_dict`` has the default rules)."""
    if plain:
        if len(names) == 1 and not any(isinstance(x, (tuple, list, Mapping)) for x in items):
            return {names[0]: items}
        if dicts_by_get and all(type(x) is dict for x in items):
            return {n: [x.get(n) for x in items] for n in names}
    dicts = [to_dict(x) for x in items]
    return {n: [d[n] for d in dicts] for n in names}


def panes_as_columns(panes: Sequence[Any], layout: PaneLogLayout = DEFAULT_LAYOUT) -> PaneColumns:
    """The per-key engine's ``Pane`` objects (duck-typed: see ``panes.engine``) as columns for
    :func:`pane_rows`: keys and values split into the layout's columns
    (:meth:`PaneLogLayout.keys_of`, :meth:`~PaneLogLayout.values_of`). A value its integer
    column cannot hold is refused with its pane named (:func:`value_out_of_range`)."""
    core = core_schema(layout)
    infos = [p.pane for p in panes]
    key_lists = _split([p.key for p in panes], layout.key_names, layout.keys_of, True)
    keys = pa.table({n: pa.array(v, core.field(n).type) for n, v in key_lists.items()})
    plain = layout.value_mapper is None
    value_lists = _split(
        [p.value for p in panes], layout.value_names, layout.values_of, plain, True
    )
    values = []
    for name, column in value_lists.items():
        type_ = core.field(name).type
        for pane, value in zip(panes, column, strict=True):
            if beyond_range(value, type_):
                keys_of = layout.keys_of(pane.key)
                raise value_out_of_range(
                    keys_of, pane.window.start, pane.window.end, name, value, type_
                )
        values.append(pa.array(column, type_))
    accumulators = [getattr(p, "accumulator", None) for p in panes]
    return PaneColumns(
        keys=keys,
        window_start=[int(p.window.start) for p in panes],
        window_end=[int(p.window.end) for p in panes],
        timestamp=[int(p.timestamp) for p in panes],
        index=[int(i.index) for i in infos],
        nonspeculative=[int(i.nonspeculative_index) for i in infos],
        timing=[_TIMING_CODES[_timing_name(i.timing)] for i in infos],
        is_last=[bool(i.is_last) for i in infos],
        watermark=[p.watermark for p in panes],
        processing_time=[p.processing_time for p in panes],
        values=values,
        names=layout.value_names,
        accumulators=lambda: accumulators,
        is_retraction=[bool(p.is_retraction) for p in panes],
        supersedes=[tuple(p.supersedes or ()) for p in panes],
    )


def pane_rows(columns: PaneColumns, layout: PaneLogLayout = DEFAULT_LAYOUT) -> dict[str, Any]:
    """The core records of panes given as columns (:class:`panes.columnar.PaneColumns`: the
    columnar engine's, or the per-key engine's through :func:`panes_as_columns`), as one Arrow
    array per core column: the one place a pane becomes a pane-log row. A sum's 128-bit value
    that its integer column cannot hold is refused with the first such pane named
    (:func:`value_out_of_range`)."""
    core = core_schema(layout)
    n = len(columns)
    out: dict[str, Any] = {}
    for name in layout.key_names:
        out[name] = columns.keys.column(name).combine_chunks().cast(core.field(name).type)
    out["window_start_us"] = pa.array(columns.window_start, pa.int64())
    out["window_end_us"] = pa.array(columns.window_end, pa.int64())
    names = columns.names if columns.names is not None else layout.value_names
    for i, name in enumerate(names):
        type_ = core.field(name).type
        value = columns.values[i]
        if isinstance(value, np.ndarray):  # a sum in 128 bits
            value = _fitted(columns, i, name, type_, layout)
        out[name] = value.cast(type_)
    out["timestamp_us"] = pa.array(columns.timestamp, pa.int64())
    index = pa.array(columns.index, pa.int64())
    out["pane_index"] = index
    out["nonspeculative_index"] = pa.array(columns.nonspeculative, pa.int64())
    timings = pa.array([t.name for t in TIMINGS], pa.string())
    out["timing"] = timings.take(pa.array(columns.timing, pa.int64()))
    out["is_first"] = pc.equal(index, 0)
    out["is_last"] = pa.array(columns.is_last, pa.bool_())
    retraction = columns.is_retraction
    out["is_retraction"] = pa.array(np.zeros(n, bool) if retraction is None else retraction)
    supersedes = core.field("supersedes").type
    if columns.supersedes is None:
        out["supersedes"] = pa.array([[]] * n, supersedes)
    else:
        windows = [
            [{"start_us": w.start, "end_us": w.end} for w in ws] for ws in columns.supersedes
        ]
        out["supersedes"] = pa.array(windows, supersedes)
    out["watermark_us"] = pa.array(columns.watermark, pa.int64())
    out["processing_time_us"] = pa.array(columns.processing_time, pa.int64())
    fn = layout.combine_fn
    if fn is not None:
        out[ACCUMULATOR] = pa.array(_accumulator_texts(columns, fn, layout), pa.string())
    else:
        out[ACCUMULATOR] = pa.nulls(n, pa.string())
    return out


def _accumulator_texts(columns: PaneColumns, fn: CombineFn, layout: PaneLogLayout) -> list[str]:
    """The text of each pane's accumulator (:func:`panes.accumulator_text.to_text`); one that
    holds a value of no text is refused naming its pane and aggregate
    (:class:`~sinks.lake.errors.AccumulatorNotStorable`): never written as null."""
    name = layout.value_names[0]
    texts = []
    for row, acc in enumerate(columns.accumulators()):
        try:
            texts.append(to_text(fn, acc, name))
        except UnstorableAccumulator as e:
            keys = {k: columns.keys.column(k)[row].as_py() for k in layout.key_names}
            where = window_text(keys, int(columns.window_start[row]), int(columns.window_end[row]))
            raise AccumulatorNotStorable(
                f"the pane of {where} cannot be stored: {e}; nothing of the batch was "
                "committed, and every run stops at it"
            ) from None
    return texts


def _fitted(
    columns: PaneColumns, i: int, name: str, type_: pa.DataType, layout: PaneLogLayout
) -> pa.Array:
    """The ``i``-th aggregate's 128-bit sums as int64, refused where ``type_`` (an integer
    column's) cannot hold one."""
    pairs = columns.values[i]
    bounds = integer_range(type_) or (-(2**63), 2**63 - 1)
    low = pairs[:, 0]
    fits = (pairs[:, 1] == (low >> 63)) & (low >= bounds[0]) & (low <= bounds[1])
    if not fits.all():
        row = int(np.flatnonzero(~fits)[0])
        keys = {k: columns.keys.column(k)[row].as_py() for k in layout.key_names}
        start, end = int(columns.window_start[row]), int(columns.window_end[row])
        value = columns.value_list(i)[row]
        raise value_out_of_range(keys, start, end, name, value, type_)
    return pa.array(low, pa.int64())


def value_out_of_range(
    keys: Mapping[str, Any], start_us: int, end_us: int, name: str, value: Any, type_: pa.DataType
) -> PaneValueOutOfRange:
    """The refusal of a pane of ``keys``' window ``[start_us, end_us)`` whose ``name`` is
    ``value``, beyond its integer or decimal column of ``type_`` (one line: key, window,
    aggregate)."""
    return PaneValueOutOfRange(
        f"the pane of {window_text(keys, start_us, end_us)} has {name} = {value}, beyond the "
        f"pane log's {column_text(type_)} column {name!r}; nothing of the batch was "
        "committed, and every run stops at it"
    )


def window_text(keys: Mapping[str, Any], start_us: int, end_us: int) -> str:
    """A key's window as messages name it: ``user='u1', window [start, end)`` (ISO-8601)."""
    named = ", ".join(f"{k}={v!r}" for k, v in keys.items())
    return f"{named}, window [{_iso_us(start_us)}, {_iso_us(end_us)})"


def _iso_us(us: int) -> str:
    """A window bound in µs as ISO-8601 text (the number itself where no date holds it)."""
    try:
        return (_EPOCH + dt.timedelta(microseconds=us)).isoformat()
    except OverflowError:
        return str(us)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def pane_record(pane: Any, layout: PaneLogLayout = DEFAULT_LAYOUT) -> dict[str, Any]:
    """The core record of one engine ``Pane`` (:func:`pane_rows`), as Python values."""
    rows = pane_rows(panes_as_columns([pane], layout), layout)
    return {name: column[0].as_py() for name, column in rows.items()}


def pane_id(
    pipeline_id: str,
    keys: Mapping[str, Any],
    start_us: int,
    end_us: int,
    pane_index: int,
    is_retraction: bool,
    ordinal: int = 0,
) -> str:
    """Deterministic id of a pane row: a hash of what identifies it in the model.

    (pipeline, key, window, pane index, retraction flag) identifies a pane; ``ordinal`` numbers
    rows that would otherwise collide within one batch (not expected from a correct engine, but it
    keeps ids unique rather than silently equal).
    """
    prefix = _pane_id_prefix(pipeline_id, keys.items())
    return _pane_id(prefix, start_us, end_us, pane_index, is_retraction, ordinal)


def _pane_id_prefix(pipeline_id: str, keys: Iterable[tuple[str, Any]]) -> str:
    """The part of :func:`pane_id`'s hashed JSON array that a key's panes share."""
    return json.dumps([pipeline_id, sorted(keys)], default=str, separators=(",", ":"))[:-1]


def _pane_id(
    prefix: str, start_us: int, end_us: int, pane_index: int, is_retraction: bool, ordinal: int
) -> str:
    flag = "true" if is_retraction else "false"
    payload = f"{prefix},{start_us},{end_us},{pane_index},{flag},{ordinal}]"
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def with_timestamps(table: pa.Table) -> pa.Table:
    """``table`` with its timestamp columns (``DERIVED_TIMESTAMPS``) set from their ``*_us``
    columns: null where a timestamp cannot hold the value (the global window's bounds)."""
    for ts_name, us_name in DERIVED_TIMESTAMPS.items():
        us = table.column(us_name)
        ok = pc.and_kleene(
            pc.greater_equal(us, MIN_TIMESTAMP_US), pc.less_equal(us, MAX_TIMESTAMP_US)
        )
        ts = pc.if_else(ok, us, pa.scalar(None, pa.int64())).cast(TIMESTAMP_TYPE)
        if ts_name in table.column_names:
            table = table.set_column(table.column_names.index(ts_name), ts_name, ts)
        else:
            table = table.append_column(ts_name, ts)
    return table


def _same_as_previous(table: pa.Table, names: Sequence[str]) -> np.ndarray:
    """Per row (in order): whether it equals the previous row in all of ``names`` (nulls equal,
    NaNs equal)."""
    n = table.num_rows
    same = np.ones(n, bool)
    if n:
        same[0] = False
    for name in names:
        col = table.column(name)
        a, b = col.slice(1), col.slice(0, max(n - 1, 0))
        eq = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        if pa.types.is_floating(col.type):
            eq = pc.or_(eq, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
        same[1:] &= eq.to_numpy(zero_copy_only=False)
    return same


def _pane_ids(core: pa.Table, pipeline_id: str, keys: Sequence[str]) -> list[str]:
    """:func:`pane_id` of each row of ``core``, whose rows are sorted so that the rows of one
    key, and those of one pane, are side by side: the key's part of the hashed text once per
    key, the rest of it by Arrow for all rows at once, then the hash of each row's text."""
    n = core.num_rows
    if n == 0:
        return []
    rows = np.arange(n)
    ident = [*keys, "window_start_us", "window_end_us", "pane_index", "is_retraction"]
    # ordinal: the row's place in its run of rows of the same pane
    same_pane = _same_as_previous(core, ident)
    ordinals = rows - np.maximum.accumulate(np.where(same_pane, 0, rows))
    first_of_key = np.flatnonzero(~_same_as_previous(core, keys))
    key_values = zip(*(core.column(k).take(first_of_key).to_pylist() for k in keys), strict=True)
    prefixes = pa.array(
        [_pane_id_prefix(pipeline_id, zip(keys, key, strict=True)) for key in key_values],
        pa.string(),
    )
    run_of_row = np.repeat(np.arange(len(first_of_key)), np.diff(np.append(first_of_key, n)))

    def text(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        return pc.fill_null(pc.cast(values, pa.string()), "None")  # as Python's f-string

    retraction = pc.fill_null(core.column("is_retraction"), False)
    payload = pc.binary_join_element_wise(
        prefixes.take(pa.array(run_of_row)),
        text(core.column("window_start_us")),
        text(core.column("window_end_us")),
        text(core.column("pane_index")),
        pc.if_else(retraction, "true", "false"),
        pc.binary_join_element_wise(text(pa.array(ordinals)), "]", ""),
        ",",
    )
    sha256 = hashlib.sha256
    return [sha256(b).hexdigest()[:32] for b in payload.cast(pa.binary()).to_pylist()]


def finish_batch(
    core: pa.Table,
    pipeline_id: str,
    batch_id: int,
    layout: PaneLogLayout = DEFAULT_LAYOUT,
) -> pa.Table:
    """Core records of one batch -> pane-log rows (adds pipeline id, batch id, pane id).

    Rows are put in a deterministic order (key, window, pane index, retraction first; null keys
    last), so a replayed batch writes byte-identical content whatever order Spark's partitions
    arrived in. Ids are :func:`pane_id`'s, their hashed texts built in Arrow (:func:`_pane_ids`).
    """
    schema = pane_log_schema(layout)
    core = core.select(core_schema(layout).names).cast(core_schema(layout))
    keys = layout.key_names
    ascending = [*keys, "window_start_us", "window_end_us", "pane_index"]
    order = [(c, "ascending", "at_end") for c in ascending]
    order.append(("is_retraction", "descending", "at_end"))
    core = core.take(pc.sort_indices(core, sort_keys=order))
    n = core.num_rows
    ids = _pane_ids(core, pipeline_id, keys)
    out = with_timestamps(core)
    out = out.append_column("pipeline_id", pa.array([pipeline_id] * n, pa.string()))
    out = out.append_column("batch_id", pa.array([batch_id] * n, pa.int64()))
    out = out.append_column("pane_id", pa.array(ids, pa.string()))
    return out.select(schema.names).cast(schema)


class PaneLog:
    """The pipeline's pane log: ``PaneLog(path, pipeline_id).append(batch_id, panes_or_table)``.

    ``append`` accepts a core-record Arrow table (from the Spark operator), a pane-log table, a
    list of core-record dicts, or a list of engine ``Pane`` objects; it commits the batch once,
    with a Delta app transaction (app id = pipeline id, version = batch id), and returns False
    without writing when that batch id is already committed.
    """

    kind = "pane_log"

    def __init__(
        self,
        path: str | Path,
        pipeline_id: str,
        layout: PaneLogLayout = DEFAULT_LAYOUT,
        *,
        storage_options: Mapping[str, str] | None = None,
        commit_empty: bool = True,
        properties: Mapping[str, str] | None = None,
        check: Callable[[Mapping[str, str]], None] | None = None,
    ) -> None:
        self.layout = layout
        self.schema = pane_log_schema(layout)
        self.appender = ExactlyOnceAppender(
            path,
            pipeline_id,
            self.schema,
            kind=self.kind,
            storage_options=storage_options,
            commit_empty=commit_empty,
            properties=properties,
            check=check,
        )

    @property
    def pipeline_id(self) -> str:
        return self.appender.pipeline_id

    @property
    def path(self) -> str:
        return self.appender.path

    def committed_batch_id(self) -> int | None:
        return self.appender.committed_batch_id()

    def to_core_table(self, data: Any) -> pa.Table:
        core = core_schema(self.layout)
        if data is None:
            return core.empty_table()
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if isinstance(data, pa.Table):
            return data.select(core.names).cast(core)
        items = list(data)
        recs = [x if isinstance(x, Mapping) else pane_record(x, self.layout) for x in items]
        return pa.Table.from_pylist([{n: r.get(n) for n in core.names} for r in recs], schema=core)

    def append(self, batch_id: int, data: Any) -> bool:
        committed = self.committed_batch_id()
        if committed is not None and batch_id <= committed:
            return False  # cheap early exit: do not even build the rows
        rows = finish_batch(self.to_core_table(data), self.pipeline_id, batch_id, self.layout)
        return self.appender.append(batch_id, rows)

    def read(self) -> pa.Table:
        return self.appender.read()
