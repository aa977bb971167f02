"""The pane policies of a windowing strategy (:class:`~panes.windowing.Windowing`): how the
panes of a window relate, their timestamps, and when empty ones are emitted. Apart from the
windowing so that its rules (:mod:`panes.rules`) read them without importing it."""

from __future__ import annotations

from enum import Enum


class AccumulationMode(Enum):
    """How the panes of one window relate to each other."""

    DISCARDING = "DISCARDING"
    """Each pane holds only the elements since the previous pane: panes add up."""
    ACCUMULATING = "ACCUMULATING"
    """Each pane holds every element so far: the latest pane is the result."""
    ACCUMULATING_AND_RETRACTING = "ACCUMULATING_AND_RETRACTING"
    """As accumulating, and each refinement first retracts the values it replaces."""


class TimestampCombiner(Enum):
    """The output timestamp of a pane, from the timestamps of its elements."""

    END_OF_WINDOW = "END_OF_WINDOW"
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"


class OnTimeBehavior(Enum):
    """Whether an ON_TIME pane is emitted when no element arrived since the previous pane."""

    FIRE_ALWAYS = "FIRE_ALWAYS"
    FIRE_IF_NON_EMPTY = "FIRE_IF_NON_EMPTY"


class ClosingBehavior(Enum):
    """Whether a window's final pane is emitted when no element arrived since the previous one.

    The final pane is the one fired when the trigger finishes, or when the window expires
    (watermark past its end plus the allowed lateness) with elements that never fired.
    """

    FIRE_IF_NON_EMPTY = "FIRE_IF_NON_EMPTY"
    FIRE_ALWAYS = "FIRE_ALWAYS"


__all__ = ["AccumulationMode", "ClosingBehavior", "OnTimeBehavior", "TimestampCombiner"]
