"""Every scenario of ``tests/scenarios`` on :class:`panes.Simulator`: each step emits exactly the
panes and drops exactly the elements the scenario lists, in that order.

The scenarios pin trigger and pane semantics (``triggers.toml``, ``merging.toml``), the Dataflow
paper's example (``paper.toml``) and the Beam conformance transcripts
(``beam_conformance.toml``, checked against Beam's output by ``tests/conformance``). The format:
``tests/scenarios/format.py``; the rules: ``docs/semantics.md``.
"""

from __future__ import annotations

import pytest

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
