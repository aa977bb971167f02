"""A deterministic reference runner: the engine over many keys, driven step by step.

The simulator is the contract that tests (ours and outside conformance suites) drive::

    sim = Simulator(windowing, combiners.sum())
    sim.add_elements([("k", value, timestamp_us), ...])  # one bundle -> panes it fired
    sim.advance_watermark(t_us)                          # -> panes fired by event time
    sim.advance_processing_time(t_us)                    # -> panes fired by processing time
    sim.dropped                                          # every element dropped, with reasons

It starts with the watermark at the beginning of time and processing time 0. Every call returns
the panes it fired, in order; ``sim.panes`` and ``sim.dropped`` accumulate everything so far.

``engine`` chooses who keeps the windows (:func:`panes.engines.runner`, the model's one factory
of engines): ``EngineKind.PER_ELEMENT`` (the default, :class:`~panes.engine.Engine`, every
configuration) or ``EngineKind.COLUMNAR`` (:class:`panes.columnar.ColumnarEngine`, all keys'
windows as one table; :class:`panes.columnar.NotColumnar` says why where it does not apply). Both
give the same panes and drops, in the same order.

>>> from panes import FixedWindows, Windowing, combiners
>>> sim = Simulator(Windowing(FixedWindows(10)), combiners.sum(), engine=EngineKind.COLUMNAR)
>>> sim.add_elements([("k", 3, 1), ("k", 4, 2)]), [p.value for p in sim.advance_watermark(10)]
([], [7])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from panes.combiners import CombineFn
from panes.engines import EngineKind, runner
from panes.pane import Dropped, Pane
from panes.state import KeyState
from panes.time import BEGINNING_OF_TIME, Duration, to_micros
from panes.windowing import Windowing


class Simulator:
    """Runs one engine over any number of keys (the module doc)."""

    def __init__(
        self,
        windowing: Windowing,
        combine_fn: CombineFn,
        weighted: bool = False,
        engine: EngineKind = EngineKind.PER_ELEMENT,
    ) -> None:
        self.windowing = windowing
        self.combine_fn = combine_fn
        self._runner = runner(windowing, combine_fn, weighted, engine)
        self.watermark = BEGINNING_OF_TIME
        self.processing_time = 0
        self.panes: list[Pane] = []
        self.dropped: list[Dropped] = []

    @property
    def states(self) -> dict[Any, KeyState]:
        """Each key's state (the columnar engine's windows as the per-key engine's states)."""
        return self._runner.states

    def add_elements(self, elements: Iterable[tuple[Any, Any, int]]) -> list[Pane]:
        """Add one bundle of ``(key, value, timestamp)`` elements; triggers are evaluated once
        per window after the whole bundle is added."""
        given = []
        for element in elements:
            given.append(element)
            key, _, timestamp = element
            if type(timestamp) is not int:
                raise TypeError(
                    f"timestamps are int microseconds, got {timestamp!r} for key {key!r}"
                )
        return self._record(self._runner.add(given, self.watermark, self.processing_time))

    def advance_watermark(self, watermark: Duration) -> list[Pane]:
        """Move the watermark forward to ``watermark``; firing what event time makes due."""
        return self.advance(watermark=watermark)

    def advance_processing_time(self, processing_time: Duration) -> list[Pane]:
        """Move processing time forward; firing what processing time makes due."""
        return self.advance(processing_time=processing_time)

    def advance(
        self, watermark: Duration | None = None, processing_time: Duration | None = None
    ) -> list[Pane]:
        """Move both clocks at once (what one Spark micro-batch does before its rows): every
        window that became due is evaluated once, at the new watermark and processing time."""
        if watermark is not None:
            watermark = to_micros(watermark, "watermark")
            if watermark < self.watermark:
                raise ValueError(
                    f"the watermark cannot move back from {self.watermark} to {watermark}"
                )
            self.watermark = watermark
        if processing_time is not None:
            processing_time = to_micros(processing_time, "processing time")
            if processing_time < self.processing_time:
                raise ValueError(
                    f"processing time cannot move back from "
                    f"{self.processing_time} to {processing_time}"
                )
            self.processing_time = processing_time
        return self._advance()

    def _advance(self) -> list[Pane]:
        return self._record(self._runner.advance(self.watermark, self.processing_time))

    def _record(self, fired: tuple[list[Pane], list[Dropped]]) -> list[Pane]:
        panes, dropped = fired
        self.panes.extend(panes)
        self.dropped.extend(dropped)
        return panes
