"""Each input's clocks per batch (jobs.checkpoint.input_clocks): the minimum of the inputs'
watermarks with idleness, carried from batch to batch, and written once so that a replayed
batch runs at its first attempt's clocks."""

from __future__ import annotations

import pytest

from jobs.checkpoint.files import CheckpointFiles
from jobs.checkpoint.input_clocks import (
    BatchInputClocks,
    InputsAtBatch,
    InputState,
    advance,
    latest_before,
    settle,
)
from panes.inputs import Inputs
from panes.time import BEGINNING_OF_TIME

S = 1_000_000
INPUTS = Inputs(("impressions", "clicks"), idle_timeout=60 * S)
DELAYS = {"impressions": 10 * S, "clicks": 5 * S}


def test_the_minimum_holds_until_the_slow_input_is_idle() -> None:
    """Clicks lag: the watermark follows them; silent for the idle timeout, they stop holding
    it and it jumps to the impressions'; a batch without data keeps each input's state."""
    b0 = advance(INPUTS, DELAYS, None, 0, 100 * S, {"impressions": 500 * S, "clicks": 200 * S})
    assert b0.watermark_before == BEGINNING_OF_TIME
    assert b0.watermark_after == 195 * S  # clicks: 200 - 5
    assert b0.states["clicks"] == InputState(200 * S, 100 * S)
    b1 = advance(INPUTS, DELAYS, b0, 1, 130 * S, {"impressions": 600 * S})
    assert b1.watermark_before == 195 * S and b1.watermark_after == 195 * S
    assert b1.states["clicks"] == b0.states["clicks"]  # nothing new: unchanged
    b2 = advance(INPUTS, DELAYS, b1, 2, 160 * S, {})  # clicks silent for 60 s: idle
    assert b2.watermark_after == 590 * S  # impressions: 600 - 10
    b3 = advance(INPUTS, DELAYS, b2, 3, 170 * S, {"clicks": 300 * S})  # back, behind
    assert b3.watermark_after == 590 * S  # the watermark never moves back


def test_an_input_without_data_holds_the_watermark_at_the_beginning() -> None:
    """Without an idle timeout, an input that never delivered holds the watermark at the
    beginning of time (nothing judged late too early)."""
    inputs = Inputs(("impressions", "clicks"))
    b0 = advance(inputs, DELAYS, None, 0, 100 * S, {"impressions": 500 * S})
    assert b0.watermark_after == BEGINNING_OF_TIME
    b1 = advance(inputs, DELAYS, b0, 1, 10_000 * S, {})
    assert b1.watermark_after == BEGINNING_OF_TIME


def test_unknown_inputs_and_missing_delays_are_refused() -> None:
    with pytest.raises(ValueError, match="event times of inputs \\['views'\\]"):
        advance(INPUTS, DELAYS, None, 0, 0, {"views": 1})
    with pytest.raises(ValueError, match="the delays of inputs"):
        advance(INPUTS, {"clicks": 0}, None, 0, 0, {})


def test_a_replayed_batch_reads_back_its_first_attempts_clocks(tmp_path) -> None:
    """The first attempt's file wins: a replay that computed other clocks (another wall clock)
    runs at the first attempt's; the next batch starts from the last file before it."""
    files = CheckpointFiles.at(str(tmp_path))
    assert latest_before(files, 0) is None
    first = settle(files, advance(INPUTS, DELAYS, None, 0, 100 * S, {"clicks": 200 * S}))
    replay = advance(INPUTS, DELAYS, None, 0, 999 * S, {"clicks": 200 * S})
    assert replay != first
    assert settle(files, replay) == first
    assert latest_before(files, 1) == first and latest_before(files, 0) is None
    assert BatchInputClocks.from_json(first.to_json()) == first


def test_the_drain_raises_every_input_and_is_no_data() -> None:
    """A control row's time (the drain's end of time) raises each input's largest event time,
    one that never delivered included, but delivers nothing: idleness still counts from the
    last data."""
    b0 = advance(INPUTS, DELAYS, None, 0, 100 * S, {"impressions": 500 * S})
    end = 10**18
    b1 = advance(INPUTS, DELAYS, b0, 1, 150 * S, {}, control=end)
    assert b1.watermark_after == end - 10 * S  # impressions (clicks, never heard of, idle)
    assert b1.states["impressions"] == InputState(end, 100 * S)
    assert b1.states["clicks"] == InputState(end, 0)


def test_each_lane_of_a_batch_is_its_input_and_the_last_the_control_rows() -> None:
    """What the operator tasks apply (InputsAtBatch.after): lane i is input i's largest clock
    (µs, taken in whole ms as Spark's rule does), lane 2 of two inputs the control rows'."""
    at = InputsAtBatch(INPUTS, (10 * S, 5 * S), None, 0, 100 * S)
    assert at.watermark_ms == 0  # none yet
    after = at.after({0: 500 * S + 999, 1: 200 * S + 1})
    assert after.states["impressions"].max_event_time == 500 * S  # whole ms
    assert after.watermark_after == 195 * S
    drained = InputsAtBatch(INPUTS, (10 * S, 5 * S), after, 1, 110 * S).after({2: 10**15})
    assert drained.watermark_after == 10**15 - 10 * S
    assert drained.states["clicks"].last_data == 100 * S


def test_an_input_whose_writers_note_its_watermark_follows_their_marks_only() -> None:
    """``watermark.policy = "writer_noted"`` for clicks: their elements' event times move
    nothing (they only show the input is alive); the writers' watermark (lane 2 + 1 + 1, clicks'
    noted lane) raises clicks' own, and is data for idleness too."""
    at = InputsAtBatch(INPUTS, (10 * S, 0), None, 0, 100 * S, frozenset({"clicks"}))
    b0 = at.after({0: 500 * S, 1: 900 * S})  # clicks' elements reach 900 s: no mark yet
    assert b0.states["clicks"] == InputState(None, 100 * S)
    assert b0.watermark_after == BEGINNING_OF_TIME  # clicks hold it: their writers said nothing
    b1 = InputsAtBatch(INPUTS, (10 * S, 0), b0, 1, 150 * S, frozenset({"clicks"})).after(
        {4: 300 * S}  # the writers' control row: clicks are complete up to 300 s
    )
    assert b1.states["clicks"] == InputState(300 * S, 150 * S)
    assert b1.watermark_after == 300 * S  # the minimum: impressions 490, clicks 300
    # an input without writers keeps its elements' clock: the same lanes, no writers
    plain = InputsAtBatch(INPUTS, (10 * S, 0), None, 0, 100 * S).after({0: 500 * S, 1: 900 * S})
    assert plain.watermark_after == 490 * S
