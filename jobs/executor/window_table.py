"""Columnar windows: a bucket's fixed windows as one table, advanced and fed column by column.

For a pipeline on the columnar path (:func:`jobs.executor.paths.path_of`: those whose elements
combiner lifting serves, whose trigger waits for no processing time and whose mode keeps no
emitted pane, discarding or accumulating), the engine's
state of a window is a handful of numbers: its accumulator's parts, the trigger's state, the
elements since it last fired, its output-timestamp hold, its pane counters, whether it closed and
when it next needs the watermark. A bucket then keeps its windows as one table, a row per (key,
window), and a visit does with numpy over all rows at once what the engine does per key and
window (:meth:`panes.engine.Engine.advance`, then :meth:`~panes.engine.Engine.add_combined`):

* **advance** (rows whose wake-up the watermark reached): a window whose trigger waited for the
  watermark fires if its trigger says so (``ON_TIME``, or ``LATE`` after an earlier on-time
  pane); a window past its end plus the allowed lateness fires its closing pane (elements that
  never fired, or always with ``closing_behavior = "fire_always"``) and is deleted;
* **add** (each key's windows with new elements, pre-combined by lifting): elements of a closed
  window are dropped (returned as data, with their own rows), others are merged into the
  window's accumulator (a new window starts from the part), the hold moves, the trigger sees the
  elements and fires (``EARLY`` before the end of the window, ``LATE`` after);

each firing emits a pane row (or none: an empty firing without ``fire_always``), after which a
discarding window starts over and a finished trigger closes its window.

The trigger stays the authority: a window's trigger state is interned as a small integer and
each of the trigger's methods runs once per *class* of windows (their state, whether the
watermark passed their end, how many elements arrived), its answer spread over the class's rows
(:class:`_Triggers`). A trigger without processing-time parts looks at the clocks only through
"the watermark passed the end of the window", so a class's answer is every member's.

What a row holds, and how it maps onto the engine's :class:`panes.state.KeyState`
(:meth:`Windows.key_states`, to inspect and compare; a bucket of this path is stored only as this
table):

=================  ==============================================================================
column             what it holds
=================  ==============================================================================
the key columns    the key's value, in the operator input's types
``start``          the window's start (µs; its end is ``start + size``)
``acc_<i>``        the ``i``-th aggregate's accumulator part (a mean: ``acc_<i>_sum``, ``_count``);
                   an integer sum in 128 bits (``decimal128(38, 0)``: :mod:`~.wide_sums`)
``trigger``        the trigger's state (pickled tuple; null once the window closed)
``closed``         the trigger finished: later elements of the window are dropped
``fresh``          elements added since the window last fired
``hold``           the output-timestamp hold (null: none)
``pane_index``     panes emitted so far; ``nonspeculative``: non-early panes emitted so far
``emitted``        whether the window emitted a pane
``due``            the next watermark at which the window needs attention (µs)
``seen_wm``        the key's watermark and processing time (``seen_pt``), as its ``KeyState``
=================  ==============================================================================

**Sums in 128 bits.** Python's integers do not stop at 64 bits, so neither do the columns' sums:
a window's integer sum (``sum``, a mean's sum) is kept in 128 bits (:mod:`jobs.executor.wide_sums`;
in memory an ``(n, 2)`` int64 array), which sums of 64-bit values cannot leave. A pane whose value
does not fit its pane-log column is refused when the visit's panes are built
(:meth:`Visit.pane_columns`: :class:`sinks.errors.PaneValueOutOfRange`, naming key, window and
aggregate), as on the engine's paths.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.executor import wide_sums as wide
from jobs.executor.lifting import COUNT, Lifted, Lifting
from jobs.executor.lifting import START as PART_START
from jobs.executor.operator_input import engine_keys, key_ids, key_table
from panes.combiners import Aggregates
from panes.engine import CLOSED_REASON, Engine
from panes.pane import Dropped, Timing
from panes.state import KeyState, WindowState
from panes.time import END_OF_TIME
from panes.triggers import ROOT, Trigger, TriggerContext
from panes.window import Window
from panes.windowing import AccumulationMode, ClosingBehavior, OnTimeBehavior, TimestampCombiner
from sinks.column_types import integer_range
from sinks.pane_log import PaneLogLayout, core_schema, value_out_of_range

FORMAT = b"windows-2"
"""The schema metadata value (key :data:`FORMAT_KEY`) that marks a bucket stored in this form."""
FORMAT_KEY = b"panestore.bucket"
START, TRIGGER, CLOSED, FRESH, HOLD = "start", "trigger", "closed", "fresh", "hold"
INDEX, NONSPEC, EMITTED, DUE, SEEN_WM, SEEN_PT = (
    "pane_index",
    "nonspeculative",
    "emitted",
    "due",
    "seen_wm",
    "seen_pt",
)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")
_EARLY, _ON_TIME, _LATE = 0, 1, 2
_TIMING_NAMES = (Timing.EARLY.name, Timing.ON_TIME.name, Timing.LATE.name)  # by the codes above


def _clamp(value: int) -> int:
    return max(_INT64_MIN, min(_INT64_MAX, value))


class _Triggers:
    """A trigger's states interned as small integers (-1: a closed window, no state), and its
    methods run once per class of windows (the module doc)."""

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = trigger
        self.states: list[tuple] = []
        self._codes: dict[tuple, int] = {}
        self._before = TriggerContext(Window(0, 1), 0, 0)  # the watermark before the end
        self._past = TriggerContext(Window(0, 1), 1, 0)  # at or past the end

    def code(self, state: Sequence[Any]) -> int:
        key = tuple(state)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.states)
            self.states.append(key)
        return code

    def codes_of(self, column: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """The codes of a stored ``trigger`` column (pickled tuples; null: closed)."""
        encoded = pc.dictionary_encode(column)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        mine = np.array(
            [self.code(pickle.loads(s)) for s in encoded.dictionary.to_pylist()] or [0],
            dtype=np.int64,
        )
        indices = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(indices < 0, -1, mine[np.maximum(indices, 0)])

    def column(self, codes: np.ndarray) -> pa.Array:
        """``codes`` as a stored ``trigger`` column."""
        states = [pickle.dumps(s, protocol=5) for s in self.states] or [b""]
        return pa.DictionaryArray.from_arrays(
            pa.array(codes.astype(np.int32), mask=codes < 0), pa.array(states, pa.binary())
        ).cast(pa.binary())

    def _ctx(self, past: int) -> TriggerContext:
        return self._past if past else self._before

    def _per_class(self, fn: Callable[..., tuple], *columns: np.ndarray) -> list[np.ndarray]:
        """``fn`` of each distinct row of ``columns`` (non-negative integers but the first,
        a code), its answers spread over the rows."""
        if len(columns[0]) == 0:
            return [np.zeros(0, np.int64) for _ in range(2)]
        # one integer per row: the columns' values in mixed radix
        combined = columns[0].astype(np.int64) + 1
        radices = [int(combined.max()) + 1]
        for column in columns[1:]:
            radix = int(column.max()) + 1
            combined = combined * radix + column.astype(np.int64)
            radices.append(radix)
        if np.prod([float(r) for r in radices]) >= 2**62:  # too many for one integer: rows
            stacked = np.stack([c.astype(np.int64) for c in columns], axis=1)
            rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
            answers = [fn(*row) for row in rows.tolist()]
            table = np.array(answers, dtype=np.int64).reshape(len(answers), -1)
            return [table[:, i][inverse.reshape(-1)] for i in range(table.shape[1])]
        classes, inverse = np.unique(combined, return_inverse=True)
        answers = []
        for value in classes.tolist():
            digits = []
            for radix in reversed(radices[1:]):
                value, digit = divmod(value, radix)
                digits.append(digit)
            answers.append(fn(value - 1, *reversed(digits)))
        table = np.array(answers, dtype=np.int64).reshape(len(answers), -1)
        return [table[:, i][inverse] for i in range(table.shape[1])]

    def after_elements(self, codes, past, n) -> tuple[np.ndarray, np.ndarray]:
        """``on_elements`` of ``n`` elements, then ``should_fire``: (codes after, fires)."""

        def one(code: int, past: int, n: int) -> tuple[int, int]:
            state = list(self.states[code])
            ctx = self._ctx(past)
            self.trigger.on_elements(state, ROOT, ctx, n)
            return self.code(state), int(self.trigger.should_fire(state, ROOT, ctx))

        after, fires = self._per_class(one, codes, past, n)
        return after, fires.astype(bool)

    def should_fire(self, codes, past) -> np.ndarray:
        def one(code: int, past: int) -> tuple[int, int]:
            return int(self.trigger.should_fire(list(self.states[code]), ROOT, self._ctx(past))), 0

        return self._per_class(one, codes, past)[0].astype(bool)

    def on_fire(self, codes, past) -> tuple[np.ndarray, np.ndarray]:
        """``next`` (a firing): (codes after, finished)."""

        def one(code: int, past: int) -> tuple[int, int]:
            state = list(self.states[code])
            self.trigger.on_fire(state, ROOT, self._ctx(past))
            return self.code(state), int(self.trigger.is_done(state, ROOT))

        after, done = self._per_class(one, codes, past)
        return after, done.astype(bool)

    def waits_for_end(self, codes, past) -> np.ndarray:
        """Whether the trigger's next event-time wake-up is the end of the window (a trigger
        without processing-time parts has no other)."""

        def one(code: int, past: int) -> tuple[int, int]:
            wake = self.trigger.event_wakeup(list(self.states[code]), ROOT, self._ctx(past))
            if wake not in (None, 1):
                raise ValueError(f"unexpected event-time wake-up {wake} of {self.trigger}")
            return int(wake is not None), 0

        return self._per_class(one, codes, past)[0].astype(bool)


@dataclass(frozen=True)
class _Acc:
    """One aggregate's accumulator part: its kind (as lifting names it), its stored columns and
    their types (an integer sum's: :data:`jobs.executor.wide_sums.WIDE`, held as int64 pairs;
    counts int64; a minimum or maximum the value's type, held as Arrow arrays)."""

    kind: str
    columns: tuple[str, ...]
    types: tuple[pa.DataType, ...]

    def is_wide(self, i: int) -> bool:
        return self.types[i] == wide.WIDE


class Columnar:
    """How one pipeline's buckets are kept and visited as window tables (built by :meth:`of`
    on the worker, beside the engine)."""

    def __init__(self, engine: Engine, lifting: Lifting, layout: PaneLogLayout) -> None:
        windowing = engine.windowing
        self.engine = engine
        self.lifting = lifting
        self.layout = layout
        self.size = lifting.size
        self.lateness = windowing.allowed_lateness
        self.triggers = _Triggers(windowing.trigger)
        self.discarding = windowing.accumulation_mode is AccumulationMode.DISCARDING
        self.ontime_always = windowing.on_time_behavior is OnTimeBehavior.FIRE_ALWAYS
        self.closing_always = windowing.closing_behavior is ClosingBehavior.FIRE_ALWAYS
        self.holds_until_ontime = windowing.trigger.has_ontime_pane
        self.event_wakeups = windowing.trigger.has_event_time
        self.timestamps = windowing.timestamp_combiner
        self.key_fields = tuple(pa.field(k, lifting.schema.arrow_type(k)) for k in lifting.keys)
        self.accs: list[_Acc] = []
        for i, part in enumerate(lifting.parts):
            if part.kind == "mean":
                columns = (f"acc_{i}_sum", f"acc_{i}_count")
                self.accs.append(_Acc("mean", columns, (wide.WIDE, pa.int64())))
            elif part.kind in ("min", "max"):
                kind_type = lifting.schema.arrow_type(part.column or "")
                self.accs.append(_Acc(part.kind, (f"acc_{i}",), (kind_type,)))
            elif part.kind == "sum":
                self.accs.append(_Acc(part.kind, (f"acc_{i}",), (wide.WIDE,)))
            else:
                self.accs.append(_Acc(part.kind, (f"acc_{i}",), (pa.int64(),)))
        fn = engine.combine_fn
        # the pane log's value columns, one per part
        self.names = list(fn.fns) if isinstance(fn, Aggregates) else list(layout.value_names)
        self.schema = pa.schema(
            [
                *self.key_fields,
                pa.field(START, pa.int64(), nullable=False),
                *(
                    pa.field(c, t)
                    for a in self.accs
                    for c, t in zip(a.columns, a.types, strict=True)
                ),
                pa.field(TRIGGER, pa.binary()),
                pa.field(CLOSED, pa.bool_(), nullable=False),
                pa.field(FRESH, pa.int64(), nullable=False),
                pa.field(HOLD, pa.int64()),
                pa.field(INDEX, pa.int64(), nullable=False),
                pa.field(NONSPEC, pa.int64(), nullable=False),
                pa.field(EMITTED, pa.bool_(), nullable=False),
                pa.field(DUE, pa.int64(), nullable=False),
                pa.field(SEEN_WM, pa.int64(), nullable=False),
                pa.field(SEEN_PT, pa.int64(), nullable=False),
            ],
            metadata={FORMAT_KEY: FORMAT},
        )
        self.core = core_schema(layout)

    # -- loading and saving ----------------------------------------------------------------------

    def load(self, blob: bytes | None) -> Windows:
        """A bucket stored in this form (None or empty: no windows)."""
        if not blob:
            return Windows.empty(self)
        with pa.ipc.open_stream(blob) as reader:
            if (reader.schema.metadata or {}).get(FORMAT_KEY) != FORMAT:
                raise ValueError("the bucket is not a window table of this version")
            return Windows.of_table(self, reader.read_all())

    def save(self, windows: Windows) -> bytes | None:
        """The bucket's blob (None: no window is left)."""
        if windows.rows == 0:
            return None
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(windows.table())
        return sink.getvalue().to_pybytes()

    # -- a visit ---------------------------------------------------------------------------------

    def visit(
        self, windows: Windows, lifted: Lifted | None, watermark: int, processing_time: int
    ) -> Visit:
        """Visit a bucket's ``windows`` at the step's clocks with its lifted input (None: a
        timer's visit): the panes and dropped elements, and the windows after."""
        return Visit(self, windows, lifted, watermark, processing_time).run()


class Windows:
    """A bucket's windows in memory: key columns as Arrow, the rest as numpy arrays (the module
    doc's columns), rows sorted by key then start."""

    def __init__(self, columnar: Columnar, keys: pa.Table, cols: dict[str, Any]) -> None:
        self.columnar = columnar
        self.keys = keys
        self.cols = cols  # START... as numpy; sums as int64 pairs, other accs Arrow; TRIGGER codes

    @property
    def rows(self) -> int:
        return self.keys.num_rows

    @classmethod
    def empty(cls, columnar: Columnar) -> Windows:
        return cls.of_table(columnar, columnar.schema.empty_table())

    @classmethod
    def of_table(cls, columnar: Columnar, table: pa.Table) -> Windows:
        names = [f.name for f in columnar.key_fields]
        cols: dict[str, Any] = {}
        for a in columnar.accs:
            for i, c in enumerate(a.columns):
                column = table.column(c).combine_chunks()
                cols[c] = wide.pairs_of(column) if a.is_wide(i) else column
        for c in (START, FRESH, INDEX, NONSPEC, DUE, SEEN_WM, SEEN_PT):
            cols[c] = table.column(c).to_numpy().astype(np.int64)
        for c in (CLOSED, EMITTED):
            cols[c] = table.column(c).to_numpy(zero_copy_only=False).astype(bool)
        hold = table.column(HOLD)
        cols["has_hold"] = hold.is_valid().to_numpy(zero_copy_only=False).astype(bool)
        cols[HOLD] = hold.fill_null(0).to_numpy().astype(np.int64)
        cols[TRIGGER] = columnar.triggers.codes_of(table.column(TRIGGER))
        return cls(columnar, table.select(names), cols)

    def table(self) -> pa.Table:
        """These windows as the stored table (the module doc)."""
        c, cols = self.columnar, self.cols
        arrays: list[Any] = list(self.keys.columns)
        arrays.append(pa.array(cols[START], pa.int64()))
        for a in c.accs:
            for i, name in enumerate(a.columns):
                arrays.append(wide.decimals(cols[name]) if a.is_wide(i) else cols[name])
        arrays.append(c.triggers.column(cols[TRIGGER]))
        arrays.append(pa.array(cols[CLOSED], pa.bool_()))
        arrays.append(pa.array(cols[FRESH], pa.int64()))
        arrays.append(pa.array(cols[HOLD], pa.int64(), mask=~cols["has_hold"]))
        for name in (INDEX, NONSPEC):
            arrays.append(pa.array(cols[name], pa.int64()))
        arrays.append(pa.array(cols[EMITTED], pa.bool_()))
        for name in (DUE, SEEN_WM, SEEN_PT):
            arrays.append(pa.array(cols[name], pa.int64()))
        return pa.Table.from_arrays(arrays, schema=c.schema)

    def take(self, rows: np.ndarray) -> Windows:
        index = pa.array(rows, pa.int64())
        cols = {
            n: (v.take(index) if isinstance(v, pa.Array) else v[rows]) for n, v in self.cols.items()
        }
        return Windows(self.columnar, self.keys.take(index), cols)

    @staticmethod
    def concat(parts: Sequence[Windows]) -> Windows:
        first = parts[0]
        cols = {}
        for n, v in first.cols.items():
            if isinstance(v, pa.Array):
                cols[n] = pa.concat_arrays([p.cols[n] for p in parts])
            else:
                cols[n] = np.concatenate([p.cols[n] for p in parts])
        keys = pa.concat_tables([p.keys for p in parts]).combine_chunks()
        return Windows(first.columnar, keys, cols)

    # -- the engine's form -----------------------------------------------------------------------

    def next_due(self) -> int | None:
        """The earliest wake-up of these windows (None: no window)."""
        return int(self.cols[DUE].min()) if self.rows else None

    def sorted_rows(self) -> np.ndarray:
        """Row order by key, then start."""
        ids, _ = key_ids(self.keys)
        return np.lexsort((self.cols[START], ids))

    def key_states(self) -> dict[Any, KeyState]:
        """These rows as the engine's key states (the inverse of :meth:`of_key_states`)."""
        c, cols = self.columnar, self.cols
        names = [f.name for f in c.key_fields]
        keys = engine_keys([self.keys.column(n).to_pylist() for n in names])
        values = [
            [_python(a, i, cols[name]) for i, name in enumerate(a.columns)] for a in c.accs
        ]  # per acc: its columns' values
        accs_by_part = []
        for a, columns in zip(c.accs, values, strict=True):
            accs_by_part.append(
                list(zip(columns[0], columns[1], strict=True)) if a.kind == "mean" else columns[0]
            )
        lists = {n: cols[n].tolist() for n in (START, FRESH, HOLD, INDEX, NONSPEC, DUE)}
        flags = {n: cols[n].tolist() for n in (CLOSED, EMITTED, "has_hold")}
        seen_wm, seen_pt, codes = cols[SEEN_WM].tolist(), cols[SEEN_PT].tolist(), cols[TRIGGER]
        states: dict[Any, KeyState] = {}
        for i, key in enumerate(keys):
            state = states.get(key)
            if state is None:
                state = states[key] = KeyState(seen_wm[i], seen_pt[i])
            ws = WindowState.__new__(WindowState)
            closed = flags[CLOSED][i]
            if closed:
                ws.acc, ws.trigger = None, None  # type: ignore[assignment]  # as ws.close()
            else:
                parts = [p[i] for p in accs_by_part]
                ws.acc = parts[0] if c.lifting.single else tuple(parts)
                ws.trigger = list(c.triggers.states[int(codes[i])])
            ws.closed, ws.fresh, ws.weight = closed, lists[FRESH][i], 0
            ws.hold = lists[HOLD][i] if flags["has_hold"][i] else None
            ws.index, ws.nonspeculative = lists[INDEX][i], lists[NONSPEC][i]
            ws.emitted, ws.last, ws.superseded, ws.retractions = flags[EMITTED][i], None, [], []
            ws.event_due, ws.processing_due = lists[DUE][i], None
            start = lists[START][i]
            state.windows[Window(start, start + c.size)] = ws
        for state in states.values():
            state.bound_wakeups()
        return states


def _python(acc: _Acc, i: int, column: Any) -> list:
    """An accumulator column's values as Python's (integers of any size)."""
    return wide.python_ints(column) if acc.is_wide(i) else column.to_pylist()


class Visit:
    """One visit of a bucket's window table (:meth:`Columnar.visit`)."""

    def __init__(
        self,
        columnar: Columnar,
        windows: Windows,
        lifted: Lifted | None,
        watermark: int,
        processing_time: int,
    ) -> None:
        self.c = columnar
        self.w = windows
        self.lifted = lifted
        self.wm = watermark
        self.pt = processing_time
        self.panes: list[dict[str, Any]] = []  # pane batches: numpy/Arrow columns + order
        self.dropped: list[Dropped] = []
        self.changed = False
        self._key_pts: dict[Any, int] | None = None

    # -- the steps -------------------------------------------------------------------------------

    def run(self) -> Visit:
        c, w, lifted = self.c, self.w, self.lifted
        names = [f.name for f in c.key_fields]
        key_schema = pa.schema(c.key_fields)
        tables = [w.keys]
        parts = None
        if lifted is not None:
            parts = lifted.parts
            tables.append(parts.select(names).cast(key_schema))
            tables.append(key_table(list(lifted.expired), c.key_fields))
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
        key_pt = np.full(n_keys, self.pt, np.int64)
        seen = np.full(n_keys, _INT64_MIN, np.int64)
        if n_w:
            np.maximum.at(seen, w_ids, w.cols[SEEN_PT])
        key_pt = np.maximum(key_pt, seen)
        self.key_pt = key_pt
        self.ids = w_ids
        if due_rows.any():
            self._advance(np.flatnonzero(due_rows))
        if parts is not None and n_p:
            self._add(parts, p_ids)
        if self.lifted is not None:
            self._drop_expired()
        # the visited keys' clocks, as advance leaves them
        w = self.w
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
        c, cols = self.c, self.w.cols
        self.changed = True
        end = cols[START][due] + c.size
        if self.wm >= END_OF_TIME:
            gone = np.ones(len(due), bool)
        else:
            gone = end < _clamp(self.wm - c.lateness)
        past = self.wm >= end
        open_ = ~cols[CLOSED][due]
        seen_past = cols[SEEN_WM][due] >= end
        codes = cols[TRIGGER][due]
        waits = np.zeros(len(due), bool)
        if open_.any():
            waits[open_] = c.triggers.waits_for_end(codes[open_], seen_past[open_])
        by_watermark = open_ & waits & past
        fires = np.zeros(len(due), bool)
        if by_watermark.any():
            fires[by_watermark] = c.triggers.should_fire(codes[by_watermark], past[by_watermark])
        order = cols[DUE][due]
        if fires.any():
            last = gone[fires] & (not c.closing_always)
            self._fire(due[fires], np.ones(fires.sum(), bool), last, False, 0, order[fires])
        closing = gone & ~cols[CLOSED][due] & ((cols[FRESH][due] > 0) | c.closing_always)
        if closing.any():
            n = int(closing.sum())
            self._fire(due[closing], np.ones(n, bool), np.ones(n, bool), True, 0, order[closing])
        staying = due[~gone]
        if len(staying):
            cols[DUE][staying] = self._dues(staying)
        if gone.any():
            keep = np.ones(self.w.rows, bool)
            keep[due[gone]] = False
            self._keep(np.flatnonzero(keep))

    def _keep(self, rows: np.ndarray) -> None:
        """Only ``rows`` stay, in this order."""
        self.w = self.w.take(rows)
        self.ids = self.ids[rows]

    def _dues(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`panes.engine.Engine._window_dues` of ``rows``: the expiry, or earlier the end
        of the window where the trigger waits for it."""
        c, cols = self.c, self.w.cols
        end = cols[START][rows] + c.size
        limit = _clamp(END_OF_TIME - c.lateness - 1)
        event = np.where(end > limit, END_OF_TIME, end + min(c.lateness + 1, _INT64_MAX))
        open_ = ~cols[CLOSED][rows]
        if c.event_wakeups and open_.any():
            codes, past = cols[TRIGGER][rows][open_], (self.wm >= end)[open_]
            waits = c.triggers.waits_for_end(codes, past)
            event[open_] = np.where(waits & (end[open_] < event[open_]), end[open_], event[open_])
        return event

    def _add(self, parts: pa.Table, p_ids: np.ndarray) -> None:
        """:meth:`panes.engine.Engine.add_combined` of each key's parts."""
        self.changed = True
        p_start = parts.column(PART_START).to_numpy().astype(np.int64)
        # match each part with its window: rows sorted by (key, start), windows before parts
        w = self.w
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
            self._keep(self.w.sorted_rows())

    def _append(self, parts: pa.Table, which: np.ndarray, ids: np.ndarray, start: np.ndarray):
        c, lifted = self.c, self.lifted
        assert lifted is not None
        n = len(which)
        index = pa.array(which, pa.int64())
        keys = parts.select([f.name for f in c.key_fields]).take(index)
        keys = keys.cast(pa.schema(c.key_fields))
        cols: dict[str, Any] = {}
        for a, names in zip(c.accs, c.lifting.acc_columns, strict=True):
            for i, (column, name) in enumerate(zip(a.columns, names, strict=True)):
                taken = parts.column(name).take(index).combine_chunks()
                cols[column] = wide.pairs_of(taken) if a.is_wide(i) else taken.cast(a.types[i])
        new_state = c.triggers.code(c.triggers.trigger.new_state())
        cols[START] = start
        cols[TRIGGER] = np.full(n, new_state, np.int64)
        cols[CLOSED] = np.zeros(n, bool)
        cols[EMITTED] = np.zeros(n, bool)
        for name in (FRESH, HOLD, INDEX, NONSPEC):
            cols[name] = np.zeros(n, np.int64)
        cols["has_hold"] = np.zeros(n, bool)
        cols[DUE] = np.zeros(n, np.int64)
        cols[SEEN_WM] = np.full(n, self.wm, np.int64)
        cols[SEEN_PT] = self.key_pt[ids]
        self.w = Windows.concat([self.w, Windows(c, keys, cols)])
        self.ids = np.concatenate([self.ids, ids])

    def _merge(self, parts: pa.Table, which: np.ndarray, rows: np.ndarray) -> None:
        """Each part's accumulator merged into its window's."""
        c, lifted, cols = self.c, self.lifted, self.w.cols
        assert lifted is not None
        index = pa.array(which, pa.int64())
        row_index = pa.array(rows, pa.int64())
        for a, names in zip(c.accs, c.lifting.acc_columns, strict=True):
            for i, (column, name) in enumerate(zip(a.columns, names, strict=True)):
                mine = cols[column]
                theirs = parts.column(name).take(index).combine_chunks()
                if a.is_wide(i):
                    mine[rows] = wide.add(mine[rows], wide.pairs_of(theirs))
                    continue
                current, theirs = mine.take(row_index), theirs.cast(a.types[i])
                if a.kind == "min":
                    merged = pc.min_element_wise(current, theirs)
                elif a.kind == "max":
                    merged = pc.max_element_wise(current, theirs)
                else:
                    merged = pc.add_checked(current, theirs)  # a count: within 64 bits
                cols[column] = _put(mine, rows, merged)

    def _added(self, rows: np.ndarray, parts: pa.Table, which: np.ndarray) -> None:
        """:meth:`panes.engine.Engine._added` of ``rows`` (their parts ``which``)."""
        if not len(rows):
            return
        c, lifted, cols = self.c, self.lifted, self.w.cols
        assert lifted is not None
        counts = parts.column(COUNT).to_numpy().astype(np.int64)[which]
        cols[FRESH][rows] += counts
        end = cols[START][rows] + c.size
        if c.timestamps is TimestampCombiner.END_OF_WINDOW:
            held = end > self.wm
            cols[HOLD][rows[held]] = end[held] - 1
            cols["has_hold"][rows[held]] = True
        else:
            hold = parts.column(c.lifting.hold_column).take(pa.array(which, pa.int64()))
            has = hold.is_valid().to_numpy(zero_copy_only=False).astype(bool)
            new = hold.fill_null(0).to_numpy().astype(np.int64)
            mine, mine_has = cols[HOLD][rows], cols["has_hold"][rows]
            pick = np.minimum if c.timestamps is TimestampCombiner.EARLIEST else np.maximum
            value = np.where(mine_has, pick(mine, new), new)
            cols[HOLD][rows] = np.where(has, value, mine)
            cols["has_hold"][rows] = mine_has | has
        past = self.wm >= end
        after, fires = c.triggers.after_elements(cols[TRIGGER][rows], past, counts)
        cols[TRIGGER][rows] = after
        if fires.any():
            n = int(fires.sum())
            self._fire(
                rows[fires],
                np.zeros(n, bool),
                np.zeros(n, bool),
                False,
                1,
                cols[START][rows[fires]],
            )
        cols[DUE][rows] = self._dues(rows)

    def _fire(
        self,
        rows: np.ndarray,
        by_watermark: np.ndarray,
        last: np.ndarray,
        closing: bool,
        phase: int,
        order: np.ndarray,
    ) -> None:
        """:meth:`panes.engine.Engine._fire` of ``rows``."""
        c, cols = self.c, self.w.cols
        end = cols[START][rows] + c.size
        past = self.wm >= end
        if closing:
            finished = np.ones(len(rows), bool)
        else:
            after, finished = c.triggers.on_fire(cols[TRIGGER][rows], past)
            cols[TRIGGER][rows] = after
        nonspec = np.where(past, cols[NONSPEC][rows], -1)
        timing = np.where(~past, _EARLY, np.where(by_watermark & (nonspec == 0), _ON_TIME, _LATE))
        fresh = cols[FRESH][rows] > 0
        if closing:
            emit = fresh | c.closing_always
        else:
            emit = fresh | ((timing == _ON_TIME) & c.ontime_always) | (finished & c.closing_always)
        if emit.any():
            self._emit(
                rows[emit],
                timing[emit],
                nonspec[emit],
                (finished | last)[emit],
                phase,
                order[emit],
                closing,
            )
        has_hold = cols["has_hold"][rows]
        cols["has_hold"][rows] = has_hold & ~past & c.holds_until_ontime
        cols[FRESH][rows] = 0
        if finished.any():
            done = rows[finished]
            cols[CLOSED][done] = True
            cols[TRIGGER][done] = -1
            cols["has_hold"][done] = False
            self._reset(done)
        if c.discarding and (~finished).any():
            self._reset(rows[~finished])

    def _reset(self, rows: np.ndarray) -> None:
        """The accumulators of ``rows`` back to ``create()`` (a closed window's are not read)."""
        cols = self.w.cols
        for a in self.c.accs:
            for i, name in enumerate(a.columns):
                if a.is_wide(i):
                    cols[name][rows] = 0
                    continue
                if a.kind in ("min", "max"):
                    empty = pa.nulls(len(rows), a.types[i])
                else:
                    empty = pa.array(np.zeros(len(rows), np.int64))
                cols[name] = _put(cols[name], rows, empty)

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
        """:meth:`panes.engine.Engine._emit` of ``rows``: a pane batch (columns) is kept."""
        c, cols = self.c, self.w.cols
        index = cols[INDEX][rows].copy()
        cols[INDEX][rows] = index + 1
        not_early = timing != _EARLY
        cols[NONSPEC][rows] = np.where(not_early, nonspec + 1, cols[NONSPEC][rows])
        start = cols[START][rows]
        end = start + c.size
        timestamp = np.where(cols["has_hold"][rows], cols[HOLD][rows], end - 1)
        cols[EMITTED][rows] = True
        take = pa.array(rows, pa.int64())
        self.panes.append(
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
                "is_last": is_last,
                "pt": self.key_pt[self.ids[rows]],
                "accs": [
                    [
                        cols[name][rows] if a.is_wide(i) else cols[name].take(take)
                        for i, name in enumerate(a.columns)
                    ]
                    for a in c.accs
                ],
                "keys": self.w.keys.take(take),
            }
        )

    # -- dropped elements ------------------------------------------------------------------------

    def _drop_closed(self, parts: pa.Table, part: int) -> None:
        lifted = self.lifted
        assert lifted is not None
        names = [f.name for f in self.c.key_fields]
        key = engine_keys([[parts.column(n)[part].as_py()] for n in names])[0]
        start = int(parts.column(PART_START)[part].as_py())
        window = Window(start, start + self.c.size)
        pt = self._pt_of_key(key)
        for value, ts in lifted.elements.of(key, start)():
            self.dropped.append(Dropped(key, value, ts, window, CLOSED_REASON, self.wm, pt))

    def _pt_of_key(self, key: Any) -> int:
        """The processing time of ``key`` after this visit's advance."""
        if self._key_pts is None:
            names = [f.name for f in self.c.key_fields]
            keys = engine_keys([self.unique_keys.column(n).to_pylist() for n in names])
            self._key_pts = dict(zip(keys, self.key_pt.tolist(), strict=True))
        return self._key_pts[key]

    def _drop_expired(self) -> None:
        lifted, engine = self.lifted, self.c.engine
        assert lifted is not None
        for key, elements in lifted.expired.items():
            state = KeyState(self.wm, self._pt_of_key(key))
            self.dropped.extend(engine.add_elements(state, key, elements).dropped)

    # -- output ----------------------------------------------------------------------------------

    def pane_columns(self) -> tuple[dict[str, Any], int]:
        """The visit's panes as the operator's core pane columns (Arrow arrays), in order of
        key, then the advance's panes (by wake-up, window) before the added ones (by window)."""
        if not self.panes:
            return {}, 0
        batches = self.panes
        cat = {
            n: np.concatenate([b[n] for b in batches])
            for n in (
                "id",
                "phase",
                "order",
                "start",
                "sub",
                "end",
                "timestamp",
                "index",
                "nonspec",
                "timing",
                "is_last",
                "pt",
            )
        }
        order = np.lexsort((cat["sub"], cat["start"], cat["order"], cat["phase"], cat["id"]))
        index = pa.array(order, pa.int64())
        n = len(order)
        c, core = self.c, self.c.core
        keys = pa.concat_tables([b["keys"] for b in batches]).take(index)
        out: dict[str, Any] = {}
        for f in c.key_fields:
            out[f.name] = keys.column(f.name).combine_chunks().cast(core.field(f.name).type)
        out["window_start_us"] = pa.array(cat["start"][order], pa.int64())
        out["window_end_us"] = pa.array(cat["end"][order], pa.int64())
        accs = [
            [
                np.concatenate([b["accs"][i][j] for b in batches])[order]
                if a.is_wide(j)
                else pa.concat_arrays([b["accs"][i][j] for b in batches]).take(index)
                for j in range(len(a.columns))
            ]
            for i, a in enumerate(c.accs)
        ]
        values = [_extract(a, columns) for a, columns in zip(c.accs, accs, strict=True)]
        for name, value in zip(c.names, values, strict=True):
            type_ = core.field(name).type
            if isinstance(value, np.ndarray):  # a sum: refused where its column cannot hold it
                value = self._fitted(value, name, type_, keys, out)
            out[name] = value.cast(type_)
        out["timestamp_us"] = pa.array(cat["timestamp"][order], pa.int64())
        out["pane_index"] = pa.array(cat["index"][order], pa.int64())
        out["nonspeculative_index"] = pa.array(cat["nonspec"][order], pa.int64())
        names = pa.array(_TIMING_NAMES, pa.string())
        out["timing"] = names.take(pa.array(cat["timing"][order], pa.int64()))
        out["is_first"] = pa.array(cat["index"][order] == 0, pa.bool_())
        out["is_last"] = pa.array(cat["is_last"][order], pa.bool_())
        out["is_retraction"] = pa.array(np.zeros(n, bool), pa.bool_())
        out["supersedes"] = pa.array([[]] * n, core.field("supersedes").type)
        out["watermark_us"] = pa.array(np.full(n, self.wm, np.int64), pa.int64())
        out["processing_time_us"] = pa.array(cat["pt"][order], pa.int64())
        out["accumulator"] = self._accumulator_json(accs, n)
        return out, n

    def _fitted(
        self, pairs: np.ndarray, name: str, type_: pa.DataType, keys: pa.Table, out: dict
    ) -> pa.Array:
        """A sum's 128-bit values as ``type_`` (an integer column's); the first pane whose value
        does not fit it is refused: :func:`sinks.pane_log.value_out_of_range`."""
        bounds = integer_range(type_) or (_INT64_MIN, _INT64_MAX)
        low = pairs[:, 0]
        fits = wide.fits_int64(pairs) & (low >= bounds[0]) & (low <= bounds[1])
        if not fits.all():
            i = int(np.flatnonzero(~fits)[0])
            names = [f.name for f in self.c.key_fields]
            key = engine_keys([[keys.column(k)[i].as_py()] for k in names])[0]
            start, end = out["window_start_us"][i].as_py(), out["window_end_us"][i].as_py()
            value = wide.python_ints(pairs[i : i + 1])[0]
            keys_of = self.c.layout.keys_of(key)
            raise value_out_of_range(keys_of, start, end, name, value, type_)
        return pa.array(low, pa.int64())

    def _accumulator_json(self, accs: list[list[Any]], n: int) -> pa.Array:
        if not self.c.layout.accumulators:
            return pa.nulls(n, pa.string())
        per_part = []
        for a, columns in zip(self.c.accs, accs, strict=True):
            lists = [_python(a, i, col) for i, col in enumerate(columns)]
            per_part.append(list(zip(*lists, strict=True)) if a.kind == "mean" else lists[0])
        if self.c.lifting.single:
            values: list[Any] = per_part[0]
        else:
            values = list(zip(*per_part, strict=True))
        return pa.array([json.dumps(v, separators=(",", ":")) for v in values], pa.string())


def _extract(acc: _Acc, columns: list[Any]) -> Any:
    """A part's output value: the accumulator (a sum's as int64 pairs), a mean's quotient
    (exactly Python's)."""
    if acc.kind != "mean":
        return columns[0]
    pairs = columns[0]
    sums = pairs[:, 0]
    counts = columns[1].to_numpy(zero_copy_only=False)
    exact = wide.fits_int64(pairs) & (np.abs(sums) < 2**53)
    quotient = np.divide(
        sums.astype(np.float64), counts, where=counts != 0, out=np.zeros(len(sums))
    )
    values = pa.array(quotient, pa.float64(), mask=counts == 0)
    if exact.all():
        return values
    fixed = values.to_pylist()
    big = wide.python_ints(pairs)
    for i in np.flatnonzero(~exact):
        fixed[i] = big[i] / int(counts[i]) if counts[i] else None
    return pa.array(fixed, pa.float64())


def _put(column: pa.Array, rows: np.ndarray, values: pa.Array) -> pa.Array:
    """``column`` with ``values`` at ``rows``."""
    if len(rows) == 0:
        return column
    positions = np.full(len(column), -1, np.int64)
    positions[rows] = np.arange(len(rows))
    taken = values.take(pa.array(np.maximum(positions, 0), pa.int64()))
    mask = pa.array(positions >= 0)
    return pc.if_else(mask, taken, column)


__all__ = ["Columnar", "Visit", "Windows"]
