"""Scenarios on the pure engine: :class:`panes.Simulator`, one call per step.

``bundle`` is ``add_elements``, ``watermark`` is ``advance_watermark``, ``processing_time`` is
``advance_processing_time``; every step's panes and dropped elements are written as the
scenario format writes them (:mod:`tests.scenarios.format`).
"""

from __future__ import annotations

from dataclasses import dataclass

from panes import (
    GLOBAL_WINDOW,
    AccumulationMode,
    ClosingBehavior,
    Dropped,
    EngineKind,
    OnTimeBehavior,
    Pane,
    Simulator,
    TimestampCombiner,
    Window,
    Windowing,
    combiners,
    parse_duration,
    parse_trigger,
    parse_window,
)
from panes.combiners import CombineFn
from tests.scenarios.format import Scenario, Step, dropped_text, pane_text, window_text


def windowing(sc: Scenario) -> Windowing:
    """The scenario's windowing, parsed from its text forms."""
    return Windowing(
        parse_window(sc.window),
        trigger=parse_trigger(sc.trigger),
        accumulation_mode=AccumulationMode[sc.accumulation],
        allowed_lateness=parse_duration(sc.allowed_lateness),
        timestamp_combiner=TimestampCombiner[sc.timestamp_combiner],
        on_time_behavior=OnTimeBehavior[sc.on_time_behavior],
        closing_behavior=ClosingBehavior[sc.closing_behavior],
    )


# The aggregates a scenario's ``combiner`` may name, over the element values themselves.
COMBINERS = {"to_list()": combiners.to_list, "sum()": combiners.sum}


def combine_fn(sc: Scenario) -> CombineFn:
    return COMBINERS[sc.combiner]()


def _window(window: Window) -> tuple[int, int] | None:
    return None if window == GLOBAL_WINDOW else (window.start, window.end)


def describe(pane: Pane) -> str:
    """``pane`` in the scenario format; it has no field for ``is_first``, which must be
    ``index == 0`` (checked here)."""
    info = pane.pane
    assert info.is_first == (info.index == 0), f"is_first is not index == 0 in {pane}"
    is_global = pane.window == GLOBAL_WINDOW
    return pane_text(
        str(pane.key),
        _window(pane.window),
        pane.value,
        None if is_global and pane.timestamp == GLOBAL_WINDOW.max_timestamp else pane.timestamp,
        info.timing.name,
        info.index,
        info.nonspeculative_index,
        is_last=info.is_last,
        is_retraction=pane.is_retraction,
        supersedes=[(w.start, w.end) for w in pane.supersedes or ()],
    )


def describe_dropped(dropped: Dropped) -> str:
    window = None if dropped.window is None else window_text(_window(dropped.window))
    return dropped_text(str(dropped.key), dropped.value, dropped.timestamp, dropped.reason, window)


@dataclass(frozen=True)
class Observed:
    """What one step emitted, in the scenario format, in the order the simulator emitted it."""

    panes: tuple[str, ...]
    dropped: tuple[str, ...]


def apply(sim: Simulator, step: Step) -> list[Pane]:
    """Do ``step``'s action on ``sim``; the panes it fired."""
    if step.action == "bundle":
        return sim.add_elements(step.elements)
    if step.action == "watermark":
        return sim.advance_watermark(step.time)
    return sim.advance_processing_time(step.time)


def run(
    sc: Scenario, engine: EngineKind = EngineKind.PER_ELEMENT
) -> tuple[list[Observed], Simulator]:
    """Every step of ``sc`` on a fresh simulator of ``engine``: what each emitted, and the
    simulator."""
    sim = Simulator(windowing(sc), combine_fn(sc), engine=engine)
    observed = []
    for step in sc.steps:
        before = len(sim.dropped)
        panes = apply(sim, step)
        observed.append(
            Observed(
                tuple(describe(p) for p in panes),
                tuple(describe_dropped(d) for d in sim.dropped[before:]),
            )
        )
    return observed, sim
