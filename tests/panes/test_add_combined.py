"""``Engine.add_combined`` (combiner lifting's entry to the engine) against ``add_elements``:
on every conformance scenario whose windows do not merge and assign one window per element, a
simulator that hands the engine each bundle pre-combined per key and window emits exactly the
panes and drops exactly the elements the per-element simulator does, step by step, in order.
(The Arrow side of lifting is compared with the per-element path in
``tests/jobs/test_lifted_path.py`` and ``tests/panes/test_columnar.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from panes import FixedWindows, GlobalWindows, Simulator, TimestampCombiner
from panes.engine import Combined, Engine
from panes.state import KeyState
from tests.scenarios.format import load_all
from tests.scenarios.on_simulator import apply, combine_fn, describe, describe_dropped, windowing


class CombiningSimulator(Simulator):
    """A :class:`Simulator` whose bundles reach the engine as :class:`Combined` parts."""

    def add_elements(self, elements):
        by_key: dict[Any, list] = {}
        for element in elements:
            by_key.setdefault(element[0], []).append(element)
        fired: list = []
        engine = Engine(self.windowing, self.combine_fn)  # the same rules as the simulator's
        fn, window_fn = engine.combine_fn, engine.windowing.window_fn
        timestamps = engine.windowing.timestamp_combiner
        for key, bundle in by_key.items():
            state = self.states.get(key)
            if state is None:
                state = self.states[key] = KeyState(self.watermark, self.processing_time)
            windows: dict[Any, list] = {}
            for element in bundle:
                (window,) = window_fn.assign(element[-1], element[-2])
                windows.setdefault(window, []).append(element)
            parts = []
            for window, group in windows.items():
                times = [e[-1] for e in group if e[-1] >= state.watermark]
                pick = min if timestamps is TimestampCombiner.EARLIEST else max
                hold = (
                    pick(times)
                    if times and timestamps is not TimestampCombiner.END_OF_WINDOW
                    else None
                )
                acc = fn.add_all(fn.create(), [e[-2] for e in group])
                parts.append(Combined(window, acc, len(group), hold, lambda g=group: g))
            out = engine.add_combined(state, key, parts)
            fired.extend(out.panes)
            self.panes.extend(out.panes)
            self.dropped.extend(out.dropped)
            if state.is_empty:
                del self.states[key]
        return fired


SCENARIOS = {
    name: sc
    for name, sc in load_all().items()
    if isinstance(windowing(sc).window_fn, FixedWindows | GlobalWindows)
}


def observe(sim: Simulator, sc) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    out = []
    for step in sc.steps:
        before = len(sim.dropped)
        panes = apply(sim, step)
        out.append(
            (
                tuple(describe(p) for p in panes),
                tuple(describe_dropped(d) for d in sim.dropped[before:]),
            )
        )
    return out


def test_most_scenarios_are_compared():
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_pre_combined_bundles_emit_what_elements_do(name):
    sc = SCENARIOS[name]
    want = observe(Simulator(windowing(sc), combine_fn(sc)), sc)
    got = observe(CombiningSimulator(windowing(sc), combine_fn(sc)), sc)
    assert got == want
