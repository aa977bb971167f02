"""Every scenario of ``tests/scenarios`` on :class:`panes.Simulator`, on both engines: each step
emits exactly the panes and drops exactly the elements the scenario lists.

The scenarios pin trigger and pane semantics (``triggers.toml``, ``merging.toml``), the Dataflow
paper's example (``paper.toml``) and the Beam conformance transcripts
(``beam_conformance.toml``, checked against Beam's output by ``tests/conformance``). The format:
``tests/scenarios/format.py``; the rules: ``docs/semantics.md``.

Both engines emit them in the scenario's order: the columnar engine (:mod:`panes.columnar`) runs
every scenario it serves, and on the others refuses, saying why, at construction.
"""

from __future__ import annotations

import pytest

from panes import EngineKind
from panes.columnar import NotColumnar
from tests.scenarios.format import load_all
from tests.scenarios.on_simulator import run

SCENARIOS = load_all()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name):
    sc = SCENARIOS[name]
    observed, _ = run(sc)
    for i, (step, got) in enumerate(zip(sc.steps, observed, strict=True)):
        where = f"{name}, step {i} {step.inputs()}"
        assert list(got.panes) == list(step.panes), f"{where}: panes"
        assert list(got.dropped) == list(step.dropped), f"{where}: dropped"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_on_the_columnar_engine(name):
    sc = SCENARIOS[name]
    try:
        observed, _ = run(sc, engine=EngineKind.COLUMNAR)
    except NotColumnar as refused:
        assert "does not apply: " in str(refused), "a refusal says why"
        return
    for i, (step, got) in enumerate(zip(sc.steps, observed, strict=True)):
        where = f"{name} on the columnar engine, step {i} {step.inputs()}"
        assert list(got.panes) == list(step.panes), f"{where}: panes"
        assert list(got.dropped) == list(step.dropped), f"{where}: dropped"


@pytest.mark.heavy
def test_the_columnar_engine_serves_every_scenario_of_fixed_windows_it_can():
    """Refused: only windows that are not fixed, processing-time triggers, and accumulating &
    retracting; most scenarios run on both engines."""
    ran, refused = 0, []
    for sc in SCENARIOS.values():
        try:
            run(sc, engine=EngineKind.COLUMNAR)
            ran += 1
        except NotColumnar as e:
            refused.append(str(e))
    assert ran >= 44
    allowed = ("are not fixed windows", "reads the clocks as numbers", "accumulating & retracting")
    assert all(any(a in r for a in allowed) for r in refused), refused
