"""A deterministic reference runner: the engine over many keys, driven step by step.

The simulator is the contract that tests (ours and outside conformance suites) drive::

    sim = Simulator(windowing, combiners.sum())
    sim.add_elements([("k", value, timestamp_us), ...])  # one bundle -> panes it fired
    sim.advance_watermark(t_us)                          # -> panes fired by event time
    sim.advance_processing_time(t_us)                    # -> panes fired by processing time
    sim.dropped                                          # every element dropped, with reasons

It starts with the watermark at the beginning of time and processing time 0. Every call returns
the panes it fired, in order; ``sim.panes`` and ``sim.dropped`` accumulate everything so far.

``inputs`` (:class:`panes.inputs.Inputs`) drives several inputs that meet by key: each bundle and
each watermark advance names its input (``input="clicks"``), each element's value is a record
that the simulator tags with its input's name (column ``input``, what filters read), and the
watermark the windows see is the one :meth:`panes.inputs.Inputs.watermark` makes of the inputs'
(the minimum over the inputs not idle; ``sim.input_clocks`` holds each input's clocks)::

    sim = Simulator(windowing, fn, inputs=Inputs(("views", "clicks"), idle_timeout="1m"))
    sim.add_elements([("ad1", {"cost": 2}, t)], input="clicks")
    sim.advance_watermark(t_us, input="views")   # the pipeline's: min over the inputs
    sim.advance_processing_time(t_us)            # an input silent for 1m stops holding it

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
from panes.inputs import InputClock, Inputs
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
        inputs: Inputs | None = None,
    ) -> None:
        """``inputs``: several named inputs (the module doc); None: one, unnamed."""
        if inputs is not None and not isinstance(inputs, Inputs):
            raise TypeError(f"inputs must be an Inputs, got {inputs!r}")
        self.windowing = windowing
        self.combine_fn = combine_fn
        self.inputs = inputs
        self._runner = runner(windowing, combine_fn, weighted, engine)
        self.watermark = BEGINNING_OF_TIME
        self.processing_time = 0
        self.input_clocks: dict[str, InputClock] = {
            name: InputClock() for name in (inputs.names if inputs is not None else ())
        }
        self.panes: list[Pane] = []
        self.dropped: list[Dropped] = []

    @property
    def states(self) -> dict[Any, KeyState]:
        """Each key's state (the columnar engine's windows as the per-key engine's states)."""
        return self._runner.states

    def add_elements(
        self, elements: Iterable[tuple[Any, Any, int]], input: str | None = None
    ) -> list[Pane]:
        """Add one bundle of ``(key, value, timestamp)`` elements; triggers are evaluated once
        per window after the whole bundle is added. With several inputs the bundle is of one
        ``input``: its values are records, tagged with its name, and it is that input's data
        (it is not idle from now)."""
        name = self._input(input)
        given = []
        for element in elements:
            key, value, timestamp = element
            if type(timestamp) is not int:
                raise TypeError(
                    f"timestamps are int microseconds, got {timestamp!r} for key {key!r}"
                )
            if self.inputs is not None:
                element = (key, self.inputs.tag(value, name), timestamp)
            given.append(element)
        if given and self.inputs is not None:
            clock = self.input_clocks[name]
            self.input_clocks[name] = InputClock(clock.watermark, self.processing_time)
        return self._record(self._runner.add(given, self.watermark, self.processing_time))

    def advance_watermark(self, watermark: Duration, input: str | None = None) -> list[Pane]:
        """Move the watermark forward to ``watermark``; firing what event time makes due. With
        several inputs, the watermark of ``input``: the pipeline's follows
        (:meth:`panes.inputs.Inputs.watermark`)."""
        return self.advance(watermark=watermark, input=input)

    def advance_processing_time(self, processing_time: Duration) -> list[Pane]:
        """Move processing time forward; firing what processing time makes due."""
        return self.advance(processing_time=processing_time)

    def advance(
        self,
        watermark: Duration | None = None,
        processing_time: Duration | None = None,
        input: str | None = None,
    ) -> list[Pane]:
        """Move both clocks at once (what one Spark micro-batch does before its rows): every
        window that became due is evaluated once, at the new watermark and processing time.
        With several inputs ``watermark`` is ``input``'s, and the pipeline's watermark is
        recomputed from the inputs' at the new processing time (an input may have gone idle)."""
        if watermark is not None:
            watermark = to_micros(watermark, "watermark")
            if self.inputs is None:
                _forward("the watermark", self.watermark, watermark)
                self.watermark = watermark
            else:
                name = self._input(input)
                clock = self.input_clocks[name]
                _forward(f"input {name!r}'s watermark", clock.watermark, watermark)
                self.input_clocks[name] = InputClock(watermark, clock.last_data)
        elif input is not None:
            raise ValueError("input names whose watermark moves: give the watermark")
        if processing_time is not None:
            processing_time = to_micros(processing_time, "processing time")
            _forward("processing time", self.processing_time, processing_time)
            self.processing_time = processing_time
        if self.inputs is not None:
            self.watermark = self.inputs.watermark(
                self.input_clocks, self.processing_time, self.watermark
            )
        return self._advance()

    def _input(self, input: str | None) -> str:
        """The input a call names: required with several inputs, refused without."""
        if self.inputs is None:
            if input is not None:
                raise ValueError(f"input {input!r} given to a simulator of one unnamed input")
            return ""
        if input is None:
            raise ValueError(f"name the input, one of {list(self.inputs.names)}")
        if input not in self.inputs.names:
            raise ValueError(f"no input {input!r}: the inputs are {list(self.inputs.names)}")
        return input

    def _advance(self) -> list[Pane]:
        return self._record(self._runner.advance(self.watermark, self.processing_time))

    def _record(self, fired: tuple[list[Pane], list[Dropped]]) -> list[Pane]:
        panes, dropped = fired
        self.panes.extend(panes)
        self.dropped.extend(dropped)
        return panes


def _forward(what: str, before: int, after: int) -> None:
    """Refuse a clock moving back."""
    if after < before:
        raise ValueError(f"{what} cannot move back from {before} to {after}")
