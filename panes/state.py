"""The state of one key: its live windows, and how it is stored as bytes.

Everything the engine knows about a key between two calls is here, and it is small: per window
an accumulator, a short trigger-state list, an output-timestamp hold, pane counters, and, for
merges and retractions, what the window has emitted. The bytes form holds only built-in values
(ints, tuples, strings and the combiner's accumulators), so it does not depend on the names of
this package's classes.
"""

from __future__ import annotations

import pickle
from typing import Any

from panes.pane import Pane, PaneInfo, Timing
from panes.time import BEGINNING_OF_TIME
from panes.window import Window

FORMAT_VERSION = 2
"""2 added each window's weight (1 had none: it is read as 0, as only engines without
weighted input wrote it)."""


class WindowState:
    """The engine's state of one window of one key.

    Invariants: ``fresh`` counts the elements added since the window last fired (0 means a
    firing now would be *empty*); ``superseded`` lists emitted windows merged into this one and
    not yet named by an emitted pane; ``retractions`` (accumulating & retracting only) holds
    their last panes, and ``last`` this window's own last pane. A ``closed`` window (its trigger
    finished) keeps nothing else: it only remembers to drop later elements until it expires.
    ``weight`` (engines with weighted input only; 0 otherwise) is the window's net weight: its
    +1 elements minus its -1 elements, merged windows' weights included.
    """

    __slots__ = (
        "acc",
        "closed",
        "emitted",
        "event_due",
        "fresh",
        "hold",
        "index",
        "last",
        "nonspeculative",
        "processing_due",
        "retractions",
        "superseded",
        "trigger",
        "weight",
    )

    def __init__(self, acc: Any, trigger: list) -> None:
        self.acc = acc
        self.trigger = trigger
        self.hold: int | None = None
        self.fresh = 0
        self.weight = 0
        self.index = 0
        self.nonspeculative = 0
        self.emitted = False
        self.last: Pane | None = None
        self.superseded: list[Window] = []
        self.retractions: list[Pane] = []
        self.closed = False
        # Cached wake-ups: the next watermark / processing time at which this window needs
        # attention (derived from the fields above, never serialized).
        self.event_due: int | None = None
        self.processing_due: int | None = None

    def close(self) -> None:
        self.closed = True
        self.acc = self.hold = self.last = None
        # A closed window's trigger state is dropped: the engine never reads it again, so the
        # field keeps its open-window type rather than making every hot-path read check None.
        self.trigger = None  # type: ignore[assignment]
        self.superseded, self.retractions = [], []
        self.fresh = 0


class KeyState:
    """All windows of one key, and the watermark and processing time the key has seen.

    ``next_event_time`` and ``next_processing_time`` are lower bounds of the times at which
    some window of the key needs attention (``None``: never).
    """

    __slots__ = (
        "next_event_time",
        "next_processing_time",
        "processing_time",
        "watermark",
        "windows",
    )

    def __init__(self, watermark: int = BEGINNING_OF_TIME, processing_time: int = 0) -> None:
        self.windows: dict[Window, WindowState] = {}
        self.watermark = watermark
        self.processing_time = processing_time
        self.next_event_time: int | None = None
        self.next_processing_time: int | None = None

    @property
    def is_empty(self) -> bool:
        """No live window: the key's state can be deleted."""
        return not self.windows

    def to_bytes(self) -> bytes:
        windows = [
            (
                w.start,
                w.end,
                ws.closed,
                ws.acc,
                ws.trigger,
                ws.hold,
                ws.fresh,
                ws.index,
                ws.nonspeculative,
                ws.emitted,
                _pane_out(ws.last),
                tuple((s.start, s.end) for s in ws.superseded),
                tuple(_pane_out(p) for p in ws.retractions),
                ws.event_due,
                ws.processing_due,
                ws.weight,
            )
            for w, ws in self.windows.items()
        ]
        return pickle.dumps(
            (FORMAT_VERSION, self.watermark, self.processing_time, windows), protocol=5
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyState:
        version, watermark, processing_time, windows = pickle.loads(data)
        if version not in (1, FORMAT_VERSION):
            raise ValueError(
                f"key state format {version} is not supported (expected {FORMAT_VERSION})"
            )
        state = cls(watermark, processing_time)
        live = state.windows
        next_event = next_processing = None
        new_window_state = WindowState.__new__
        for w in windows:
            (
                start,
                end,
                closed,
                acc,
                trigger,
                hold,
                fresh,
                index,
                nonspeculative,
                emitted,
                last,
                superseded,
                retractions,
                event_due,
                processing_due,
                *rest,
            ) = w
            weight = rest[0] if rest else 0  # format 1 had no weight
            # every slot set once (a hot path: a key's windows are loaded at each visit)
            ws = new_window_state(WindowState)
            ws.acc, ws.trigger, ws.closed, ws.hold, ws.fresh = acc, trigger, closed, hold, fresh
            ws.index, ws.nonspeculative, ws.emitted = index, nonspeculative, emitted
            ws.last = None if last is None else _pane_in(last)
            ws.superseded = [Window(s, e) for s, e in superseded] if superseded else []
            ws.retractions = [_pane_in(p) for p in retractions] if retractions else []
            ws.event_due, ws.processing_due = event_due, processing_due
            ws.weight = weight
            live[Window(start, end)] = ws
            if event_due is not None and (next_event is None or event_due < next_event):
                next_event = event_due
            if processing_due is not None and (
                next_processing is None or processing_due < next_processing
            ):
                next_processing = processing_due
        state.next_event_time, state.next_processing_time = next_event, next_processing
        return state

    def bound_wakeups(self) -> None:
        """Set the key's wake-ups to the earliest of its windows' wake-ups."""
        next_event = next_processing = None
        for ws in self.windows.values():
            e, p = ws.event_due, ws.processing_due
            if e is not None and (next_event is None or e < next_event):
                next_event = e
            if p is not None and (next_processing is None or p < next_processing):
                next_processing = p
        self.next_event_time, self.next_processing_time = next_event, next_processing


def _pane_out(pane: Pane | None) -> tuple | None:
    if pane is None:
        return None
    info = pane.pane
    return (
        pane.key,
        pane.window.start,
        pane.window.end,
        pane.value,
        pane.timestamp,
        info.index,
        info.nonspeculative_index,
        info.timing.value,
        info.is_first,
        info.is_last,
        pane.is_retraction,
        tuple((w.start, w.end) for w in pane.supersedes),
        pane.accumulator,
        pane.watermark,
        pane.processing_time,
    )


def _pane_in(data: tuple) -> Pane:
    (
        key,
        start,
        end,
        value,
        timestamp,
        index,
        nonspeculative,
        timing,
        is_first,
        is_last,
        is_retraction,
        supersedes,
        accumulator,
        watermark,
        processing_time,
    ) = data
    return Pane(
        key,
        Window(start, end),
        value,
        timestamp,
        PaneInfo(index, nonspeculative, Timing(timing), is_first, is_last),
        is_retraction,
        tuple(Window(s, e) for s, e in supersedes),
        accumulator,
        watermark,
        processing_time,
    )
