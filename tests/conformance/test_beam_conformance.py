"""Conformance of the Beam scenarios' expected panes with Apache Beam Python's trigger driver.

``tests/scenarios/beam_conformance.toml`` lists, per scenario step, the panes panestore emits
(``tests/panes/test_simulator.py`` checks that ``panes.Simulator`` emits exactly those).
``beam_expected.json`` holds, per scenario and step, the panes Beam Python 2.77's
``GeneralTriggerDriver`` emitted (see ``beam_generate.py``, which is how the file is
regenerated). This test needs only that JSON: it never imports Beam, nor runs the engine.

Every step's expected panes are compared with Beam's: key, window, sorted values, output
timestamp, index, nonspeculative index, timing, is_first (which the scenario format writes as
``index == 0``) and is_last, in any order; Beam reports nothing like ``supersedes``, which is
left out. The number of elements a step drops as expired is compared with the (element,
window) pairs Beam ignored as expired. Only these documented differences from Beam Python are
applied:

1. Empty panes. panestore emits a pane only if it has elements that arrived since the window's
   last pane, or it is the ON_TIME pane and ``on_time_behavior`` is FIRE_ALWAYS, or it is the
   final pane and ``closing_behavior`` is FIRE_ALWAYS. Beam Python emits every firing. Beam's
   panes panestore would not emit are removed and the remaining ones renumbered (index,
   nonspeculative index, is_first), applied to every scenario.
2. AfterEach feeds all subtriggers; AfterAny/AfterAll/OrFinally track finishedness per
   subtrigger (the formal spec). Scenarios avoid the cases where Beam Python differs.
3. Merging rewinds AfterWatermark to its early phase when the merged window's end has not been
   reached. Scenarios avoid it.
4. AfterProcessingTime fires at (first element's processing time + delay), not on any
   processing-time timer of the window. Scenarios use one processing-time timer per window.
5. Garbage collection (watermark > end + allowed lateness) emits a closing pane with unfired
   data; Beam Python never does. Tolerated only in scenarios declaring it
   (``beam_differences``): an extra expected pane marked last for a window garbage-collected in
   that watermark step. The declaration is checked: the difference must actually show.
6. Triggers are evaluated after each bundle with the current watermark and processing time;
   watermark timers fire in advance_watermark, processing-time ones in
   advance_processing_time. The generator drives Beam the same way, so nothing is adjusted.
7. ``is_last`` at expiry. A firing after which its window expires (the same watermark step
   passes the window's end plus the allowed lateness) is the window's last pane, as in Beam
   Java; Beam Python leaves the flag unset. Unless ``closing_behavior`` is FIRE_ALWAYS (a
   closing pane, the last, follows), Beam's last kept pane of such a window is marked last,
   applied to every scenario.

Run ``python -m tests.conformance.test_beam_conformance`` for a report of every scenario.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from panes import DropReason, parse_duration
from panes.time import END_OF_TIME
from tests.scenarios.format import (
    BEAM_FILE,
    END_OF_GLOBAL_WINDOW,
    GLOBAL,
    Scenario,
    Step,
    dropped_reason,
    load,
    pane_text,
    parse_pane,
    without_supersedes,
)

HERE = Path(__file__).resolve().parent
EXPECTED = json.loads((HERE / "beam_expected.json").read_text())
SCENARIOS = {sc.name: sc for sc in load(BEAM_FILE)}
BEAM = {entry["name"]: entry for entry in EXPECTED["scenarios"]}
TOLERABLE = {5}


# ---- Beam side: difference 1 (empty panes) --------------------------------------------------


def _beam_pane_text(p: dict[str, Any]) -> str:
    return pane_text(
        p["key"],
        None if p["window"] == GLOBAL else tuple(p["window"]),
        p["values"],
        None if p["timestamp"] == END_OF_GLOBAL_WINDOW else p["timestamp"],
        p["timing"],
        p["index"],
        p["nonspeculative_index"],
        is_last=p["is_last"],
    )


def beam_as_panestore(sc: Scenario, beam_steps: list[dict]) -> list[tuple[list[str], int]]:
    """Per step: Beam's panes without the ones panestore would not emit, renumbered
    (difference 1), as pane texts; and the number of (element, window) pairs Beam dropped."""
    on_time_always = sc.on_time_behavior == "FIRE_ALWAYS"
    closing_always = sc.closing_behavior == "FIRE_ALWAYS"
    emitted: defaultdict[tuple, int] = defaultdict(int)  # (key, window) -> panes kept so far
    nonspec: defaultdict[tuple, int] = defaultdict(int)  # (key, window) -> ON_TIME/LATE kept
    steps = []
    for step, st in zip(sc.steps, beam_steps, strict=True):
        kept = []
        last_kept: dict[tuple, int] = {}  # (key, window) -> its last kept pane in this step
        for p in st["panes"]:
            keep = (
                p["n_new"] > 0
                or (p["timing"] == "ON_TIME" and on_time_always)
                or (p["is_last"] and closing_always)
            )
            if not keep:
                continue
            wid = (p["key"], json.dumps(p["window"]))
            index = emitted[wid]
            emitted[wid] += 1
            if p["timing"] == "EARLY":
                nonspeculative_index = -1
            else:
                nonspeculative_index = nonspec[wid]
                nonspec[wid] += 1
            last_kept[wid] = len(kept)
            kept.append({**p, "index": index, "nonspeculative_index": nonspeculative_index})
        if step.action == "watermark" and not closing_always:  # difference 7
            for i in last_kept.values():
                if _expires(sc, step, kept[i]["window"]):
                    kept[i] = {**kept[i], "is_last": True}
        steps.append(([_beam_pane_text(p) for p in kept], st["dropped"]))
    return steps


def _expires(sc: Scenario, step: Step, window: Any) -> bool:
    """Does ``window`` (a Beam window, or GLOBAL) expire in the watermark ``step``?"""
    assert step.time is not None
    if window == GLOBAL:
        return step.time >= END_OF_TIME
    return step.time > window[1] + parse_duration(sc.allowed_lateness)


# ---- comparison -----------------------------------------------------------------------------


def _gc_closing(sc: Scenario, step: Step, text: str, beam_panes: list[str]) -> bool:
    """Is the pane ``text`` an extra closing pane of a window garbage-collected in this step?"""
    pane = parse_pane(text)
    if step.action != "watermark" or pane["window"] is None or not pane["is_last"]:
        return False
    if step.time <= pane["window"][1] + parse_duration(sc.allowed_lateness):
        return False
    same_window = (pane["key"], pane["window"])
    return not any((b["key"], b["window"]) == same_window for b in map(parse_pane, beam_panes))


def _expired(step: Step) -> int:
    return sum(1 for d in step.dropped if dropped_reason(d) == DropReason.EXPIRED)


def compare(name: str) -> tuple[list[str], set[int]]:
    """Returns (list of mismatch descriptions, set of documented differences observed)."""
    sc = SCENARIOS[name]
    beam = beam_as_panestore(sc, BEAM[name]["steps"])
    observed: set[int] = set()
    problems = []
    for i, (step, (beam_panes, beam_dropped)) in enumerate(zip(sc.steps, beam, strict=True)):
        expected = [without_supersedes(p) for p in step.panes]
        if 5 in sc.beam_differences:
            extra = [p for p in expected if _gc_closing(sc, step, p, beam_panes)]
            if extra:
                observed.add(5)
                expected = [p for p in expected if p not in extra]
        only_beam = Counter(beam_panes) - Counter(expected)
        only_expected = Counter(expected) - Counter(beam_panes)
        if only_beam or only_expected:
            lines = [f"step {i} {step.inputs()}:"]
            lines += [f"  only in Beam:      {p}" for p in sorted(only_beam.elements())]
            lines += [f"  only in panestore: {p}" for p in sorted(only_expected.elements())]
            problems.append("\n".join(lines))
        if _expired(step) != beam_dropped:
            problems.append(
                f"step {i} {step.inputs()}: Beam dropped {beam_dropped} expired element(s), "
                f"panestore {_expired(step)}"
            )
    return problems, observed


def test_expected_json_is_current():
    """beam_expected.json was generated from the scenarios as they are now."""
    assert sorted(BEAM) == sorted(SCENARIOS), "regenerate with tests/conformance/beam_generate.py"
    for name, sc in SCENARIOS.items():
        assert BEAM[name]["scenario"] == sc.beam_inputs(), (
            f"{name}: beam_expected.json is stale; regenerate with beam_generate.py"
        )
        assert [s["step"] for s in BEAM[name]["steps"]] == [s.inputs() for s in sc.steps]


def test_declared_differences_are_known():
    for name, sc in SCENARIOS.items():
        unknown = set(sc.beam_differences) - TOLERABLE
        assert not unknown, f"{name}: only difference 5 can be tolerated, got {unknown}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_matches_beam(name):
    problems, observed = compare(name)
    declared = set(SCENARIOS[name].beam_differences)
    assert not problems, f"{name} ({SCENARIOS[name].trigger}):\n" + "\n".join(problems)
    assert observed == declared, (
        f"{name}: declared difference(s) {sorted(declared - observed)} did not show"
    )


def main() -> None:
    failed = 0
    for name, sc in SCENARIOS.items():
        try:
            problems, observed = compare(name)
        except Exception as exc:  # a report, not a test: show every scenario
            problems, observed = [f"raised {type(exc).__name__}: {exc}"], set()
        declared = set(sc.beam_differences)
        if observed != declared:
            problems.append(f"declared differences {sorted(declared)}, observed {sorted(observed)}")
        status = "ok" if not problems else "FAIL"
        failed += bool(problems)
        print(f"{status:4} {name}  [{sc.trigger}]")
        for p in problems:
            print("     " + p.replace("\n", "\n     "))
    print(f"{len(SCENARIOS) - failed}/{len(SCENARIOS)} scenarios match Beam")


if __name__ == "__main__":
    main()
