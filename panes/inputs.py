"""Several inputs of one pipeline: which input an element came from, and one watermark from many.

A pipeline may read several inputs (impressions and clicks, orders and payments) whose elements
meet by key in the same windows, triggers and panes (Beam's ``CoGroupByKey``, Photon's join).
What the model says of them is stated here, once, for the simulator and the Spark job alike:

* **An element knows its input.** An element of input ``clicks`` is a record (a mapping of
  column values) that carries the input's name in the column :data:`INPUT_COLUMN` (``input``),
  so that every filter reads it: ``count() filter (input = 'clicks')``. :meth:`Inputs.tag` adds
  it; a record that already holds another ``input`` is refused (nothing is silently relabeled).
* **One watermark from many** (:meth:`Inputs.watermark`). Each input has its own watermark (its
  own delay or policy); the pipeline's input watermark is the minimum of the inputs' (the
  Dataflow paper, MillWheel's low watermark, Flink's operator with several inputs): a window is
  complete only when every input says so.
* **Idleness** (Flink's ``withIdleness``). An input that has had no new data for
  ``idle_timeout`` of processing time (:meth:`Inputs.idle`) stops holding the watermark back:
  the minimum is taken over the inputs that are not idle. When every input is idle, nothing
  holds it back, and the pipeline's watermark is the largest of the inputs' (what Flink emits
  when all its channels go idle). An idle input that delivers data again holds the watermark
  back again from then on; its elements already behind the watermark are judged late as any
  element is (per element, against the pipeline's watermark). ``idle_timeout = None`` (the
  default): an input never goes idle, and a silent input holds the watermark forever, which is
  safe (nothing is judged late too early) but stalls the pipeline.
* **The watermark never moves back.** A watermark is a promise; an input coming back from
  idleness behind it does not withdraw it (:meth:`Inputs.watermark` takes the previous one).

With one input the pipeline's watermark is that input's, idle or not: a pipeline of one
``[source]`` is the one-input case of the same rules.

>>> S = 1_000_000
>>> inputs = Inputs(("impressions", "clicks"), idle_timeout=60 * S)
>>> clocks = {"impressions": InputClock(100 * S, 0), "clicks": InputClock(40 * S, 0)}
>>> inputs.watermark(clocks, processing_time=30 * S)  # the minimum: clicks hold it back
40000000
>>> inputs.idle(clocks["clicks"], 60 * S)
True
>>> inputs.watermark(clocks, processing_time=60 * S)  # clicks idle for 60 s: no longer
100000000
>>> inputs.tag({"ad": "a1"}, "clicks")
{'ad': 'a1', 'input': 'clicks'}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from panes.time import BEGINNING_OF_TIME, Duration, format_duration, to_micros

INPUT_COLUMN = "input"
"""The column naming an element's input (``count() filter (input = 'clicks')``)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class InputClock:
    """One input's clocks: its own ``watermark`` (µs; what the input says of its event times),
    and the processing time at which it last delivered data (``last_data``)."""

    watermark: int = BEGINNING_OF_TIME
    last_data: int = 0


@dataclass(frozen=True, init=False)
class Inputs:
    """A pipeline's inputs, by name, and how long an input may be silent before it stops
    holding the watermark back (``idle_timeout``, µs; None: never). The module doc states the
    rules."""

    names: tuple[str, ...]
    idle_timeout: int | None

    def __init__(self, names: Iterable[str], idle_timeout: Duration | None = None) -> None:
        """Check the names (identifiers, each once, at least one) and the timeout (positive)."""
        names = tuple(names)
        if not names:
            raise ValueError("a pipeline has at least one input")
        for name in names:
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ValueError(f"an input's name is an identifier (letters, digits, _): {name!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"an input is named twice in {list(names)}")
        timeout = None if idle_timeout is None else to_micros(idle_timeout, "idle_timeout")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"idle_timeout must be positive, got {format_duration(timeout)}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "idle_timeout", timeout)

    def __repr__(self) -> str:
        timeout = "" if self.idle_timeout is None else f", idle_timeout={self.idle_timeout}"
        return f"Inputs({self.names!r}{timeout})"

    def idle(self, clock: InputClock, processing_time: int) -> bool:
        """Whether an input whose clocks are ``clock`` is idle at ``processing_time``: it has
        delivered no data for ``idle_timeout`` (never, without a timeout)."""
        timeout = self.idle_timeout
        return timeout is not None and processing_time - clock.last_data >= timeout

    def watermark(
        self,
        clocks: Mapping[str, InputClock],
        processing_time: int,
        previous: int = BEGINNING_OF_TIME,
    ) -> int:
        """The pipeline's input watermark at ``processing_time``, from each input's ``clocks``
        (every input named once) and the ``previous`` one: the minimum of the watermarks of the
        inputs that are not idle; the largest of them all when every input is idle; never
        below ``previous``."""
        if set(clocks) != set(self.names):
            raise ValueError(f"the clocks of inputs {sorted(clocks)}, not of {list(self.names)}")
        holding = [c.watermark for c in clocks.values() if not self.idle(c, processing_time)]
        candidate = min(holding) if holding else max(c.watermark for c in clocks.values())
        return max(previous, candidate)

    def tag(self, record: Any, name: str) -> dict[str, Any]:
        """The element value of ``record`` (a mapping of column values) from input ``name``:
        the record with :data:`INPUT_COLUMN` set to the name. A record holding another input's
        name there, or a value that is not a record, is refused."""
        if name not in self.names:
            raise ValueError(f"no input {name!r}: the inputs are {list(self.names)}")
        if not isinstance(record, Mapping):
            raise TypeError(
                f"an element of input {name!r} is a record (a mapping of column values), "
                f"got {record!r}"
            )
        given = record.get(INPUT_COLUMN, name)
        if given != name:
            raise ValueError(
                f"a record of input {name!r} holds {INPUT_COLUMN} = {given!r}: the column "
                f"{INPUT_COLUMN!r} names the element's input"
            )
        return {**record, INPUT_COLUMN: name}


__all__ = ["INPUT_COLUMN", "InputClock", "Inputs"]
