"""Durations (``panes.time``): the text forms ``90s``, ``1h30m``, ``250ms``, ``10us``, parsed to
microseconds and printed canonically (the largest unit that divides them)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import format_duration, parse_duration
from panes.time import UNITS

# (also used by test_syntax)
durations = st.one_of(
    st.integers(0, 10**7),
    st.builds(lambda n, unit: n * UNITS[unit], st.integers(0, 5000), st.sampled_from(list(UNITS))),
)

DURATIONS = [
    ("90s", 90_000_000, "90s"),
    ("5m", 300_000_000, "5m"),
    ("2h", 7_200_000_000, "2h"),
    ("1h30m", 5_400_000_000, "90m"),
    ("250ms", 250_000, "250ms"),
    ("10us", 10, "10us"),
    ("60s", 60_000_000, "1m"),
    ("1000ms", 1_000_000, "1s"),
    ("24h", 86_400_000_000, "1d"),
    ("1m1us", 60_000_001, "60000001us"),
    ("0s", 0, "0s"),
]


@pytest.mark.parametrize(("text", "micros", "canonical"), DURATIONS)
def test_durations_parse_to_micros_and_print_canonically(text, micros, canonical):
    assert parse_duration(text) == micros
    assert format_duration(micros) == canonical


@given(durations)
def test_every_duration_prints_in_a_form_that_parses_back(micros):
    assert parse_duration(format_duration(micros)) == micros


@pytest.mark.parametrize("text", ["", "90", "s", "5 m", "1.5s", "-1s", "5mm", "1w"])
def test_malformed_durations_are_rejected(text):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)
