"""A key's state as bytes: ``KeyState.to_bytes`` and ``Engine.load_state``.

Pins that serializing every key's state after every step and carrying on from the bytes (as the
Spark job does between micro-batches) changes nothing: the same panes, in the same order, and
the same dropped elements, for random windowings, combiners and schedules. Also pins that the
bytes name none of panestore's classes and stay small.

Typical sizes (protocol-5 pickle, measured when this test was written; not asserted):
  fresh key state, no windows ........................................ 31 bytes
  one fixed window, AfterWatermark(early=AfterCount(100),
    late=AfterCount(1)), accumulating sum, 1 or 10,000 elements ........ 73-74 bytes
  the same after its ON_TIME pane, retracting mode (keeps last pane) ... 111 bytes
  60 fixed windows of one key, as above ............................... 2.8 KB
  3 emitted sessions, retracting, to_list ............................. 284 bytes
  ... after they merged into one session and it fired ................. 177 bytes
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    Engine,
    FixedWindows,
    KeyState,
    Sessions,
    Windowing,
    combiners,
)
from tests.panes.test_engine import COMBINERS, run, step, windowings

CLASS_NAMES = [
    b"panes",
    b"KeyState",
    b"WindowState",
    b"Pane",
    b"PaneInfo",
    b"Timing",
    b"Window",
    b"Trigger",
    b"Engine",
]


def assert_names_no_class(data):
    assert isinstance(data, bytes)
    for name in CLASS_NAMES:
        assert name not in data, name


def drive(windowing, combine_fn, steps, reload):
    """Run ``steps`` on a Simulator; with ``reload``, after every step every key's state is
    replaced by what a fresh Engine loads from its bytes."""

    def roundtrip(sim):
        fresh = Engine(windowing, combine_fn)
        for key, state in list(sim.states.items()):
            data = state.to_bytes()
            assert_names_no_class(data)
            sim.states[key] = fresh.load_state(data)

    return run(windowing, combine_fn, steps, after_step=roundtrip if reload else None)


@given(windowings(), st.sampled_from(COMBINERS), st.lists(step, max_size=25))
def test_reloading_every_key_after_every_step_changes_nothing(windowing, combine_fn, steps):
    kept = drive(windowing, combine_fn, steps, reload=False)
    reloaded = drive(windowing, combine_fn, steps, reload=True)
    assert reloaded.panes == kept.panes
    assert reloaded.dropped == kept.dropped


@given(
    windowings(),
    st.sampled_from(COMBINERS),
    st.lists(
        st.one_of(
            st.tuples(
                st.just("bundle"),
                st.lists(st.tuples(st.integers(0, 9), st.integers(0, 120)), min_size=1, max_size=6),
            ),
            st.tuples(st.just("advance"), st.integers(0, 25), st.integers(0, 6)),
        ),
        max_size=25,
    ),
)
def test_engine_driven_directly_per_key_with_reloads_between_calls(windowing, combine_fn, calls):
    """The Spark job's use: one Engine, one key, state stored as bytes between calls, both
    clocks moved by ``advance``."""
    engine = Engine(windowing, combine_fn)
    kept, data = engine.new_state(), engine.new_state().to_bytes()
    kept_out, reloaded_out = [], []
    wm, pt = -5, 0
    for call in [*calls, ("advance", END_OF_TIME, 0)]:
        state = engine.load_state(data)
        if call[0] == "bundle":
            outs = [engine.add_elements(s, "k", call[1]) for s in (kept, state)]
        else:
            wm, pt = min(wm + call[1], END_OF_TIME), pt + call[2]
            outs = [engine.advance(s, "k", wm, pt) for s in (kept, state)]
        kept_out.append((outs[0].panes, outs[0].dropped))
        reloaded_out.append((outs[1].panes, outs[1].dropped))
        data = state.to_bytes()
        assert_names_no_class(data)
    assert reloaded_out == kept_out
    assert kept.is_empty and engine.load_state(data).is_empty


def test_loaded_state_reports_the_same_wake_ups():
    windowing = Windowing(FixedWindows(10), trigger=AfterWatermark(early=AfterCount(3)))
    engine = Engine(windowing, combiners.sum())
    state = engine.new_state()
    engine.add_elements(state, "k", [(1, 3), (2, 14)])
    loaded = engine.load_state(state.to_bytes())
    assert (loaded.next_event_time, loaded.next_processing_time) == (10, None)
    assert loaded.watermark == state.watermark
    assert loaded.processing_time == state.processing_time
    assert set(loaded.windows) == set(state.windows)


def test_state_size_does_not_grow_with_the_elements_of_a_window():
    windowing = Windowing(
        FixedWindows(60_000_000), trigger=AfterWatermark(early=AfterCount(100_000))
    )
    engine = Engine(windowing, combiners.sum())
    few, many = engine.new_state(), engine.new_state()
    engine.add_elements(few, "k", [(1, 5)])
    engine.add_elements(many, "k", [(1, t) for t in range(10_000)])
    # Only the sum, the element counts and the trigger count grow, by a few bytes each.
    assert len(many.to_bytes()) - len(few.to_bytes()) < 16


def test_retraction_state_survives_a_merge_and_a_reload():
    """Accumulating & retracting sessions: the merged window must still retract the panes of
    the sessions it absorbed after its state went through bytes."""
    windowing = Windowing(
        Sessions(10),
        trigger=AfterWatermark(early=AfterCount(1), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
        allowed_lateness=100,
    )
    engine = Engine(windowing, combiners.to_list())
    data = engine.new_state().to_bytes()
    for bundle in (
        [("a", 0)],
        [("b", 20)],
        [("c", 40)],
        [("bridge", 9), ("bridge", 18), ("bridge", 29), ("bridge", 38)],
    ):
        state = engine.load_state(data)
        out = engine.add_elements(state, "k", bundle)
        data = state.to_bytes()
    assert_names_no_class(data)
    retracted = sorted((p.window.start, p.value) for p in out.panes if p.is_retraction)
    assert retracted == [(0, ["a"]), (20, ["b"]), (40, ["c"])]
    (merged,) = [p for p in out.panes if not p.is_retraction]
    assert (merged.window.start, merged.window.end) == (0, 50)
    assert sorted(merged.value) == ["a", "b", "bridge", "bridge", "bridge", "bridge", "c"]
    assert sorted((w.start, w.end) for w in merged.supersedes) == [(0, 10), (20, 30), (40, 50)]


def test_key_state_constructed_directly_round_trips():
    state = KeyState(watermark=123, processing_time=456)
    loaded = KeyState.from_bytes(state.to_bytes())
    assert (loaded.watermark, loaded.processing_time, loaded.is_empty) == (123, 456, True)
