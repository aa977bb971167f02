"""The reference reducer: pane rows applied to the view rows of the keys they touch, in Python.

Fold rules (docs/semantics.md, :mod:`panes.fold`), per (key, window), whatever order the panes of
a window arrive in across pane-log versions:

* accumulating: the pane with the highest index wins;
* discarding: the panes' values merge with their combiner (sum and count add, min and max take
  the extreme, lists concatenate); when an aggregate's value is not its accumulator (a mean), the
  panes' ``accumulator`` column is merged with the pipeline's combiner and extracted instead, and
  the view row keeps the merged accumulator in its own ``accumulator`` column;
* accumulating & retracting: as accumulating; a retraction withdraws the pane it names (the
  window disappears if that pane is the one the view shows and nothing newer came);
* every mode: a pane deletes the windows it ``supersedes`` (discarding: absorbs their values).
  The view row keeps the windows it absorbed (``absorbed``), so a pane of an absorbed window
  that arrives in a later version is routed to the window that absorbed it (discarding) or
  ignored (it is already part of the merged value), never resurrected.

It works for any window function. Pure: rows in, rows out (no table access).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from panes.accumulator_text import UnstorableAccumulator, from_text, to_text
from panes.windowing import AccumulationMode
from sinks.lake import (
    ACCUMULATOR,
    PANE_LOG_VERSION,
    AccumulatorNotStorable,
    LakeError,
    ViewSpec,
    window_text,
)

View = dict[tuple, dict[str, Any]]
"""View rows by (key tuple, (window start, window end))."""


def value_mergeable(spec: ViewSpec) -> list[str]:
    """Aggregates whose pane values are not their accumulators (discarding cannot fold them
    from the pane log's value columns alone: it merges the ``accumulator`` column instead)."""
    return [n for n, fn in spec.aggregates if not fn.value_is_accumulator]


def needs_accumulators(spec: ViewSpec) -> bool:
    """Whether folding merges accumulators (discarding mode with a not value-mergeable
    aggregate) rather than the value columns."""
    return spec.mode is AccumulationMode.DISCARDING and bool(value_mergeable(spec))


def _part_accumulator(spec: ViewSpec, part: Mapping[str, Any]) -> Any:
    text = part.get(ACCUMULATOR)
    fn = spec.combine_fn
    if text is None or fn is None:
        raise LakeError(
            f"a pane-log row (or view row) of pipeline {spec.name!r} has no accumulator, "
            f"which discarding mode needs to fold {', '.join(value_mergeable(spec))}. Nothing "
            "was written. If `panestore materialize --rebuild` fails the same way, the pane log "
            "holds rows written before every accumulator was stored: run the pipeline into a "
            "new lake (and checkpoint)."
        )
    try:
        return from_text(fn, text)
    except ValueError as e:  # not a text accumulator_text wrote (a JSON error is one)
        raise LakeError(
            f"an accumulator of pipeline {spec.name!r} cannot be read ({e}): {text[:80]!r}. "
            "Nothing was written."
        ) from None


def _merge_accumulators(
    spec: ViewSpec, at: tuple, parts: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Merge the parts' accumulators of the window ``at`` (key tuple, (start, end)) with the
    pipeline's combiner: the value columns and the merged ``accumulator``; a merged accumulator
    of no text is refused naming the window (:class:`~sinks.lake.errors.AccumulatorNotStorable`)."""
    fn = spec.combine_fn
    assert fn is not None
    accs = [_part_accumulator(spec, p) for p in parts]
    merged = accs[0] if len(accs) == 1 else fn.merge(accs)
    out = spec.values_of(fn.extract(merged))
    try:
        out[ACCUMULATOR] = to_text(fn, merged, spec.aggregates[0][0])
    except UnstorableAccumulator as e:
        where = window_text(dict(zip(spec.keys, at[0], strict=True)), *at[1])
        raise AccumulatorNotStorable(
            f"the panes of {where} merge to an accumulator that cannot be stored: {e}. "
            "Nothing was written."
        ) from None
    return out


def _merge_values(spec: ViewSpec, at: tuple, parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if needs_accumulators(spec):
        return _merge_accumulators(spec, at, parts)
    out = {}
    for name, fn in spec.aggregates:
        accs = [fn.value_as_accumulator(p[name]) for p in parts]
        merged = accs[0] if len(accs) == 1 else fn.merge(accs)
        out[name] = fn.extract(merged)
    return out


def _window_list(ws: Iterable[tuple[int, int]]) -> list[dict[str, int]]:
    return [{"start_us": s, "end_us": e} for s, e in ws]


class Reducer:
    """Applies pane rows to view rows of the keys they touch (the Python reference reducer).

    ``live``: (key tuple, (start, end)) -> view row dict, the view rows of the touched keys before
    the panes. After :meth:`apply`, :meth:`changes` gives the rows to upsert and the windows to
    delete relative to the rows given at the start.
    """

    def __init__(self, spec: ViewSpec, live: Mapping[tuple, dict[str, Any]] | None = None):
        self.spec = spec
        self.discarding = spec.mode is AccumulationMode.DISCARDING
        self.accumulators = needs_accumulators(spec)
        self.live: dict[tuple, dict[str, Any]] = dict(live or {})
        self.initial = set(self.live)
        self.owner: dict[tuple, tuple] = {}
        for at, row in self.live.items():
            for a in row.get("absorbed") or ():
                self.owner[(at[0], (a["start_us"], a["end_us"]))] = at
        self.retracted: dict[tuple, int] = {}
        self.changed: set[tuple] = set()

    def _root(self, at: tuple) -> tuple:
        seen = set()
        while at in self.owner and at not in seen:
            seen.add(at)
            at = self.owner[at]
        return at

    def _row(
        self,
        key: tuple,
        w: tuple[int, int],
        pane: Mapping[str, Any],
        values: Mapping,
        absorbed: list[tuple[int, int]],
        version: int,
    ) -> dict[str, Any]:
        row = dict(zip(self.spec.keys, key, strict=True))
        row.update(window_start_us=w[0], window_end_us=w[1])
        row.update(values)
        row.update(
            pane_index=pane["pane_index"],
            timing=pane["timing"],
            is_last=pane["is_last"],
            timestamp_us=pane["timestamp_us"],
            pane_log_version=version,
            absorbed=_window_list(absorbed),
        )
        return row

    def apply(self, panes: Iterable[Mapping[str, Any]]) -> None:
        """Apply pane rows, in pane-log order."""
        for p in panes:
            key = tuple(p[k] for k in self.spec.keys)
            at = (key, (p["window_start_us"], p["window_end_us"]))
            if p["is_retraction"]:
                self._retract(at, p["pane_index"])
            else:
                self._emit(key, at, p)

    def _retract(self, at: tuple, idx: int) -> None:
        if at in self.owner:  # an absorbed window: its value is part of the absorber's
            return
        self.retracted[at] = max(self.retracted.get(at, -1), idx)
        row = self.live.get(at)
        if row is not None and row["pane_index"] <= idx:
            del self.live[at]
            self.changed.discard(at)

    def _take_superseded(
        self, key: tuple, w: tuple[int, int], pane: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
        """Remove the view rows of the windows ``pane`` supersedes: (their rows, the windows
        now absorbed: the superseded ones and those they had absorbed)."""
        absorbed_rows: list[dict[str, Any]] = []
        new_abs: list[tuple[int, int]] = []
        for s in pane.get("supersedes") or ():
            sw = (s["start_us"], s["end_us"])
            sat = (key, sw)
            if sw == w:
                continue
            new_abs.append(sw)
            srow = self.live.pop(sat, None)
            if srow is not None:
                self.changed.discard(sat)
                absorbed_rows.append(srow)
                new_abs.extend((a["start_us"], a["end_us"]) for a in srow["absorbed"] or ())
        return absorbed_rows, new_abs

    def _emit(self, key: tuple, at: tuple, p: Mapping[str, Any]) -> None:
        w = at[1]
        idx = p["pane_index"]
        version = p.get(PANE_LOG_VERSION, 0)
        absorbed_rows, new_abs = self._take_superseded(key, w, p)
        values = {n: p[n] for n in self.spec.value_names}
        if self.accumulators:
            values[ACCUMULATOR] = p.get(ACCUMULATOR)
        root = self._root(at)
        if root != at:  # the window was absorbed earlier: its pane belongs to the absorber
            self._emit_to_absorber(key, root, new_abs, [*absorbed_rows, values], version)
            return
        row = self.live.get(at)
        old_abs = [(a["start_us"], a["end_us"]) for a in row["absorbed"]] if row else []
        absorbed = _dedup(old_abs + new_abs)
        for sw in new_abs:
            self.owner[(key, sw)] = at
        if self.discarding:
            merged = _merge_values(self.spec, at, [*absorbed_rows, *([row] if row else []), values])
            if row is not None and row["pane_index"] > idx:
                new = dict(row)
                new.update(merged)
                new["absorbed"] = _window_list(absorbed)
                new["pane_log_version"] = max(row["pane_log_version"], version)
            else:
                vers = max([version] + ([row["pane_log_version"]] if row else []))
                new = self._row(key, w, p, merged, absorbed, vers)
        else:
            stale = (row is not None and row["pane_index"] >= idx) or (
                self.retracted.get(at, -1) >= idx
            )
            if stale:
                if row is not None and new_abs:
                    row["absorbed"] = _window_list(absorbed)
                    self.changed.add(at)
                return
            new = self._row(key, w, p, values, absorbed, version)
        self.live[at] = new
        self.changed.add(at)

    def _emit_to_absorber(
        self,
        key: tuple,
        root: tuple,
        new_abs: list[tuple[int, int]],
        parts: list[Mapping[str, Any]],
        version: int,
    ) -> None:
        """A pane of a window absorbed earlier: its windows and (discarding) values go to the
        window that absorbed it, ``root``."""
        for sw in new_abs:
            self.owner[(key, sw)] = root
        target = self.live.get(root)
        if target is None:
            return
        target["absorbed"] = _window_list(
            _dedup([(a["start_us"], a["end_us"]) for a in target["absorbed"]] + new_abs)
        )
        if self.discarding:
            target.update(_merge_values(self.spec, root, [target, *parts]))
            target["pane_log_version"] = max(target["pane_log_version"], version)
        self.changed.add(root)

    def changes(self) -> tuple[list[dict[str, Any]], list[tuple]]:
        upserts = [self.live[at] for at in self.changed if at in self.live]
        deletes = [at for at in self.initial if at not in self.live]
        return upserts, deletes


def _dedup(ws: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return sorted(set(ws))


def fold_rows(spec: ViewSpec, panes: pa.Table | Iterable[Mapping[str, Any]]) -> dict[tuple, dict]:
    """The view (``{(key tuple, (start, end)): row}``) of pane rows folded from nothing."""
    rows = panes.to_pylist() if isinstance(panes, pa.Table) else list(panes)
    # (a stable sort: the log order within a version is kept)
    rows.sort(key=lambda r: r.get(PANE_LOG_VERSION, 0))
    red = Reducer(spec)
    red.apply(rows)
    return red.live
