"""One visit of the columnar engine: the per-key engine's steps over a table of windows.

A visit (:meth:`panes.columnar.ColumnarEngine.visit`) does, over all rows at once, what the per-key
engine does for each key it touches (keys with elements, keys with a window due):

* **advance** (rows whose wake-up the watermark reached: :meth:`panes.engine.Engine.advance`): a
  window whose trigger waited for the watermark fires if its trigger says so; a window the
  watermark lets go fires its closing pane (:meth:`~panes.rules.WindowRules.closes`) and is
  deleted;
* **add** (each key's windows with new elements, lifted: :meth:`~panes.engine.Engine.add_combined`):
  elements of a closed window are dropped (returned as data, each with its own row), others are
  merged into the window's accumulator (a new window starts from the part), the hold moves, the
  trigger sees the elements and fires (``EARLY`` before the end of the window, ``LATE`` after);

each firing emits a pane (or none), after which a discarding window starts over and a finished
trigger closes its window. Every decision is the model's: the trigger's methods and the rules of
:mod:`panes.rules`, each evaluated once per class of rows (:mod:`.classes`); what is left here
is moving columns.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from panes.columnar.accumulators import COUNT
from panes.columnar.bundle import START as PART_START
from panes.columnar.bundle import Lifted, Lifting
from panes.columnar.classes import by_value, per_class
from panes.columnar.keys import engine_keys, key_ids, key_table
from panes.columnar.output import EARLY, TIMINGS, PaneColumns, accumulators_of
from panes.columnar.windows import (
    CLOSED,
    DUE,
    EMITTED,
    FRESH,
    HAS_HOLD,
    HOLD,
    INDEX,
    NONSPEC,
    SEEN_PT,
    SEEN_WM,
    START,
    TRIGGER,
    Layout,
    Windows,
)
from panes.engine import CLOSED_REASON, Engine
from panes.pane import Dropped
from panes.rules import WindowRules
from panes.state import KeyState
from panes.window import Window
from panes.windowing import TimestampCombiner

_INT64_MIN = -(2**63)
_NO_HOLD = _INT64_MIN
_PICK = {min: np.minimum, max: np.maximum}  # a rule's choice of hold, over arrays
_PANE_COLUMNS = (
    *("id", "phase", "order", "start", "sub", "end", "timestamp", "index", "nonspec"),
    *("timing", "is_last", "pt"),
)


class Model(Protocol):
    """What a visit reads of its engine (:class:`panes.columnar.ColumnarEngine`)."""

    layout: Layout
    rules: WindowRules
    lifting: Lifting
    per_key: Engine
    event_wakeups: bool


class Visit:
    """One visit of a table of windows (:meth:`panes.columnar.ColumnarEngine.visit`): after
    :meth:`run`, :attr:`windows` (the windows after), :meth:`panes`, :attr:`dropped` and
    :attr:`changed` (whether the windows changed)."""

    def __init__(
        self,
        engine: Model,
        windows: Windows,
        lifted: Lifted | None,
        watermark: int,
        processing_time: int,
    ) -> None:
        self.e = engine
        self.windows = windows
        self.lifted = lifted
        self.wm = watermark
        self.pt = processing_time
        self._panes: list[dict[str, Any]] = []  # pane batches: numpy/Arrow columns + order
        self.dropped: list[Dropped] = []
        self.changed = False
        self._key_pts: dict[Any, int] | None = None

    # -- the steps -------------------------------------------------------------------------------

    def run(self) -> Visit:
        e, w, lifted = self.e, self.windows, self.lifted
        names = [f.name for f in e.layout.key_fields]
        key_schema = pa.schema(e.layout.key_fields)
        tables = [w.keys]
        parts = None
        if lifted is not None:
            parts = lifted.parts
            tables.append(parts.select(names).cast(key_schema))
            tables.append(key_table(list(lifted.expired), e.layout.key_fields))
        n_data = sum(t.num_rows for t in tables[1:])
        all_keys = pa.concat_tables(tables) if len(tables) > 1 else w.keys
        ids, firsts = key_ids(all_keys)
        self.unique_keys = all_keys.take(pa.array(firsts)) if len(firsts) else all_keys
        n_w, n_p = w.rows, 0 if parts is None else parts.num_rows
        w_ids, p_ids = ids[:n_w], ids[n_w : n_w + n_p]
        data_ids = ids[n_w : n_w + n_data]
        n_keys = len(firsts)
        # the keys this visit touches: keys with data, and keys with a window due
        due_rows = w.cols[DUE] <= self.wm
        visited = np.zeros(n_keys, bool)
        visited[w_ids[due_rows]] = True
        visited[data_ids] = True
        # per key: its processing time after advance (max with what it saw; new keys: the step's)
        seen = np.full(n_keys, _INT64_MIN, np.int64)
        if n_w:
            np.maximum.at(seen, w_ids, w.cols[SEEN_PT])
        self.key_pt = np.maximum(np.full(n_keys, self.pt, np.int64), seen)
        self.ids = w_ids
        if due_rows.any():
            self._advance(np.flatnonzero(due_rows))
        if parts is not None and n_p:
            self._add(parts, p_ids)
        if self.lifted is not None:
            self._drop_expired()
        # the visited keys' clocks, as advance leaves them
        w = self.windows
        touched = visited[self.ids]
        if touched.any():
            w.cols[SEEN_WM] = np.where(
                touched, np.maximum(w.cols[SEEN_WM], self.wm), w.cols[SEEN_WM]
            )
            w.cols[SEEN_PT] = np.where(touched, self.key_pt[self.ids], w.cols[SEEN_PT])
            self.changed = True
        return self

    def _advance(self, due: np.ndarray) -> None:
        """:meth:`panes.engine.Engine.advance` of the rows ``due`` (their wake-up reached)."""
        e, cols = self.e, self.windows.cols
        self.changed = True
        start = cols[START][due]
        end = start + e.layout.size
        gone = by_value(partial(_gone, e.rules, e.layout.size, self.wm), start).astype(bool)
        past = self.wm >= end
        open_ = ~cols[CLOSED][due]
        seen_past = cols[SEEN_WM][due] >= end
        codes = cols[TRIGGER][due]
        waits = np.zeros(len(due), bool)
        if open_.any():
            waits[open_] = e.layout.triggers.waits_for_end(codes[open_], seen_past[open_])
        by_watermark = open_ & waits & past
        fires = np.zeros(len(due), bool)
        if by_watermark.any():
            fires[by_watermark] = e.layout.triggers.should_fire(
                codes[by_watermark], past[by_watermark]
            )
        order = cols[DUE][due]
        if fires.any():
            self._fire(due[fires], by_watermark[fires], gone[fires], False, 0, order[fires])
        closes = per_class(lambda fresh: (e.rules.closes(bool(fresh)),), cols[FRESH][due] > 0)[0]
        closing = gone & ~cols[CLOSED][due] & closes.astype(bool)
        if closing.any():
            n = int(closing.sum())
            self._fire(due[closing], np.ones(n, bool), np.ones(n, bool), True, 0, order[closing])
        staying = due[~gone]
        if len(staying):
            cols[DUE][staying] = self._dues(staying)
        if gone.any():
            keep = np.ones(self.windows.rows, bool)
            keep[due[gone]] = False
            self._keep(np.flatnonzero(keep))

    def _keep(self, rows: np.ndarray) -> None:
        """Only ``rows`` stay, in this order."""
        self.windows = self.windows.take(rows)
        self.ids = self.ids[rows]

    def _dues(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`panes.engine.Engine._window_dues` of ``rows``: the expiry, or earlier the end
        of the window where the trigger waits for it."""
        e, cols = self.e, self.windows.cols
        rules = e.rules
        end = cols[START][rows] + e.layout.size
        waits = np.zeros(len(rows), bool)
        open_ = ~cols[CLOSED][rows]
        if e.event_wakeups and open_.any():
            codes, past = cols[TRIGGER][rows][open_], (self.wm >= end)[open_]
            waits[open_] = e.layout.triggers.waits_for_end(codes, past)

        size = e.layout.size

        def due(end: int, waits: int) -> tuple[int]:
            expiry = rules.window_expiry(Window(end - size, end))
            return (rules.due(expiry, end if waits else None),)

        return per_class(due, end, waits)[0]

    def _add(self, parts: pa.Table, p_ids: np.ndarray) -> None:
        """:meth:`panes.engine.Engine.add_combined` of each key's parts."""
        self.changed = True
        p_start = parts.column(PART_START).to_numpy().astype(np.int64)
        # match each part with its window: rows sorted by (key, start), windows before parts
        w = self.windows
        n_w, n_p = w.rows, len(p_ids)
        both_ids = np.concatenate([self.ids, p_ids])
        both_start = np.concatenate([w.cols[START], p_start])
        source = np.concatenate([np.zeros(n_w, np.int8), np.ones(n_p, np.int8)])
        order = np.lexsort((source, both_start, both_ids))
        o_ids, o_start, o_src = both_ids[order], both_start[order], source[order]
        prev_same = np.zeros(len(order), bool)
        prev_same[1:] = (
            (o_ids[1:] == o_ids[:-1]) & (o_start[1:] == o_start[:-1]) & (o_src[:-1] == 0)
        )
        is_part = o_src == 1
        matched_part = order[is_part & prev_same] - n_w  # parts with a window
        matched_row = order[np.flatnonzero(is_part & prev_same) - 1]  # their windows
        new_part = order[is_part & ~prev_same] - n_w
        # elements of closed windows are dropped, each with its row
        closed = w.cols[CLOSED][matched_row]
        for p in matched_part[closed]:
            self._drop_closed(parts, int(p))
        matched_part, matched_row = matched_part[~closed], matched_row[~closed]
        # new windows: rows made from their parts, appended
        if len(new_part):
            self._append(parts, new_part, p_ids[new_part], p_start[new_part])
            new_rows = np.arange(n_w, n_w + len(new_part))
        else:
            new_rows = np.zeros(0, np.int64)
        if len(matched_part):
            self._merge(parts, matched_part, matched_row)
        rows = np.concatenate([matched_row, new_rows])
        p_of = np.concatenate([matched_part, new_part])
        self._added(rows, parts, p_of)
        if len(new_part):
            self._keep(self.windows.sorted_rows())

    def _append(self, parts: pa.Table, which: np.ndarray, ids: np.ndarray, start: np.ndarray):
        """New windows of the parts ``which``: ``create()`` merged with each part."""
        e = self.e
        n = len(which)
        index = pa.array(which, pa.int64())
        keys = parts.select([f.name for f in e.layout.key_fields]).take(index)
        keys = keys.cast(pa.schema(e.layout.key_fields))
        cols: dict[str, Any] = {}
        for a in e.layout.accs:
            for j, (column, name) in enumerate(zip(a.columns, a.part.grouped, strict=True)):
                cols[column] = a.held(j, parts.column(name).take(index))
        cols[START] = start
        cols[TRIGGER] = np.full(
            n, e.layout.triggers.code(e.layout.triggers.trigger.new_state()), np.int64
        )
        cols[CLOSED] = np.zeros(n, bool)
        cols[EMITTED] = np.zeros(n, bool)
        for name in (FRESH, HOLD, INDEX, NONSPEC, DUE):
            cols[name] = np.zeros(n, np.int64)
        cols[HAS_HOLD] = np.zeros(n, bool)
        cols[SEEN_WM] = np.full(n, self.wm, np.int64)
        cols[SEEN_PT] = self.key_pt[ids]
        self.windows = Windows.concat([self.windows, Windows(e.layout, keys, cols)])
        self.ids = np.concatenate([self.ids, ids])

    def _merge(self, parts: pa.Table, which: np.ndarray, rows: np.ndarray) -> None:
        """Each part's accumulator merged into its window's (``merge``)."""
        cols = self.windows.cols
        index = pa.array(which, pa.int64())
        for a in self.e.layout.accs:
            for j, (column, name) in enumerate(zip(a.columns, a.part.grouped, strict=True)):
                theirs = a.held(j, parts.column(name).take(index))
                cols[column] = _put(
                    cols[column], rows, a.merged(j, _take(cols[column], rows), theirs)
                )

    def _added(self, rows: np.ndarray, parts: pa.Table, which: np.ndarray) -> None:
        """:meth:`panes.engine.Engine._added` of ``rows`` (their parts ``which``)."""
        if not len(rows):
            return
        e, cols = self.e, self.windows.cols
        rules = e.rules
        counts = parts.column(COUNT).to_numpy().astype(np.int64)[which]
        cols[FRESH][rows] += counts
        end = cols[START][rows] + e.layout.size
        if rules.timestamps is TimestampCombiner.END_OF_WINDOW:

            def held(end: int) -> int:
                hold = rules.hold_after(None, None, end, self.wm)
                return _NO_HOLD if hold is None else hold

            new = by_value(held, end)
            sets = new != _NO_HOLD
            cols[HOLD][rows[sets]] = new[sets]
            cols[HAS_HOLD][rows[sets]] = True
        else:  # rules.hold_after: the new hold, or the pick of both
            hold = parts.column(e.lifting.hold_column).take(pa.array(which, pa.int64()))
            has = hold.is_valid().to_numpy(zero_copy_only=False).astype(bool)
            new = hold.fill_null(0).to_numpy().astype(np.int64)
            mine, mine_has = cols[HOLD][rows], cols[HAS_HOLD][rows]
            value = np.where(mine_has, _PICK[rules.hold_pick](mine, new), new)
            cols[HOLD][rows] = np.where(has, value, mine)
            cols[HAS_HOLD][rows] = mine_has | has
        past = self.wm >= end
        after, fires = e.layout.triggers.after_elements(cols[TRIGGER][rows], past, counts)
        cols[TRIGGER][rows] = after
        if fires.any():
            n = int(fires.sum())
            fired = rows[fires]
            self._fire(fired, np.zeros(n, bool), np.zeros(n, bool), False, 1, cols[START][fired])
        cols[DUE][rows] = self._dues(rows)

    def _fire(
        self,
        rows: np.ndarray,
        by_watermark: np.ndarray,
        gone: np.ndarray,
        closing: bool,
        phase: int,
        order: np.ndarray,
    ) -> None:
        """:meth:`panes.engine.Engine._fire` of ``rows`` (``gone``: let go right after)."""
        e, cols = self.e, self.windows.cols
        rules = e.rules
        end = cols[START][rows] + e.layout.size
        past = self.wm >= end
        if closing:
            finished = np.ones(len(rows), bool)
        else:
            after, finished = e.layout.triggers.on_fire(cols[TRIGGER][rows], past)
            cols[TRIGGER][rows] = after

        def firing(past: int, by_wm: int, nonspec: int, fresh: int, finished: int, gone: int):
            timing, nonspeculative = rules.timing(bool(past), bool(by_wm), nonspec)
            return (
                TIMINGS.index(timing),
                nonspeculative,
                rules.emits(bool(fresh), timing, bool(finished), closing),
                rules.is_last(bool(finished), bool(gone), closing),
                rules.keeps_hold(bool(past)),
                rules.resets(bool(finished)),
            )

        fresh = cols[FRESH][rows] > 0
        timing, nonspec, emit, last, keeps, resets = per_class(
            firing, past, by_watermark, cols[NONSPEC][rows], fresh, finished, gone
        )
        emit = emit.astype(bool)
        if emit.any():
            chosen = (timing[emit], nonspec[emit], last[emit])
            self._emit(rows[emit], *chosen, phase, order[emit], closing)
        cols[HAS_HOLD][rows] &= keeps.astype(bool)
        cols[FRESH][rows] = 0
        if finished.any():
            done = rows[finished]
            cols[CLOSED][done] = True
            cols[TRIGGER][done] = -1
            cols[HAS_HOLD][done] = False
            self._reset(done)  # a closed window keeps nothing
        resets = resets.astype(bool)
        if resets.any():
            self._reset(rows[resets])

    def _reset(self, rows: np.ndarray) -> None:
        """The accumulators of ``rows`` back to ``create()``."""
        cols = self.windows.cols
        for a in self.e.layout.accs:
            for j, name in enumerate(a.columns):
                cols[name] = _put(cols[name], rows, a.empty(j, len(rows)))

    def _emit(
        self,
        rows: np.ndarray,
        timing: np.ndarray,
        nonspec: np.ndarray,
        is_last: np.ndarray,
        phase: int,
        order: np.ndarray,
        closing: bool,
    ) -> None:
        """:meth:`panes.engine.Engine._emit` of ``rows``: a pane batch (columns) is kept (a
        closing pane after a firing of the same window in the same wake-up)."""
        e, cols = self.e, self.windows.cols
        rules, index = e.rules, cols[INDEX][rows].copy()
        cols[INDEX][rows], cols[NONSPEC][rows] = rules.counters_after(
            index, cols[NONSPEC][rows], timing == EARLY
        )
        start = cols[START][rows]
        end = start + e.layout.size
        timestamp = rules.pane_timestamp(cols[HAS_HOLD][rows], cols[HOLD][rows], end, np.where)
        cols[EMITTED][rows] = True
        take = pa.array(rows, pa.int64())
        self._panes.append(
            {
                "id": self.ids[rows],
                "phase": np.full(len(rows), phase, np.int64),
                "order": order,
                "start": start,
                "sub": np.full(len(rows), int(closing), np.int64),
                "end": end,
                "timestamp": timestamp,
                "index": index,
                "nonspec": nonspec,
                "timing": timing,
                "is_last": is_last.astype(bool),
                "pt": self.key_pt[self.ids[rows]],
                "held": [[_take(cols[name], rows) for name in a.columns] for a in e.layout.accs],
                "keys": self.windows.keys.take(take),
            }
        )

    # -- dropped elements ------------------------------------------------------------------------

    def _drop_closed(self, parts: pa.Table, part: int) -> None:
        lifted = self.lifted
        assert lifted is not None
        names = [f.name for f in self.e.layout.key_fields]
        key = engine_keys([[parts.column(n)[part].as_py()] for n in names])[0]
        start = int(parts.column(PART_START)[part].as_py())
        window = Window(start, start + self.e.layout.size)
        pt = self._pt_of_key(key)
        for value, ts in lifted.elements.of(key, start)():
            self.dropped.append(Dropped(key, value, ts, window, CLOSED_REASON, self.wm, pt))

    def _pt_of_key(self, key: Any) -> int:
        """The processing time of ``key`` after this visit's advance."""
        if self._key_pts is None:
            names = [f.name for f in self.e.layout.key_fields]
            keys = engine_keys([self.unique_keys.column(n).to_pylist() for n in names])
            self._key_pts = dict(zip(keys, self.key_pt.tolist(), strict=True))
        return self._key_pts[key]

    def _drop_expired(self) -> None:
        lifted, engine = self.lifted, self.e.per_key
        assert lifted is not None
        for key, elements in lifted.expired.items():
            state = KeyState(self.wm, self._pt_of_key(key))
            self.dropped.extend(engine.add_elements(state, key, elements).dropped)

    # -- output ----------------------------------------------------------------------------------

    def panes(self) -> PaneColumns | None:
        """The visit's panes (None: none), in the per-key engine's order: by key, then the
        advance's panes (by wake-up, window) before the added ones (by window)."""
        if not self._panes:
            return None
        batches = self._panes
        cat = {n: np.concatenate([b[n] for b in batches]) for n in _PANE_COLUMNS}
        order = np.lexsort((cat["sub"], cat["start"], cat["order"], cat["phase"], cat["id"]))
        index = pa.array(order, pa.int64())
        e = self.e
        held = [
            [_concat([b["held"][i][j] for b in batches], order) for j in range(len(a.columns))]
            for i, a in enumerate(e.layout.accs)
        ]
        return PaneColumns(
            keys=pa.concat_tables([b["keys"] for b in batches]).take(index),
            window_start=cat["start"][order],
            window_end=cat["end"][order],
            timestamp=cat["timestamp"][order],
            index=cat["index"][order],
            nonspeculative=cat["nonspec"][order],
            timing=cat["timing"][order],
            is_last=cat["is_last"][order],
            watermark=np.full(len(order), self.wm, np.int64),
            processing_time=cat["pt"][order],
            values=[a.value(h) for a, h in zip(e.layout.accs, held, strict=True)],
            names=e.layout.names,
            accumulators=partial(accumulators_of, e.layout.accs, held, e.layout.names is None),
        )


def _gone(rules: WindowRules, size: int, watermark: int, start: int) -> int:
    """:meth:`~panes.rules.WindowRules.gone` of the window of ``size`` at ``start``."""
    return rules.gone(Window(start, start + size), watermark)


def _take(column: Any, rows: np.ndarray) -> Any:
    """Rows of a held column (numpy or Arrow)."""
    if isinstance(column, np.ndarray):
        return column[rows]
    return column.take(pa.array(rows, pa.int64()))


def _concat(columns: list[Any], order: np.ndarray) -> Any:
    if isinstance(columns[0], np.ndarray):
        return np.concatenate(columns)[order]
    return pa.concat_arrays(columns).take(pa.array(order, pa.int64()))


def _put(column: Any, rows: np.ndarray, values: Any) -> Any:
    """``column`` with ``values`` at ``rows`` (numpy in place; Arrow: a new array)."""
    if len(rows) == 0:
        return column
    if isinstance(column, np.ndarray):
        column[rows] = values
        return column
    positions = np.full(len(column), -1, np.int64)
    positions[rows] = np.arange(len(rows))
    taken = values.take(pa.array(np.maximum(positions, 0), pa.int64()))
    return pc.if_else(pa.array(positions >= 0), taken, column)


__all__ = ["Visit"]
