"""Each input's clocks after each micro-batch, written once per batch in the run's directory.

A pipeline of several inputs has one watermark, the minimum of the inputs' with idleness
(:class:`panes.inputs.Inputs`), which Spark's ``withWatermark`` cannot express (docs/sources.md,
"Several inputs"). So the driver keeps the inputs' clocks itself: before the operator runs
batch N it settles, per input, the largest event time seen so far and the processing time of
the input's last data, from the state after batch N-1, the batch's largest event time per
input, and the batch's timestamp from Spark's offset log. The result is one small JSON file,
``input_clocks/N``, created once (:meth:`CheckpointFiles.create`): a batch replayed after a kill
reads back the file its first attempt wrote and so runs at exactly the same clocks, whatever
the replay's own wall clock or data order.

The pipeline's watermark before and after the batch is :meth:`panes.inputs.Inputs.watermark`
applied to those states (the rule is stated there once; nothing here re-implements it). An
input's own watermark is its largest event time less its delay (``[inputs.NAME.watermark]
delay``); an input that has delivered nothing yet holds :data:`BEGINNING_OF_TIME`.

Runs on the driver only; imports the model (panes) and the checkpoint files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from jobs.checkpoint.files import CheckpointFiles
from panes.inputs import InputClock, Inputs
from panes.time import BEGINNING_OF_TIME

FOLDER = "input_clocks"
"""The folder of the run's directory holding one file per batch."""


@dataclass(frozen=True)
class InputState:
    """One input's state after a batch: the largest event time it has delivered (µs; None:
    nothing yet) and the processing time of the batch that last brought it data (µs; 0:
    never)."""

    max_event_time: int | None = None
    last_data: int = 0

    def clock(self, delay: int) -> InputClock:
        """The input's clocks for :meth:`Inputs.watermark`: its own watermark (largest event
        time less ``delay``, µs) and when it last delivered data."""
        if self.max_event_time is None:
            return InputClock(BEGINNING_OF_TIME, self.last_data)
        return InputClock(self.max_event_time - delay, self.last_data)


@dataclass(frozen=True)
class BatchInputClocks:
    """What batch ``batch`` ran at: its processing time (µs, the offset log's timestamp), each
    input's state after it, and the pipeline's watermark before and after it (µs)."""

    batch: int
    processing_time: int
    states: Mapping[str, InputState]
    watermark_before: int
    watermark_after: int

    def to_json(self) -> str:
        """The file's text (one JSON object; keys sorted so that two writes compare equal)."""
        return json.dumps(
            {
                "batch": self.batch,
                "processing_time": self.processing_time,
                "watermark_before": self.watermark_before,
                "watermark_after": self.watermark_after,
                "inputs": {
                    name: {"max_event_time": s.max_event_time, "last_data": s.last_data}
                    for name, s in sorted(self.states.items())
                },
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> BatchInputClocks:
        """Read back :meth:`to_json`'s text."""
        data = json.loads(text)
        states = {
            name: InputState(s["max_event_time"], s["last_data"])
            for name, s in data["inputs"].items()
        }
        return cls(
            data["batch"],
            data["processing_time"],
            states,
            data["watermark_before"],
            data["watermark_after"],
        )


def advance(
    inputs: Inputs,
    delays: Mapping[str, int],
    previous: BatchInputClocks | None,
    batch: int,
    processing_time: int,
    batch_max_event_times: Mapping[str, int],
    control: int | None = None,
    noted: Mapping[str, int] | None = None,
    by_writers: frozenset[str] = frozenset(),
) -> BatchInputClocks:
    """The clocks of ``batch`` from those of the batch before (``previous``; None for the first
    batch of a lake): an input with elements in this batch (``batch_max_event_times``: the
    batch's largest event time per input, inputs without elements absent) raises its largest
    event time and has delivered data at ``processing_time``; a control row's time
    (``control``: the drain's, the end of time) raises every input's largest event time, and
    is no data; the pipeline's watermark before the batch is the previous batch's after, and
    after it is :meth:`Inputs.watermark` of the new states at ``processing_time``, never below
    the one before.

    An input whose watermark its writers note (``by_writers``: ``watermark.policy =
    "writer_noted"``) takes its largest event time from its writers' marks only (``noted``:
    the writers' watermark a control row of the batch carries, by input), never from its
    elements; its elements and its marks alike are its data (a writers' mark is what such an
    input says of its progress)."""
    unknown = sorted(set(batch_max_event_times) - set(inputs.names))
    if unknown:
        raise ValueError(f"event times of inputs {unknown}, not of {list(inputs.names)}")
    if set(delays) != set(inputs.names):
        raise ValueError(f"the delays of inputs {sorted(delays)}, not of {list(inputs.names)}")
    before = BEGINNING_OF_TIME if previous is None else previous.watermark_after
    states: dict[str, InputState] = {}
    for name in inputs.names:
        old = InputState() if previous is None else previous.states.get(name, InputState())
        seen = batch_max_event_times.get(name)
        state = old
        if name in by_writers:  # its marks, not its elements, say how far it has come
            mark = (noted or {}).get(name)
            top = old.max_event_time if mark is None else _larger(old.max_event_time, mark)
            if seen is not None or mark is not None:
                state = InputState(top, processing_time)
        elif seen is not None:
            state = InputState(_larger(old.max_event_time, seen), processing_time)
        if control is not None:
            state = InputState(_larger(state.max_event_time, control), state.last_data)
        states[name] = state
    clocks = {name: states[name].clock(delays[name]) for name in inputs.names}
    after = inputs.watermark(clocks, processing_time, previous=before)
    return BatchInputClocks(batch, processing_time, states, before, after)


def _larger(known: int | None, seen: int) -> int:
    return seen if known is None else max(known, seen)


def spark_ms(clock_us: int) -> int:
    """A clock (µs) in Spark's milliseconds, divided towards zero as Spark's watermark rule does
    (:func:`jobs.executor.operator.watermark_after`)."""
    return clock_us // 1000 if clock_us >= 0 else -(-clock_us // 1000)


def watermark_ms(watermark_us: int) -> int:
    """A pipeline watermark (µs, a whole number of ms) as the operator's clocks hold it: ms, 0
    while there is none (Spark's convention: 0 maps back to the beginning of time)."""
    return max(0, watermark_us // 1000)


@dataclass(frozen=True)
class InputsAtBatch:
    """What batch ``batch`` of a pipeline of several inputs runs at, as the driver hands it to
    every operator task: the ``inputs`` (their names in lane order, the idle timeout), each
    one's watermark delay (µs, in lane order), the clocks after the batch before (``previous``)
    and the batch's processing time (µs, the offset log's timestamp); ``by_writers``: the
    inputs whose writers note their watermark (:func:`advance`). Picklable."""

    inputs: Inputs
    delays: tuple[int, ...]
    previous: BatchInputClocks | None
    batch: int
    processing_time: int
    by_writers: frozenset[str] = frozenset()

    @property
    def lanes(self) -> int:
        return len(self.inputs.names)

    @property
    def watermark_ms(self) -> int:
        """The pipeline's watermark the batch runs at (ms; 0: none yet)."""
        before = BEGINNING_OF_TIME if self.previous is None else self.previous.watermark_after
        return watermark_ms(before)

    def after(self, lane_clocks: Mapping[int, int]) -> BatchInputClocks:
        """The clocks after the batch whose largest clock per lane was ``lane_clocks`` (µs;
        lanes without a clock absent): lane i < :attr:`lanes` input i's elements', lane
        :attr:`lanes` the control rows' (the drain), lane :attr:`lanes` + 1 + i input i's
        writers' marks (:func:`jobs.executor.operator_input.noted_lane`); by :func:`advance`
        (each clock in whole ms, as Spark's rule takes them)."""
        names, n = self.inputs.names, self.lanes
        ms = {lane: spark_ms(clock) * 1000 for lane, clock in lane_clocks.items()}
        maxima = {names[lane]: us for lane, us in ms.items() if lane < n}
        noted = {names[lane - n - 1]: us for lane, us in ms.items() if lane > n}
        delays = dict(zip(names, self.delays, strict=True))
        return advance(
            self.inputs,
            delays,
            self.previous,
            self.batch,
            self.processing_time,
            maxima,
            ms.get(n),  # the control rows' lane (the drain)
            noted,
            self.by_writers,
        )


def settle(files: CheckpointFiles, clocks: BatchInputClocks) -> BatchInputClocks:
    """The clocks batch ``clocks.batch`` runs at: ``clocks`` written once to
    ``input_clocks/N``, or, when a first attempt of the batch already wrote that file (a
    replay after a kill), the clocks it holds, so that a replayed batch runs exactly as its
    first attempt did."""
    name = f"{FOLDER}/{clocks.batch}"
    if files.create(name, clocks.to_json()):
        return clocks
    return BatchInputClocks.from_json(files.read_text(name))


def latest_before(files: CheckpointFiles, batch: int) -> BatchInputClocks | None:
    """The clocks of the last batch before ``batch`` that has a file (None: none, a new lake
    or the first batch), the ``previous`` of :func:`advance`."""
    numbers = [int(n) for n in files.names(FOLDER) if n.isdigit() and int(n) < batch]
    if not numbers:
        return None
    return BatchInputClocks.from_json(files.read_text(f"{FOLDER}/{max(numbers)}"))


def watermark_after_ms(files: CheckpointFiles, batch: int | None) -> int | None:
    """The watermark of a pipeline of several inputs after its batch ``batch`` (the last
    committed one; None: none yet), in ms as the operator's clocks hold it (None: none)."""
    settled = None if batch is None else latest_before(files, batch + 1)
    return (None if settled is None else watermark_ms(settled.watermark_after)) or None


__all__ = [
    "FOLDER",
    "BatchInputClocks",
    "InputState",
    "InputsAtBatch",
    "advance",
    "latest_before",
    "settle",
    "spark_ms",
    "watermark_after_ms",
    "watermark_ms",
]
