"""Window functions: where in event time an element's results go.

Pins the assignment rules of FixedWindows, SlidingWindows, Sessions and GlobalWindows (offsets,
negative timestamps, half-open boundaries), their constructors (``timedelta`` accepted, invalid
sizes rejected with the field named), the invariants of ``merge_overlapping``, and the custom
window-function protocol (assign, merge, merge_horizon, zero windows) end to end through the
Simulator with ``tests.panes.support.DailyBuckets`` and ``EvenOnly``.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    BEGINNING_OF_TIME,
    END_OF_TIME,
    GLOBAL_WINDOW,
    AccumulationMode,
    FixedWindows,
    GlobalWindows,
    Sessions,
    Simulator,
    SlidingWindows,
    Window,
    Windowing,
    combiners,
)
from panes.windowfns import merge_overlapping
from tests.panes.support import DailyBuckets, EvenOnly

timestamps = st.integers(-(10**12), 10**12)
sizes = st.integers(1, 10**6)


W = Window


# -- FixedWindows ----------------------------------------------------------------------------


def test_fixed_windows_boundaries_are_half_open():
    fixed = FixedWindows(10)
    assert fixed.assign(0, None) == (W(0, 10),)
    assert fixed.assign(9, None) == (W(0, 10),)  # ts = end - 1: still inside
    assert fixed.assign(10, None) == (W(10, 20),)  # ts = end: the next window


def test_fixed_windows_negative_timestamps():
    fixed = FixedWindows(10)
    assert fixed.assign(-1, None) == (W(-10, 0),)
    assert fixed.assign(-10, None) == (W(-10, 0),)
    assert fixed.assign(-11, None) == (W(-20, -10),)


def test_fixed_windows_offset_shifts_the_boundaries():
    fixed = FixedWindows(10, offset=3)
    assert fixed.assign(2, None) == (W(-7, 3),)
    assert fixed.assign(3, None) == (W(3, 13),)
    assert fixed.assign(12, None) == (W(3, 13),)
    assert fixed.assign(13, None) == (W(13, 23),)
    assert fixed.assign(-8, None) == (W(-17, -7),)


def test_fixed_windows_offset_is_taken_modulo_the_size():
    assert FixedWindows(10, offset=13) == FixedWindows(10, offset=3)
    assert FixedWindows(10, offset=-7) == FixedWindows(10, offset=3)
    assert FixedWindows(10, offset=-7).assign(5, None) == (W(3, 13),)


@given(timestamps, sizes, st.integers(-(10**7), 10**7))
def test_fixed_windows_assign_one_aligned_window_containing_the_timestamp(ts, size, offset):
    (window,) = FixedWindows(size, offset).assign(ts, None)
    assert window.start <= ts < window.end
    assert window.end - window.start == size
    assert (window.start - offset) % size == 0


@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(-50, 50)), max_size=20),
    st.sampled_from([FixedWindows(7, offset=3), GlobalWindows(), SlidingWindows(10, 4)]),
)
def test_assign_bundle_equals_assigning_one_by_one(elements, window_fn):
    """The protocol allows a faster ``assign_bundle``; it must equal the plain loop."""
    expected: dict = {}
    for value, ts in elements:
        for window in window_fn.assign(ts, value):
            expected.setdefault(window, []).append((value, ts))
    assert window_fn.assign_bundle(elements) == expected


# -- SlidingWindows --------------------------------------------------------------------------


def test_sliding_windows_when_period_divides_size():
    sliding = SlidingWindows(10, 5)
    assert set(sliding.assign(7, None)) == {W(0, 10), W(5, 15)}
    assert set(sliding.assign(5, None)) == {W(0, 10), W(5, 15)}
    assert set(sliding.assign(4, None)) == {W(-5, 5), W(0, 10)}
    assert set(sliding.assign(-1, None)) == {W(-10, 0), W(-5, 5)}


def test_sliding_windows_when_period_does_not_divide_size():
    sliding = SlidingWindows(10, 4)
    assert set(sliding.assign(0, None)) == {W(-8, 2), W(-4, 6), W(0, 10)}
    assert set(sliding.assign(1, None)) == {W(-8, 2), W(-4, 6), W(0, 10)}
    assert set(sliding.assign(2, None)) == {W(-4, 6), W(0, 10)}
    assert set(sliding.assign(3, None)) == {W(-4, 6), W(0, 10)}


def test_sliding_windows_offset():
    assert set(SlidingWindows(10, 5, offset=2).assign(7, None)) == {W(2, 12), W(7, 17)}
    assert set(SlidingWindows(10, 5, offset=2).assign(6, None)) == {W(-3, 7), W(2, 12)}
    assert SlidingWindows(10, 5, offset=7) == SlidingWindows(10, 5, offset=2)


def test_sliding_windows_with_gaps_assign_no_window_between_them():
    sliding = SlidingWindows(3, 10)
    assert sliding.assign(2, None) == (W(0, 3),)
    assert sliding.assign(3, None) == ()


@given(timestamps, st.integers(1, 60), st.integers(1, 60), st.integers(-100, 100))
def test_sliding_windows_are_exactly_the_aligned_windows_containing_the_timestamp(
    ts, size, period, offset
):
    windows = SlidingWindows(size, period, offset).assign(ts, None)
    assert len(set(windows)) == len(windows)
    expected = {
        W(start, start + size)
        for start in range(ts - size + 1, ts + 1)
        if (start - offset) % period == 0
    }
    assert set(windows) == expected
    assert len(windows) in {size // period, math.ceil(size / period)}
    if size % period == 0:
        assert len(windows) == size // period


# -- Sessions --------------------------------------------------------------------------------


def test_sessions_assign_opens_a_gap_long_window():
    assert Sessions(10).assign(5, "x") == (W(5, 15),)
    assert Sessions(10).assign(-5, "x") == (W(-5, 5),)


def test_sessions_merge_overlapping_windows_into_their_span():
    assert Sessions(10).merge([W(0, 10), W(5, 15)]) == [((W(0, 10), W(5, 15)), W(0, 15))]


def test_sessions_touching_windows_do_not_merge():
    assert Sessions(10).merge([W(0, 10), W(10, 20)]) == []


def test_sessions_merge_is_transitive_and_leaves_loners_out():
    # [0,10) and [16,26) overlap only through [8,18); [40,50) overlaps nothing.
    windows = [W(16, 26), W(40, 50), W(0, 10), W(8, 18)]
    assert Sessions(10).merge(windows) == [((W(0, 10), W(8, 18), W(16, 26)), W(0, 26))]


def test_sessions_merge_of_a_window_and_a_window_it_contains():
    assert Sessions(10).merge([W(0, 30), W(5, 15)]) == [((W(0, 30), W(5, 15)), W(0, 30))]


def test_non_merging_window_functions_merge_nothing():
    overlapping = [W(0, 10), W(5, 15)]
    assert FixedWindows(10).merge(overlapping) == []
    assert SlidingWindows(10, 5).merge(overlapping) == []
    assert not FixedWindows(10).is_merging
    assert Sessions(10).is_merging


@given(st.integers(1, 100), st.integers(-1000, 1000), st.integers(1, 200))
def test_sessions_merge_horizon_is_the_largest_end_that_can_still_merge(gap, start, length):
    sessions = Sessions(gap)
    window = W(start, start + length)
    horizon = sessions.merge_horizon(window)
    # The latest element that still overlaps the window opens the window ending at the horizon.
    (latest,) = sessions.assign(window.end - 1, None)
    assert latest.end == horizon
    assert latest.intersects(window)
    # One tick later it only touches the window, so nothing beyond the horizon merges.
    (touching,) = sessions.assign(window.end, None)
    assert sessions.merge([window, touching]) == []


def test_merge_horizon_of_non_merging_functions_is_the_window_end():
    assert FixedWindows(10).merge_horizon(W(0, 10)) == 10
    assert Sessions(10).merge_horizon(W(0, 10)) == 19


def test_sessions_in_the_simulator_merge_overlaps_and_keep_touching_sessions_apart():
    sim = Simulator(Windowing(Sessions(10)), combiners.sum())
    sim.add_elements([("k", 1, 0), ("k", 2, 5), ("k", 4, 14), ("j", 8, 0), ("j", 16, 10)])
    sim.advance_watermark(END_OF_TIME)
    results = {(p.key, p.window): p.value for p in sim.panes}
    assert results == {
        ("k", W(0, 24)): 7,  # [0,10) + [5,15) + [14,24): transitive through [5,15)
        ("j", W(0, 10)): 8,  # [0,10) and [10,20) only touch
        ("j", W(10, 20)): 16,
    }


# -- merge_overlapping invariants ------------------------------------------------------------

windows = st.builds(
    lambda start, length: W(start, start + length), st.integers(-60, 60), st.integers(1, 25)
)


@given(st.lists(windows, max_size=12))
def test_merge_overlapping_invariants(inputs):
    groups = merge_overlapping(inputs)
    results = [result for _, result in groups]
    # Results are pairwise disjoint.
    for i, a in enumerate(results):
        for b in results[i + 1 :]:
            assert not a.intersects(b), (a, b)
    for members, result in groups:
        assert len(members) >= 2
        assert result == W(min(w.start for w in members), max(w.end for w in members))
    for window in set(inputs):
        holders = [members for members, _ in groups if window in members]
        containing = [r for r in results if r.start <= window.start and window.end <= r.end]
        overlaps_another = any(window.intersects(o) for o in set(inputs) if o != window)
        if overlaps_another:
            assert len(holders) == 1 and len(containing) == 1
        else:
            assert holders == [] and containing == []


@given(st.lists(windows, max_size=12), st.randoms(use_true_random=False))
def test_merge_overlapping_ignores_input_order_and_duplicates(inputs, rnd):
    shuffled = list(inputs) + list(inputs[:3])
    rnd.shuffle(shuffled)
    assert merge_overlapping(shuffled) == merge_overlapping(inputs)


def _merge_to_fixpoint(window_fn, live):
    live = set(live)
    while merges := window_fn.merge(live):
        for members, result in merges:
            live -= set(members)
            live.add(result)
    return live


@given(st.lists(windows, min_size=1, max_size=12), st.sampled_from([Sessions(5), DailyBuckets(25)]))
def test_merging_as_windows_arrive_ends_where_merging_all_at_once_does(inputs, window_fn):
    """The protocol's order-independence: one merge of everything, or a merge after every
    arrival, ends with the same windows."""
    incremental: set = set()
    for window in inputs:
        incremental = _merge_to_fixpoint(window_fn, incremental | {window})
    assert incremental == _merge_to_fixpoint(window_fn, inputs)


# -- GlobalWindows ---------------------------------------------------------------------------


@given(st.integers(BEGINNING_OF_TIME, GLOBAL_WINDOW.end - 1))
def test_global_windows_put_every_timestamp_in_the_global_window(ts):
    assert GlobalWindows().assign(ts, "v") == (GLOBAL_WINDOW,)


def test_global_window_fires_once_at_the_end_of_time_with_the_default_trigger():
    sim = Simulator(Windowing(GlobalWindows()), combiners.sum())
    sim.add_elements([("k", 1, -(10**15)), ("k", 2, 0), ("k", 3, 10**15)])
    assert sim.advance_watermark(GLOBAL_WINDOW.end - 1) == []
    (pane,) = sim.advance_watermark(END_OF_TIME)
    assert (pane.window, pane.value, pane.pane.timing.name) == (GLOBAL_WINDOW, 6, "ON_TIME")
    assert pane.timestamp == GLOBAL_WINDOW.max_timestamp


# -- constructors ----------------------------------------------------------------------------


def test_constructors_accept_timedelta():
    assert FixedWindows(timedelta(minutes=1)) == FixedWindows(60_000_000)
    assert FixedWindows(timedelta(minutes=1), offset=timedelta(seconds=15)) == FixedWindows(
        60_000_000, offset=15_000_000
    )
    assert SlidingWindows(
        timedelta(hours=1), timedelta(minutes=10), timedelta(minutes=1)
    ) == SlidingWindows(3_600_000_000, 600_000_000, 60_000_000)
    assert Sessions(timedelta(seconds=30, microseconds=7)) == Sessions(30_000_007)
    assert FixedWindows(timedelta(days=1)).size == 86_400_000_000


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: FixedWindows(0), "size"),
        (lambda: FixedWindows(-10), "size"),
        (lambda: FixedWindows(timedelta(0)), "size"),
        (lambda: SlidingWindows(0, 5), "size"),
        (lambda: SlidingWindows(10, 0), "period"),
        (lambda: SlidingWindows(10, -5), "period"),
        (lambda: Sessions(0), "gap"),
        (lambda: Sessions(timedelta(seconds=-1)), "gap"),
    ],
)
def test_invalid_sizes_raise_value_error_naming_the_field(build, field):
    with pytest.raises(ValueError, match=field):
        build()


@pytest.mark.parametrize("bad", [1.5, True, None])
def test_durations_of_other_types_are_rejected_naming_the_field(bad):
    with pytest.raises(TypeError, match="FixedWindows size"):
        FixedWindows(bad)
    with pytest.raises(TypeError, match="Sessions gap"):
        Sessions(bad)


def test_durations_are_microseconds_a_timedelta_or_text():
    """As a configuration writes them: ``FixedWindows("1m")`` is ``FixedWindows(60_000_000)``;
    text that is no duration is refused naming the field."""
    assert FixedWindows("1m") == FixedWindows(timedelta(minutes=1)) == FixedWindows(60_000_000)
    assert SlidingWindows("10s", "5s") == SlidingWindows(10_000_000, 5_000_000)
    assert Sessions("1h30m").gap == 5_400_000_000
    with pytest.raises(ValueError, match="FixedWindows size: not a duration: '10 sec'"):
        FixedWindows("10 sec")


# -- the custom window-function protocol, through the Simulator -------------------------------


def test_custom_merging_window_fn_assigns_and_merges_in_the_simulator():
    sim = Simulator(
        Windowing(DailyBuckets(100), accumulation_mode=AccumulationMode.ACCUMULATING),
        combiners.to_list(),
    )
    sim.add_elements([("k", "a", 5), ("k", "b", 50), ("k", "c", 150), ("j", "d", 7)])
    sim.add_elements([("k", "e", 99)])
    sim.advance_watermark(END_OF_TIME)
    results = {(p.key, p.window): sorted(p.value) for p in sim.panes}
    assert results == {
        ("k", W(5, 100)): ["a", "b", "e"],  # one bucket: merged into the span of its windows
        ("k", W(150, 151)): ["c"],  # the next bucket, alone
        ("j", W(7, 8)): ["d"],  # another key never merges with k's windows
    }


def test_custom_merge_horizon_keeps_a_fired_window_until_nothing_can_merge_into_it():
    """[5,51) fires ON_TIME at watermark 60 but its bucket [0,100) can still grow it: a later
    element at 90 (not late for its own window [90,91)) must merge into it, not open a window
    of its own, and the merged window supersedes the one already emitted."""
    sim = Simulator(
        Windowing(DailyBuckets(100), accumulation_mode=AccumulationMode.ACCUMULATING),
        combiners.sum(),
    )
    sim.add_elements([("k", 1, 5), ("k", 2, 50)])
    (first,) = sim.advance_watermark(60)
    assert (first.window, first.value, first.pane.timing.name) == (W(5, 51), 3, "ON_TIME")
    assert sim.states, "the window is kept: the watermark has not passed its merge horizon"
    sim.add_elements([("k", 4, 90)])
    assert sim.dropped == []
    (merged,) = sim.advance_watermark(91)
    assert (merged.window, merged.value) == (W(5, 91), 7)
    assert merged.supersedes == (W(5, 51),)
    sim.advance_watermark(101)  # past the horizon (bucket end 100, no allowed lateness)
    assert not sim.states, "gone once nothing can merge into it any more"


def test_window_fn_assigning_no_window_reports_the_element_as_dropped():
    sim = Simulator(Windowing(EvenOnly()), combiners.sum())
    sim.add_elements([("k", 2, 3), ("k", 3, 4), ("k", 4, 15)])
    sim.advance_watermark(END_OF_TIME)
    assert {(p.window, p.value) for p in sim.panes} == {(W(0, 10), 2), (W(10, 20), 4)}
    (dropped,) = sim.dropped
    assert (dropped.key, dropped.value, dropped.timestamp, dropped.window) == ("k", 3, 4, None)
    assert dropped.reason.startswith("no window")


@given(st.integers(-(10**12), 10**12))
def test_every_assigned_window_can_be_produced_and_periodic_grids_describe_the_assignment(ts):
    from panes.windowfns import Periodic

    fns = [FixedWindows(60, 7), SlidingWindows(60, 20, 5), Sessions(30), GlobalWindows()]
    for fn in fns:
        for w in fn.assign(ts, None):
            assert fn.can_produce(w)
        grid = fn.periodic
        if grid is not None:
            assert isinstance(grid, Periodic)
            starts = {w.start for w in fn.assign(ts, None)}
            grid_starts = {
                s
                for s in range(ts - grid.size - grid.period, ts + 1)
                if (s - grid.offset) % grid.period == 0 and s <= ts < s + grid.size
            }
            assert starts == grid_starts
    assert GlobalWindows().only_window == GLOBAL_WINDOW
    assert all(fn.only_window is None for fn in fns[:3])
    assert Sessions(30).periodic is None and GlobalWindows().periodic is None


def test_can_produce_refuses_windows_of_another_shape():
    assert not FixedWindows(60).can_produce(Window(30, 90))
    assert not FixedWindows(60).can_produce(Window(0, 30))
    assert not SlidingWindows(60, 20).can_produce(Window(10, 70))
    assert SlidingWindows(60, 20).can_produce(Window(20, 80))
    assert not Sessions(30).can_produce(Window(0, 29))
    assert not GlobalWindows().can_produce(Window(0, 60))
