"""The scenario format reads what its documentation says, and rejects what it does not."""

from __future__ import annotations

import pytest

from tests.scenarios.format import (
    DEFAULTS,
    dropped_reason,
    element,
    pane_text,
    parse_pane,
    scenario,
)


def test_the_three_forms_of_an_element():
    assert element(5) == ("k", 5, 5)
    assert element(["a", 5]) == ("a", 5, 5)
    assert element(["a", "x", 5]) == ("a", "x", 5)
    with pytest.raises(ValueError, match="not an element"):
        element(["a", 1, 2, 3])


def test_defaults_and_steps():
    sc = scenario(
        {
            "name": "n",
            "window": "FixedWindows(10us)",
            "steps": [{"bundle": [1, ["b", 2]]}, {"watermark": 10, "panes": []}],
        }
    )
    assert (sc.trigger, sc.accumulation, sc.combiner) == (
        DEFAULTS["trigger"],
        DEFAULTS["accumulation"],
        DEFAULTS["combiner"],
    )
    assert [s.inputs() for s in sc.steps] == [
        {"bundle": [["k", 1, 1], ["b", 2, 2]]},
        {"watermark": 10},
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "n", "steps": []},  # no window
        {"name": "n", "window": "GlobalWindows()", "steps": [], "mode": "x"},  # unknown field
        {"name": "n", "window": "GlobalWindows()", "steps": [{"watermark": 1, "bundle": [1]}]},
        {"name": "n", "window": "GlobalWindows()", "steps": [{"watermark": 1, "panes": ["x"]}]},
        {"name": "n", "window": "GlobalWindows()", "steps": [{"watermark": 1, "dropped": ["x"]}]},
    ],
)
def test_malformed_scenarios_are_rejected(bad):
    with pytest.raises(ValueError):
        scenario(bad)


def test_pane_text_parses_back():
    text = pane_text(
        "k",
        (0, 25_000),
        [15, 0, 8],
        24_999,
        "EARLY",
        0,
        -1,
        is_last=True,
        supersedes=[(0, 10), (15, 25)],
    )
    assert text == "k [0,25_000) [0,8,15] @24_999 EARLY 0/-1 last supersedes [0,10),[15,25)"
    fields = parse_pane(text)
    assert fields["window"] == (0, 25_000)
    assert (fields["is_last"], fields["is_retraction"]) == (True, False)
    assert parse_pane("k -GLOBAL 3 @END_OF_GLOBAL_WINDOW ON_TIME 1/0")["window"] is None
    assert dropped_reason("k 3 @3 no window") == "no window"
    assert dropped_reason("k 3 @3 expired [0,10)") == "expired"
