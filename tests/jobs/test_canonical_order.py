"""Rows of one key reach the engine in one order, whatever order Spark delivered them in."""

import random

import pytest

from jobs.operator import canonical_order


@pytest.mark.parametrize("seed", range(5))
def test_any_arrival_order_gives_the_same_sequence(seed):
    rows = [({"s": v}, ts) for ts in (3, 5, 5, 5, 9) for v in (ts, ts + 1)]
    shuffled = rows[:]
    random.Random(seed).shuffle(shuffled)
    canonical_order(shuffled)
    expected = sorted(rows, key=lambda e: (e[1], repr(e[0])))
    assert shuffled == expected
