"""A deterministic reference runner: the engine over many keys, driven step by step.

The simulator is the contract that tests (ours and outside conformance suites) drive::

    sim = Simulator(windowing, combiners.sum())
    sim.add_elements([("k", value, timestamp_us), ...])  # one bundle -> panes it fired
    sim.advance_watermark(t_us)                          # -> panes fired by event time
    sim.advance_processing_time(t_us)                    # -> panes fired by processing time
    sim.dropped                                          # every element dropped, with reasons

It starts with the watermark at the beginning of time and processing time 0. Every call returns
the panes it fired, in order; ``sim.panes`` and ``sim.dropped`` accumulate everything so far.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from panes.combiners import CombineFn
from panes.engine import Engine, Output
from panes.pane import Dropped, Pane
from panes.state import KeyState
from panes.time import BEGINNING_OF_TIME, Duration, to_micros
from panes.windowing import Windowing


class Simulator:
    """Runs one :class:`~panes.engine.Engine` over any number of keys."""

    def __init__(self, windowing: Windowing, combine_fn: CombineFn, weighted: bool = False) -> None:
        self.engine = Engine(windowing, combine_fn, weighted)
        self.states: dict[Any, KeyState] = {}
        self.watermark = BEGINNING_OF_TIME
        self.processing_time = 0
        self.panes: list[Pane] = []
        self.dropped: list[Dropped] = []

    def add_elements(self, elements: Iterable[tuple[Any, Any, int]]) -> list[Pane]:
        """Add one bundle of ``(key, value, timestamp)`` elements; triggers are evaluated once
        per window after the whole bundle is added."""
        by_key: dict[Any, list[tuple[Any, Any, int]]] = {}
        for element in elements:
            key, _, timestamp = element
            if type(timestamp) is not int:
                raise TypeError(
                    f"timestamps are int microseconds, got {timestamp!r} for key {key!r}"
                )
            bundle = by_key.get(key)
            if bundle is None:
                by_key[key] = [element]
            else:
                bundle.append(element)
        fired: list[Pane] = []
        for key, bundle in by_key.items():
            state = self.states.get(key)
            if state is None:
                state = self.states[key] = KeyState(self.watermark, self.processing_time)
            self._collect(key, self.engine.add_elements(state, key, bundle), fired)
        return fired

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
        out = self.engine.advance_all(self.states, self.watermark, self.processing_time)
        for key in [key for key, state in self.states.items() if state.is_empty]:
            del self.states[key]
        self.panes.extend(out.panes)
        self.dropped.extend(out.dropped)
        return out.panes

    def _collect(self, key: Any, out: Output, fired: list[Pane]) -> None:
        fired.extend(out.panes)
        self.panes.extend(out.panes)
        self.dropped.extend(out.dropped)
        if self.states[key].is_empty:
            del self.states[key]
