"""Static properties of triggers (what a configuration check may ask of a trigger tree)."""

from __future__ import annotations

import pytest

from panes import parse_trigger


@pytest.mark.parametrize(
    ("text", "early"),
    [
        ("AfterWatermark()", False),
        ("DefaultTrigger()", False),
        ("Never()", False),
        ("AfterWatermark(early=AfterCount(1))", True),
        ("Repeatedly(AfterCount(3))", True),
        ("AfterAny(AfterWatermark(), AfterProcessingTime(1m))", True),
        ("AfterAll(AfterWatermark(), AfterCount(2))", False),
        ("AfterEach(AfterWatermark(), AfterCount(2))", False),
        ("OrFinally(Repeatedly(AfterWatermark()), AfterCount(5))", True),
    ],
)
def test_fires_before_end_of_window(text, early):
    t = parse_trigger(text)
    assert t.fires_before_end_of_window is early
