"""What the engine emits: panes, with their pane info, and dropped elements."""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from panes.window import Window


class Timing(Enum):
    """When a pane fired relative to the watermark passing the end of its window."""

    EARLY = "EARLY"
    """Before the watermark passed the end of the window: a speculative result."""
    ON_TIME = "ON_TIME"
    """The first pane fired by the watermark passing the end of the window."""
    LATE = "LATE"
    """After the on-time pane, or after the end of the window without one."""


class PaneInfo(NamedTuple):
    """Where a pane stands in the sequence of panes of its window.

    ``index`` counts the window's emitted panes from 0; ``nonspeculative_index`` counts its
    ON_TIME and LATE panes from 0 and is -1 for EARLY panes. A window created by a merge starts
    counting again at 0.
    """

    # The field shadows tuple.index; the name is Beam's and part of the public API.
    index: int  # type: ignore[assignment]
    nonspeculative_index: int
    timing: Timing
    is_first: bool
    is_last: bool


class Pane(NamedTuple):
    """One emitted result of one window of one key: a row of the pane log.

    A *retraction* (``is_retraction``) withdraws a value emitted earlier: it carries that pane's
    window, value, accumulator, timestamp and pane info unchanged, so it is the exact negation of
    one earlier row. ``supersedes`` names the previously emitted windows this window absorbed by
    merging (in every accumulation mode): they no longer exist. ``accumulator`` is the
    combiner's mergeable state behind ``value`` (what a fold of discarding panes needs).
    ``watermark`` and ``processing_time`` are the engine's clocks at emission.
    """

    key: Any
    window: Window
    value: Any
    timestamp: int
    pane: PaneInfo
    is_retraction: bool
    supersedes: tuple[Window, ...]
    accumulator: Any
    watermark: int
    processing_time: int


class Dropped(NamedTuple):
    """An element the engine did not accept, and why. Nothing is dropped without one of these."""

    key: Any
    value: Any
    timestamp: int
    window: Window | None
    reason: str
    watermark: int
    processing_time: int


class DropReason:
    """The reasons an element is dropped (the start of :attr:`Dropped.reason`)."""

    EXPIRED = "expired"
    """The watermark passed the window's end plus the allowed lateness."""
    CLOSED = "closed"
    """The window's trigger had finished."""
    NO_WINDOW = "no window"
    """The window function assigned the element to no window."""
