"""Several inputs of one pipeline (:mod:`panes.inputs`): the minimum watermark, idleness, the
``input`` column, and the simulator driving several inputs on both engines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import (
    AfterCount,
    AfterWatermark,
    EngineKind,
    FixedWindows,
    InputClock,
    Inputs,
    Simulator,
    Windowing,
    combiners,
    parse_aggregate,
)
from panes.fold import batch, fold
from panes.time import BEGINNING_OF_TIME

NAMES = ("views", "clicks", "queries")

# -- the rule on its own -----------------------------------------------------------------------

clocks_strategy = st.fixed_dictionaries(
    {
        name: st.builds(
            InputClock, st.integers(-1000, 1000) | st.just(BEGINNING_OF_TIME), st.integers(0, 100)
        )
        for name in NAMES
    }
)


@given(clocks_strategy, st.integers(-2000, 1000), st.integers(0, 300))
def test_without_a_timeout_the_watermark_is_the_minimum_of_the_inputs(clocks, previous, now):
    inputs = Inputs(NAMES)
    expected = max(previous, min(c.watermark for c in clocks.values()))
    assert inputs.watermark(clocks, now, previous) == expected
    # the order in which the inputs are named or their clocks listed changes nothing
    reordered = {n: clocks[n] for n in reversed(NAMES)}
    assert Inputs(reversed(NAMES)).watermark(reordered, now, previous) == expected


@given(clocks_strategy, st.integers(1, 100), st.integers(0, 300))
def test_an_idle_input_does_not_hold_the_watermark_back(clocks, timeout, now):
    inputs = Inputs(NAMES, idle_timeout=timeout)
    wm = inputs.watermark(clocks, now)
    active = [c.watermark for c in clocks.values() if now - c.last_data < timeout]
    idle = [c.watermark for c in clocks.values() if now - c.last_data >= timeout]
    assert [inputs.idle(c, now) for c in clocks.values()].count(True) == len(idle)
    if active:  # the inputs with recent data hold it, exactly
        assert wm == min(active)
    else:  # every input idle: nothing holds it back
        assert wm == max(idle)
    # ... and an idle input only ever lets it move further
    assert wm >= Inputs(NAMES).watermark(clocks, now)


@given(st.integers(-1000, 1000), st.integers(0, 100), st.integers(0, 300), st.integers(1, 50))
def test_one_input_is_its_own_watermark_idle_or_not(watermark, last, now, timeout):
    clock = {"only": InputClock(watermark, last)}
    for inputs in (Inputs(["only"]), Inputs(["only"], idle_timeout=timeout)):
        assert inputs.watermark(clock, now) == watermark


# a run: inputs deliver data (move their last_data), move their own watermarks, processing
# time moves; the rule is applied after each step with the previous watermark
steps_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.sampled_from(NAMES)),
        st.tuples(st.just("wm"), st.sampled_from(NAMES), st.integers(0, 40)),
        st.tuples(st.just("pt"), st.integers(0, 40)),
    ),
    max_size=40,
)


def _replay(inputs: Inputs, steps):
    """Each step's (clocks, processing time, pipeline watermark before, after)."""
    clocks = {n: InputClock(0, 0) for n in inputs.names}
    now, wm = 0, BEGINNING_OF_TIME
    for step in steps:
        if step[0] == "data":
            clocks[step[1]] = InputClock(clocks[step[1]].watermark, now)
        elif step[0] == "wm":
            c = clocks[step[1]]
            clocks[step[1]] = InputClock(c.watermark + step[2], c.last_data)
        else:
            now += step[1]
        before, wm = wm, inputs.watermark(clocks, now, wm)
        yield dict(clocks), now, before, wm


@given(steps_strategy, st.none() | st.integers(1, 60))
def test_the_watermark_never_moves_back_nor_past_an_input_with_data(steps, timeout):
    inputs = Inputs(NAMES, idle_timeout=timeout)
    for clocks, now, before, after in _replay(inputs, steps):
        assert after >= before
        if after > before:  # it moved: no input with recent data is behind where it moved to
            for clock in clocks.values():
                if not inputs.idle(clock, now):
                    assert after <= clock.watermark
        if timeout is None:  # never idle: always the plain minimum
            assert after == min(c.watermark for c in clocks.values())


def test_bad_inputs_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="at least one input"):
        Inputs([])
    with pytest.raises(ValueError, match="named twice"):
        Inputs(["a", "a"])
    with pytest.raises(ValueError, match="identifier"):
        Inputs(["a b"])
    with pytest.raises(ValueError, match="positive"):
        Inputs(["a"], idle_timeout=0)
    assert Inputs(["a"], idle_timeout="1m").idle_timeout == 60_000_000
    with pytest.raises(ValueError, match="the clocks of inputs"):
        Inputs(["a", "b"]).watermark({"a": InputClock()}, 0)
    with pytest.raises(ValueError, match="holds input = 'views'"):
        Inputs(["clicks", "views"]).tag({"input": "views"}, "clicks")
    with pytest.raises(TypeError, match="a record"):
        Inputs(["clicks"]).tag(3, "clicks")


# -- the simulator driving several inputs ------------------------------------------------------

CTR = combiners.aggregates(
    views=parse_aggregate("count() filter (input = 'views')"),
    clicks=parse_aggregate("count() filter (input = 'clicks')"),
    cost=parse_aggregate("sum(cost) filter (input = 'clicks')"),
    spent=parse_aggregate("sum(cost)"),  # a column of clicks alone (null in views)
)
WINDOWING = Windowing(FixedWindows(10), trigger=AfterWatermark(late=AfterCount(1)))

# a bundle of one input: (input, [(key, cost, timestamp offset past the input's watermark)])
bundle_strategy = st.tuples(
    st.sampled_from(NAMES[:2]),
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 9), st.integers(0, 25)), max_size=4),
)
run_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("data"), bundle_strategy),
        st.tuples(st.just("wm"), st.sampled_from(NAMES[:2]), st.integers(0, 15)),
        st.tuples(st.just("pt"), st.integers(0, 15)),
    ),
    max_size=30,
)


def _drive(sim: Simulator, steps) -> list[tuple[str, dict, int]]:
    """Run ``steps`` on a simulator of the inputs views and clicks; each input's elements come
    at or after its own watermark (a well-behaved input). Returns every element given."""
    given_elements = []
    now = 0
    for step in steps:
        if step[0] == "data":
            name, rows = step[1]
            own = sim.input_clocks[name].watermark
            bundle = [
                (k, {"cost": c if name == "clicks" else None}, max(own, 0) + dt)
                for k, c, dt in rows
            ]
            sim.add_elements(bundle, input=name)
            given_elements += [(k, {**v, "input": name}, t) for k, v, t in bundle]
        elif step[0] == "wm":
            own = sim.input_clocks[step[1]].watermark
            sim.advance_watermark(max(own, 0) + step[2], input=step[1])
        else:
            now += step[1]
            sim.advance_processing_time(now)
    return given_elements


@pytest.mark.heavy
@given(run_strategy)
def test_well_behaved_inputs_lose_nothing_under_the_minimum_watermark(steps):
    """Without idleness no element of an input that keeps behind its own watermark is ever
    late: the pipeline's watermark is behind every input's. After a drain the view is the batch
    over every element, each aggregate reading its own input's."""
    sim = Simulator(WINDOWING, CTR, inputs=Inputs(NAMES[:2]))
    elements = _drive(sim, steps)
    sim.advance_watermark(10**9, input="views")
    sim.advance_watermark(10**9, input="clicks")
    assert sim.dropped == []
    view = fold(sim.panes, WINDOWING.accumulation_mode, CTR)
    assert view == batch(elements, WINDOWING.window_fn, CTR, [])
    for value in view.values():
        assert value["views"] + value["clicks"] > 0
        assert value["spent"] == value["cost"]  # an unfiltered sum reads only the clicks


@pytest.mark.heavy
@given(run_strategy, st.none() | st.integers(1, 20))
def test_both_engines_run_several_inputs_alike(steps, timeout):
    """Tagged elements and the inputs' watermark feed the per-key and the columnar engine the
    same way: the same panes and drops, in order; dropped elements name their input."""
    out = []
    for engine in (EngineKind.PER_ELEMENT, EngineKind.COLUMNAR):
        sim = Simulator(WINDOWING, CTR, engine=engine, inputs=Inputs(NAMES[:2], timeout))
        elements = _drive(sim, steps)
        out.append((sim.panes, sim.dropped, sim.watermark))
        for d in sim.dropped:
            assert d.value["input"] in NAMES[:2]
        view = fold(sim.panes, WINDOWING.accumulation_mode, CTR)
        sim.advance_watermark(10**9, input="views")
        sim.advance_watermark(10**9, input="clicks")
        assert fold(sim.panes, WINDOWING.accumulation_mode, CTR) == batch(
            elements, WINDOWING.window_fn, CTR, sim.dropped
        )
        assert all(v["views"] + v["clicks"] > 0 for v in view.values())
    assert out[0] == out[1]


def test_an_idle_input_stops_holding_the_windows_and_its_late_data_is_late():
    """Clicks go silent: without a timeout the views' windows wait for them forever; with
    ``idle_timeout`` they fire once clicks have been silent that long, and a click that comes
    back behind the watermark is late, naming its input."""
    lateness = Windowing(WINDOWING.window_fn, WINDOWING.trigger, allowed_lateness=100)
    held = Simulator(lateness, CTR, inputs=Inputs(NAMES[:2]))
    idle = Simulator(lateness, CTR, inputs=Inputs(NAMES[:2], idle_timeout=30))
    for sim in (held, idle):
        sim.add_elements([("a", {"cost": 0}, 1)], input="views")
        sim.add_elements([("a", {"cost": 5}, 2)], input="clicks")
        sim.advance_watermark(25, input="views")
        assert sim.watermark == BEGINNING_OF_TIME  # clicks said nothing of their event time
        sim.advance_processing_time(29)
        assert sim.panes == []
    assert held.advance_processing_time(1000) == []
    fired = idle.advance_processing_time(30)
    assert idle.watermark == 25
    assert [p.value for p in fired] == [{"views": 1, "clicks": 1, "cost": 5, "spent": 5}]
    late = idle.add_elements([("a", {"cost": 7}, 3)], input="clicks")  # behind the watermark
    assert idle.watermark == 25  # a promise is not withdrawn
    assert [(p.value, p.pane.timing.name) for p in late] == [
        ({"views": 0, "clicks": 1, "cost": 7, "spent": 7}, "LATE")  # discarding
    ]
    idle.advance_watermark(200, input="clicks")  # clicks hold it now: views are idle
    assert idle.watermark == 200
    idle.add_elements([("a", {"cost": 1}, 4)], input="clicks")  # past the allowed lateness
    assert [(d.value, d.reason.split(":")[0]) for d in idle.dropped] == [
        ({"cost": 1, "input": "clicks"}, "expired")
    ]


def test_the_simulator_asks_for_the_input_it_needs():
    sim = Simulator(WINDOWING, CTR, inputs=Inputs(NAMES[:2]))
    with pytest.raises(ValueError, match="name the input"):
        sim.add_elements([("a", {"cost": 1}, 1)])
    with pytest.raises(ValueError, match="no input 'x'"):
        sim.advance_watermark(3, input="x")
    sim.advance_watermark(3, input="views")
    with pytest.raises(ValueError, match="cannot move back"):
        sim.advance_watermark(2, input="views")
    with pytest.raises(ValueError, match="unnamed input"):
        Simulator(WINDOWING, CTR).add_elements([], input="views")
