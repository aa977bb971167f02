"""The per-key engine: turns bundles of elements, watermark and processing time into panes.

An :class:`Engine` is built once from a :class:`~panes.windowing.Windowing` and a combiner and
holds no per-key data; all of that is in the :class:`~panes.state.KeyState` it is handed. Its
three operations change the state and report what happened as an :class:`Output`:

* :meth:`Engine.add_elements` adds one bundle. Elements are assigned to windows; elements of
  expired windows (watermark past the window's end plus the allowed lateness, judged on the
  element's own window before any merge) or of closed windows are dropped *and reported*;
  merging windows merge; then each window that received elements is evaluated once.
* :meth:`Engine.advance` moves the watermark, then processing time, forward, evaluating every
  window whose trigger waits for that time, and expiring windows past their allowed lateness
  (with a closing pane for elements that never fired, per the closing behavior).

Panes, as changes to the set of results: a firing emits the window's value (in discarding mode
the value of the elements since the previous firing). In accumulating & retracting mode it
first retracts this window's previous pane and the last panes of the windows merged into it.
In every mode a pane names the emitted windows it supersedes.

With weighted input (``Engine(..., weighted=True)``) an element whose value is a
:class:`~panes.weights.Retracted` weighs -1 and withdraws its value from its windows; a window
whose weight drops to zero fires only the retractions of what it emitted (it leaves the view).
The rules: docs/semantics.md, "Weighted input".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, cast

from panes.combiners import CombineFn, inputs_of
from panes.pane import Dropped, DropReason, Pane, PaneInfo, Timing
from panes.state import KeyState, WindowState
from panes.time import BEGINNING_OF_TIME
from panes.triggers import ROOT, TriggerContext, merge_states
from panes.weights import check_weighted, split_elements_by_weight
from panes.window import Window
from panes.windowfns import Element
from panes.windowing import AccumulationMode, TimestampCombiner, Windowing

EARLY = Timing.EARLY

CLOSED_REASON = f"{DropReason.CLOSED}: the window's trigger had finished"
"""The late-table reason of an element of a window whose trigger had finished."""
_MERGES_WITH_CLOSED = (
    f"{DropReason.CLOSED}: the window merges with a window whose trigger had finished"
)
# The window of a TriggerContext made before a loop that points it at each window in turn.
_UNPOINTED = cast(Window, None)
_NO_WINDOW = f"{DropReason.NO_WINDOW}: the window function assigned no window"


class Output:
    """What one engine operation did: panes fired, elements dropped, and when the key next
    needs a wake-up (``None``: only new elements can make it fire)."""

    __slots__ = ("dropped", "next_event_time", "next_processing_time", "panes")

    def __init__(self) -> None:
        self.panes: list[Pane] = []
        self.dropped: list[Dropped] = []
        self.next_event_time: int | None = None
        self.next_processing_time: int | None = None

    def __repr__(self) -> str:
        return (
            f"Output(panes={len(self.panes)}, dropped={len(self.dropped)}, "
            f"next_event_time={self.next_event_time}, "
            f"next_processing_time={self.next_processing_time})"
        )


class Combined(NamedTuple):
    """One window's share of a bundle, combined before it reaches the engine
    (:meth:`Engine.add_combined`): the accumulator of its elements' values
    (``combine_fn.add_all(create(), inputs_of(combine_fn, elements))``: with their event times
    for a combiner that reads them), how many there were (``n``), the earliest
    (or, with the ``LATEST`` timestamp combiner, latest) of their timestamps not behind the
    watermark (None: none, or the ``END_OF_WINDOW`` combiner), and a callable giving the
    elements themselves, called only when the window drops them."""

    window: Window
    acc: Any
    n: int
    hold: int | None
    elements: Callable[[], list[Element]]


class Engine:
    """The Dataflow model for one key at a time.

    >>> from panes import FixedWindows, AfterWatermark, AfterCount, Windowing, combiners
    >>> engine = Engine(Windowing(FixedWindows(10), trigger=AfterWatermark()), combiners.sum())
    >>> state = engine.new_state()
    >>> engine.add_elements(state, "k", [(1, 3), (2, 4)]).panes
    []
    >>> [(p.window, p.value, p.pane.timing.name) for p in engine.advance(state, "k", 10, 0).panes]
    [([0, 10), 3, 'ON_TIME')]
    """

    def __init__(self, windowing: Windowing, combine_fn: CombineFn, weighted: bool = False) -> None:
        """``weighted``: elements may be :class:`~panes.weights.Retracted` (weight -1); the
        configuration must be able to withdraw values (:func:`~panes.weights.check_weighted`)."""
        if not isinstance(combine_fn, CombineFn):
            raise TypeError(f"combine_fn must be a CombineFn, got {combine_fn!r}")
        if weighted:
            check_weighted(windowing, combine_fn)
        self.weighted = weighted
        self.windowing = windowing
        self.combine_fn = combine_fn
        self._window_fn = windowing.window_fn
        self._trigger = windowing.trigger
        self.rules = windowing.rules
        self._retracting = (
            windowing.accumulation_mode is AccumulationMode.ACCUMULATING_AND_RETRACTING
        )
        self._timestamps = windowing.timestamp_combiner
        self._event_wakeups = self._trigger.has_event_time
        self._processing_wakeups = self._trigger.has_processing_time
        self._too_late_reason = self.rules.too_late_reason

    # -- public operations -----------------------------------------------------------------

    def new_state(self) -> KeyState:
        """The state of a key that has seen nothing yet."""
        return KeyState()

    def load_state(self, data: bytes) -> KeyState:
        """A key's state from :meth:`KeyState.to_bytes`."""
        return KeyState.from_bytes(data)

    def add_elements(self, state: KeyState, key: Any, elements: Iterable[Element]) -> Output:
        """Add one bundle of elements at the state's current clocks.

        An element is a tuple ending with ``(value, timestamp)``: ``(value, timestamp)`` pairs,
        or ``(key, value, timestamp)`` rows as they come.
        """
        out = Output()
        self._add(state, key, elements, out)
        return self._done(state, out)

    def advance(
        self, state: KeyState, key: Any, watermark: int, processing_time: int | None = None
    ) -> Output:
        """Move the key's clocks forward to ``watermark`` and ``processing_time`` (never back;
        a smaller value is ignored) and fire what became due: windows whose trigger waits for
        the watermark (in order of that time), then windows waiting for processing time. Every
        window is evaluated at most once, at the new clocks; windows past their horizon
        expire."""
        out = Output()
        self._advance(state, key, watermark, processing_time, out)
        return self._done(state, out)

    def advance_all(
        self, states: Mapping[Any, KeyState], watermark: int, processing_time: int | None = None
    ) -> Output:
        """:meth:`advance` every key of ``states`` (by key) into one :class:`Output`, whose
        wake-ups are left unset."""
        out = Output()
        for key, state in states.items():
            event, processing = state.next_event_time, state.next_processing_time
            if (event is None or event > watermark) and (
                processing is None or processing_time is None or processing > processing_time
            ):  # nothing due: just move the clocks
                if watermark > state.watermark:
                    state.watermark = watermark
                if processing_time is not None and processing_time > state.processing_time:
                    state.processing_time = processing_time
                continue
            self._advance(state, key, watermark, processing_time, out)
        return out

    # -- adding elements -------------------------------------------------------------------

    def _add(self, state: KeyState, key: Any, elements: Iterable[Element], out: Output) -> None:
        wm, pt = state.watermark, state.processing_time
        bundle = self._window_fn.assign_bundle(elements)
        if None in bundle:
            self._drop(out, key, bundle.pop(None), None, _NO_WINDOW, wm, pt)
        groups = cast(dict[Window, list[Element]], bundle)  # its None key was popped above
        merging = self._window_fn.is_merging
        if merging and groups:
            # Lateness is judged on the element's own window, before it merges.
            too_late = self.rules.too_late
            for window in [w for w in groups if too_late(w.end, wm)]:
                self._drop(out, key, groups.pop(window), window, self._too_late_reason, wm, pt)
            groups = self._merge(state, key, groups, out)

        ctx = TriggerContext(_UNPOINTED, wm, pt)  # one context, re-pointed at each window
        # Not merging: an element's window is the window it is added to; it is droppable when
        # end < cutoff (WindowRules.too_late). Merging: judged above.
        cutoff = BEGINNING_OF_TIME if merging else self.rules.late_before(wm)
        for window, group in groups.items():
            ws = self._open_window(state, key, window, group, cutoff, out)
            if ws is None:
                continue
            if self.weighted:
                self._add_weighted(ws, group)
            else:
                ws.acc = self.combine_fn.add_all(ws.acc, inputs_of(self.combine_fn, group))
            if self._timestamps is TimestampCombiner.END_OF_WINDOW:
                hold = None
            else:
                holds = self.rules.holds
                hold = self._hold_of([e[-1] for e in group if holds(e[-1], wm)])
            self._added(state, key, window, ws, len(group), hold, ctx, out)

    def add_combined(self, state: KeyState, key: Any, parts: Iterable[Combined]) -> Output:
        """Add one bundle given as its windows' pre-combined parts (combiner lifting): the same
        as :meth:`add_elements` of the elements the parts were combined from, for a window
        function that assigns each element one window and does not merge, a combiner whose
        :meth:`~panes.combiners.CombineFn.merge` of a part equals adding its values, and
        input without weights. Parts come in the order of their windows' first elements; a
        part whose window drops its elements hands them over (``elements``) to be reported.

        >>> from panes import FixedWindows, AfterWatermark, AfterCount, Windowing, combiners
        >>> engine = Engine(Windowing(FixedWindows(10), trigger=AfterCount(2)), combiners.sum())
        >>> state = engine.new_state()
        >>> part = Combined(Window(0, 10), acc=5, n=2, hold=None, elements=lambda: [])
        >>> [(p.window, p.value) for p in engine.add_combined(state, "k", [part]).panes]
        [([0, 10), 5)]
        """
        if self.weighted or self._window_fn.is_merging:
            raise ValueError("pre-combined parts need unweighted input and non-merging windows")
        out = Output()
        wm, pt = state.watermark, state.processing_time
        ctx = TriggerContext(_UNPOINTED, wm, pt)
        cutoff, merge, windows = self.rules.late_before(wm), self.combine_fn.merge, state.windows
        for part in parts:
            new = part.window not in windows
            ws = self._open_window(state, key, part.window, part.elements, cutoff, out)
            if ws is None:
                continue
            # a new window holds the part itself: what add_elements computes for it,
            # add_all(create(), values)
            ws.acc = part.acc if new else merge([ws.acc, part.acc])
            self._added(state, key, part.window, ws, part.n, part.hold, ctx, out)
        return self._done(state, out)

    def _open_window(
        self,
        state: KeyState,
        key: Any,
        window: Window,
        elements: Any,
        cutoff: int,
        out: Output,
    ) -> WindowState | None:
        """The state of ``window`` about to receive elements (made if new), or None when its
        elements are dropped (expired or closed window): ``elements``, a list or a callable
        giving it, is then reported."""
        wm, pt = state.watermark, state.processing_time
        if window.end < cutoff:
            reason = self._too_late_reason
        else:
            ws = state.windows.get(window)
            if ws is None:
                ws = state.windows[window] = WindowState(
                    self.combine_fn.create(), self._trigger.new_state()
                )
                return ws
            if not ws.closed:
                return ws
            reason = CLOSED_REASON
        self._drop(out, key, elements() if callable(elements) else elements, window, reason, wm, pt)
        return None

    def _hold_of(self, times: list[int]) -> int | None:
        """The earliest/latest of a window's new element times not behind the watermark."""
        return self.rules.hold_pick(times) if times else None

    def _added(
        self,
        state: KeyState,
        key: Any,
        window: Window,
        ws: WindowState,
        n: int,
        hold: int | None,
        ctx: TriggerContext,
        out: Output,
    ) -> None:
        """``n`` elements were added to ``window``'s accumulator: hold the output timestamp
        (at ``hold``, their earliest or latest time not behind the watermark; the end of the
        window with the ``END_OF_WINDOW`` combiner), run the trigger once, fire if it says so,
        and note the window's next wake-ups."""
        ws.fresh += n
        ws.hold = self.rules.hold_after(ws.hold, hold, window.end, state.watermark)
        trigger = self._trigger
        ctx.window = window
        trigger.on_elements(ws.trigger, ROOT, ctx, n)
        if trigger.should_fire(ws.trigger, ROOT, ctx):
            self._fire(key, window, ws, ctx, False, out)
        self._window_dues(window, ws, ctx)
        due = ws.event_due
        if due is not None and (state.next_event_time is None or due < state.next_event_time):
            state.next_event_time = due
        due = ws.processing_due
        if due is not None and (
            state.next_processing_time is None or due < state.next_processing_time
        ):
            state.next_processing_time = due

    def _add_weighted(self, ws: WindowState, elements: list[Element]) -> None:
        """Add the +1 elements' values, then withdraw the -1 ones, and count the window's
        weight."""
        added, withdrawn = split_elements_by_weight(elements)
        combine = self.combine_fn
        acc = combine.add_all(ws.acc, inputs_of(combine, added)) if added else ws.acc
        for value in inputs_of(combine, withdrawn):
            acc = combine.retract(acc, value)
        ws.acc = acc
        ws.weight += len(added) - len(withdrawn)

    # -- merging ---------------------------------------------------------------------------

    def _merge(
        self, state: KeyState, key: Any, groups: dict[Window, list[Element]], out: Output
    ) -> dict[Window, list[Element]]:
        """Merge the bundle's new windows with the key's open windows.

        Closed windows take no part: an element whose window would merge with a closed one is
        dropped (reported), so that a closed window's data is never reopened.
        """
        windows, window_fn = state.windows, self._window_fn
        open_windows = [w for w, ws in windows.items() if not ws.closed]
        closed = {w for w, ws in windows.items() if ws.closed}
        new = [w for w in groups if w not in windows]
        if closed and new:
            for members, _ in window_fn.merge([*closed, *open_windows, *new]):
                if closed.intersection(members):
                    for window in members:
                        if window in groups and window not in windows:
                            dropped = groups.pop(window)
                            self._drop(
                                out,
                                key,
                                dropped,
                                window,
                                _MERGES_WITH_CLOSED,
                                state.watermark,
                                state.processing_time,
                            )
            new = [w for w in new if w in groups]
        if not new:
            return groups
        for members, result in window_fn.merge([*open_windows, *new]):
            merged: list[Element] = []
            for window in members:
                merged.extend(groups.pop(window, ()))
            existing = [(w, windows.pop(w)) for w in members if w in windows]
            if existing:
                windows[result] = self._merged_state(state, result, existing)
            groups[result] = merged
        return groups

    def _merged_state(
        self, state: KeyState, result: Window, members: Sequence[tuple[Window, WindowState]]
    ) -> WindowState:
        """The state of ``result``, merged from its members' states (the spec's ``further`` of
        rewound triggers; accumulators, holds and lineage combined; pane counters restart
        unless ``result`` is itself one of the members)."""
        states = [ws for _, ws in members]
        trigger = merge_states(
            self._trigger, [ws.trigger for ws in states], rewind=state.watermark < result.end
        )
        ws = WindowState(self.combine_fn.merge([m.acc for m in states]), trigger)
        for window, member in members:
            ws.fresh += member.fresh
            ws.weight += member.weight
            ws.superseded += member.superseded
            ws.retractions += member.retractions
            if window == result:
                ws.index, ws.nonspeculative = member.index, member.nonspeculative
                ws.emitted, ws.last = member.emitted, member.last
            elif member.emitted:
                ws.superseded.append(window)
                if member.last is not None:
                    ws.retractions.append(member.last)
        ws.hold = self.rules.merged_hold([m.hold for m in states if m.hold is not None], result.end)
        return ws

    # -- advancing time --------------------------------------------------------------------

    def _advance(
        self, state: KeyState, key: Any, watermark: int, processing_time: int | None, out: Output
    ) -> None:
        old_watermark = state.watermark
        if processing_time is None:
            processing_time = state.processing_time
        event_due = (
            watermark > old_watermark
            and state.next_event_time is not None
            and (state.next_event_time <= watermark)
        )
        processing_due = processing_time > state.processing_time and (
            state.next_processing_time is not None and state.next_processing_time <= processing_time
        )
        state.watermark = max(watermark, old_watermark)
        state.processing_time = processing_time = max(processing_time, state.processing_time)
        watermark = state.watermark
        if not (event_due or processing_due):
            return
        trigger = self._trigger
        due: list[tuple[int, int, Window, WindowState, bool, bool]] = []
        before = TriggerContext(_UNPOINTED, old_watermark, processing_time)  # re-pointed per window
        for window, ws in state.windows.items():
            by_event = event_due and ws.event_due is not None and ws.event_due <= watermark
            by_processing = (
                processing_due
                and not ws.closed
                and (ws.processing_due is not None and ws.processing_due <= processing_time)
            )
            if not (by_event or by_processing):
                continue
            fires_by_watermark = False
            if by_event and not ws.closed:
                before.window = window
                wake = trigger.event_wakeup(ws.trigger, ROOT, before)
                fires_by_watermark = wake is not None and wake <= watermark
            # by_event implies ws.event_due is set, and otherwise by_processing implies
            # ws.processing_due is set.
            if by_event:
                at = cast(int, ws.event_due)
                due.append((0, at, window, ws, fires_by_watermark, by_processing))
            else:
                due.append((1, cast(int, ws.processing_due), window, ws, False, True))
        due.sort(key=lambda d: d[:3])
        ctx = TriggerContext(_UNPOINTED, watermark, processing_time)  # re-pointed per window
        for _, _, window, ws, by_watermark, by_processing in due:
            ctx.window = window
            gone = self.rules.gone(window, watermark)
            if (by_watermark or by_processing) and trigger.should_fire(ws.trigger, ROOT, ctx):
                self._fire(key, window, ws, ctx, by_watermark, out, gone=gone)
            if gone:
                if not ws.closed and self.rules.closes(ws.fresh > 0):
                    self._fire(key, window, ws, ctx, True, out, closing=True)
                del state.windows[window]
            else:
                self._window_dues(window, ws, ctx)
        state.bound_wakeups()

    # -- firing ----------------------------------------------------------------------------

    def _fire(
        self,
        key: Any,
        window: Window,
        ws: WindowState,
        ctx: TriggerContext,
        by_watermark: bool,
        out: Output,
        closing: bool = False,
        gone: bool = False,
    ) -> None:
        """Fire ``window``: move its trigger on (unless it is closing at expiry) and emit a pane
        if the rules say so (:class:`~panes.rules.WindowRules`); ``gone``: the window is let go
        right after this firing."""
        rules = self.rules
        if closing:
            finished = True
        else:
            self._trigger.on_fire(ws.trigger, ROOT, ctx)
            finished = self._trigger.is_done(ws.trigger, ROOT)
        wm, pt = ctx.watermark, ctx.processing_time
        past_end = wm >= window.end
        timing, nonspeculative = rules.timing(past_end, by_watermark, ws.nonspeculative)
        emit = rules.emits(ws.fresh > 0, timing, finished, closing)
        if emit and self.weighted and ws.weight <= 0:
            self._withdraw(ws, wm, pt, out)
        elif emit:
            last = rules.is_last(finished, gone, closing)
            self._emit(key, window, ws, timing, nonspeculative, last, wm, pt, out)
        if ws.hold is not None and not rules.keeps_hold(past_end):
            ws.hold = None
        ws.fresh = 0
        if finished:
            ws.close()
        elif rules.resets(finished):
            ws.acc = self.combine_fn.create()

    def _emit(
        self,
        key: Any,
        window: Window,
        ws: WindowState,
        timing: Timing,
        nonspeculative: int,
        finished: bool,
        wm: int,
        pt: int,
        out: Output,
    ) -> None:
        rules, index = self.rules, ws.index
        ws.index, ws.nonspeculative = rules.counters_after(
            index, ws.nonspeculative, timing is EARLY
        )
        info = PaneInfo(index, nonspeculative, timing, index == 0, finished)
        timestamp = rules.pane_timestamp(ws.hold is not None, ws.hold, window.end)
        if self._retracting:
            self._retract_emitted(ws, wm, pt, out)
        pane = Pane(
            key,
            window,
            self.combine_fn.extract(ws.acc),
            timestamp,
            info,
            False,
            tuple(ws.superseded) if ws.superseded else (),
            ws.acc,
            wm,
            pt,
        )
        out.panes.append(pane)
        if ws.superseded:
            ws.superseded = []
        ws.emitted = True
        if self._retracting:
            ws.last = pane

    @staticmethod
    def _retract_emitted(ws: WindowState, wm: int, pt: int, out: Output) -> None:
        """Emit retractions of the window's last pane and of the last panes of the windows
        merged into it."""
        withdrawn = ws.retractions if ws.last is None else [*ws.retractions, ws.last]
        for old in sorted(withdrawn, key=lambda p: p.window):
            out.panes.append(
                old._replace(is_retraction=True, supersedes=(), watermark=wm, processing_time=pt)
            )
        ws.retractions = []

    def _withdraw(self, ws: WindowState, wm: int, pt: int, out: Output) -> None:
        """Fire an empty window (weight <= 0, weighted input): retract what it and the windows
        merged into it emitted, and emit no value, so the window leaves the view. It stays
        open for later elements; nothing of it is emitted any more."""
        self._retract_emitted(ws, wm, pt, out)
        ws.last = None
        ws.superseded = []
        ws.emitted = False

    # -- bookkeeping -----------------------------------------------------------------------

    @staticmethod
    def _drop(
        out: Output,
        key: Any,
        elements: Iterable[Element],
        window: Window | None,
        reason: str,
        wm: int,
        pt: int,
    ) -> None:
        """Report ``elements`` as dropped; ``reason`` starts with a :class:`DropReason`."""
        out.dropped.extend(Dropped(key, e[-2], e[-1], window, reason, wm, pt) for e in elements)

    def _window_dues(self, window: Window, ws: WindowState, ctx: TriggerContext) -> None:
        """The next watermark (its trigger's wake-up, or its expiry) and processing time at
        which ``window`` needs attention, given the clocks in ``ctx``."""
        event = self.rules.window_expiry(window)
        processing = None
        if not ws.closed:
            trigger = self._trigger
            if self._event_wakeups:
                event = self.rules.due(event, trigger.event_wakeup(ws.trigger, ROOT, ctx))
            if self._processing_wakeups:
                processing = trigger.processing_wakeup(ws.trigger, ROOT, ctx)
        ws.event_due, ws.processing_due = event, processing

    def _done(self, state: KeyState, out: Output) -> Output:
        out.next_event_time = state.next_event_time
        out.next_processing_time = state.next_processing_time
        return out
