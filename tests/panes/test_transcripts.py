"""Trigger and pane semantics pinned by transcripts.

Each transcript drives a :class:`Simulator` with one key through bundles (``in``: event times,
each element's value is its timestamp), watermark moves (``wm``) and processing-time moves
(``pt``), and lists the panes every step fires, written as
``[start,end) values @timestamp TIMING index/nonspeculative_index`` (``-`` marks a retraction,
``last`` a final pane). Values are shown sorted. See ``docs/semantics.md`` for the rules.
"""

from __future__ import annotations

import pytest

from panes import (
    AccumulationMode,
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    Always,
    ClosingBehavior,
    DefaultTrigger,
    FixedWindows,
    GlobalWindows,
    Never,
    OnTimeBehavior,
    OrFinally,
    Repeatedly,
    Sessions,
    Simulator,
    TimestampCombiner,
    Windowing,
    combiners,
    parse_trigger,
)
from tests.panes.support import describe

DISCARDING = AccumulationMode.DISCARDING
ACCUMULATING = AccumulationMode.ACCUMULATING
RETRACTING = AccumulationMode.ACCUMULATING_AND_RETRACTING


def play(windowing, steps, combine_fn=None):
    """Run ``steps`` and return (step, panes fired) pairs plus the simulator."""
    sim = Simulator(windowing, combine_fn or combiners.to_list())
    log = []
    for kind, arg in steps:
        if kind == "in":
            out = sim.add_elements([("k", t, t) for t in arg])
        elif kind == "wm":
            out = sim.advance_watermark(arg)
        elif kind == "pt":
            out = sim.advance_processing_time(arg)
        else:
            raise ValueError(kind)
        log.append([describe(p) for p in out])
    return log, sim


def check(windowing, transcript, combine_fn=None):
    """``transcript``: list of (kind, arg, expected panes)."""
    log, sim = play(windowing, [(k, a) for k, a, _ in transcript], combine_fn)
    for (kind, arg, expected), got in zip(transcript, log, strict=True):
        assert got == expected, f"after {kind} {arg}: expected {expected}, got {got}"
    return sim


def fixed(trigger, mode=DISCARDING, lateness=100, **kw):
    return Windowing(
        FixedWindows(10), trigger=trigger, accumulation_mode=mode, allowed_lateness=lateness, **kw
    )


# -- leaves ------------------------------------------------------------------------------------


def test_after_count_fires_once_then_its_window_is_closed():
    sim = check(
        fixed(AfterCount(2)),
        [
            ("in", [1], []),
            ("in", [2], ["[0,10) [1,2] @9 EARLY 0/-1 last"]),
            ("in", [3], []),
        ],
    )
    assert [(d.value, d.reason.split(":")[0]) for d in sim.dropped] == [(3, "closed")]


def test_triggers_are_evaluated_once_per_bundle():
    check(
        fixed(Repeatedly(AfterCount(2))),
        [
            ("in", [1, 2, 3], ["[0,10) [1,2,3] @9 EARLY 0/-1"]),
            ("in", [4], []),
            ("in", [5], ["[0,10) [4,5] @9 EARLY 1/-1"]),
        ],
    )


def test_after_processing_time_counts_from_the_first_element_of_the_pane():
    check(
        fixed(Repeatedly(AfterProcessingTime(5))),
        [
            ("in", [1], []),
            ("pt", 4, []),
            ("pt", 5, ["[0,10) [1] @9 EARLY 0/-1"]),
            ("pt", 7, []),
            ("in", [2], []),
            ("pt", 9, []),
            ("in", [3], []),
            ("pt", 12, ["[0,10) [2,3] @9 EARLY 1/-1"]),
        ],
    )


def test_always_fires_for_every_bundle_and_never_only_at_expiry():
    check(
        fixed(Always(), lateness=0),
        [
            ("in", [1], ["[0,10) [1] @9 EARLY 0/-1"]),
            ("in", [2, 3], ["[0,10) [2,3] @9 EARLY 1/-1"]),
            ("wm", 20, []),
        ],
    )
    check(
        fixed(Never(), lateness=5),
        [
            ("in", [1, 2], []),
            ("wm", 15, []),
            ("wm", 16, ["[0,10) [1,2] @9 ON_TIME 0/0 last"]),
        ],
    )


# -- composites --------------------------------------------------------------------------------


def test_after_each_passes_every_element_to_all_its_subtriggers():
    # The second subtrigger already counted the first two elements (spec: AfterEach keeps the
    # state of all subtriggers), so it fires at the third element, not the fifth.
    check(
        fixed(AfterEach(AfterCount(2), AfterCount(3))),
        [
            ("in", [1], []),
            ("in", [2], ["[0,10) [1,2] @9 EARLY 0/-1"]),
            ("in", [3], ["[0,10) [3] @9 EARLY 1/-1 last"]),
        ],
    )


def test_or_finally_main_branch_sees_elements_since_it_fired_the_finally_branch_sees_all():
    check(
        fixed(OrFinally(Repeatedly(AfterCount(2)), AfterCount(5))),
        [
            ("in", [1], []),
            ("in", [2], ["[0,10) [1,2] @9 EARLY 0/-1"]),
            ("in", [3], []),
            ("in", [4], ["[0,10) [3,4] @9 EARLY 1/-1"]),
            ("in", [5], ["[0,10) [5] @9 EARLY 2/-1 last"]),
        ],
    )


def test_repeatedly_clears_its_child_when_the_child_finishes():
    check(
        fixed(Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(10)))),
        [
            ("in", [1, 2], []),
            ("pt", 10, ["[0,10) [1,2] @9 EARLY 0/-1"]),
            # The count of the finished AfterAny was cleared: two more are not enough.
            ("in", [3, 4], []),
            ("in", [5], ["[0,10) [3,4,5] @9 EARLY 1/-1"]),
        ],
    )


def test_after_all_waits_for_every_subtrigger():
    check(
        fixed(AfterAll(AfterCount(2), AfterWatermark())),
        [
            ("in", [1], []),
            ("wm", 10, []),
            ("in", [2], ["[0,10) [1,2] @9 LATE 0/0 last"]),
        ],
    )


def test_after_any_fires_on_the_first_subtrigger():
    check(
        fixed(AfterAny(AfterCount(3), AfterWatermark())),
        [
            ("in", [1, 2], []),
            ("wm", 10, ["[0,10) [1,2] @9 ON_TIME 0/0 last"]),
        ],
    )


def test_after_watermark_early_on_time_late():
    check(
        fixed(AfterWatermark(early=AfterCount(2), late=AfterCount(1)), ACCUMULATING),
        [
            ("in", [1], []),
            ("in", [2], ["[0,10) [1,2] @9 EARLY 0/-1"]),
            ("in", [3], []),
            ("wm", 10, ["[0,10) [1,2,3] @9 ON_TIME 1/0"]),
            ("in", [4], ["[0,10) [1,2,3,4] @9 LATE 2/1"]),
            ("in", [5], ["[0,10) [1,2,3,4,5] @9 LATE 3/2"]),
            ("wm", 200, []),
        ],
    )


def test_the_late_trigger_sees_only_elements_after_the_end_of_the_window():
    check(
        fixed(AfterWatermark(early=AfterCount(5), late=AfterCount(2))),
        [
            ("in", [1, 2, 3], []),
            ("wm", 10, ["[0,10) [1,2,3] @9 ON_TIME 0/0"]),
            ("in", [4], []),
            ("in", [5], ["[0,10) [4,5] @9 LATE 1/1"]),
        ],
    )


def test_default_trigger_fires_on_time_then_once_per_late_bundle_then_expires():
    sim = check(
        fixed(DefaultTrigger(), lateness=10),
        [
            ("in", [1, 2], []),
            ("wm", 9, []),
            ("wm", 10, ["[0,10) [1,2] @9 ON_TIME 0/0"]),
            ("in", [3], ["[0,10) [3] @9 LATE 1/1"]),
            ("wm", 15, []),
            ("wm", 21, []),
            ("in", [4], []),
        ],
    )
    assert [(d.value, d.reason.split(":")[0]) for d in sim.dropped] == [(4, "expired")]


def test_global_window_fires_at_the_end_of_time():
    check(
        Windowing(GlobalWindows()),
        [
            ("in", [1, 100], []),
            ("wm", 10**15, []),
        ],
    )
    _, sim = play(Windowing(GlobalWindows()), [("in", [1, 100])])
    panes = sim.advance_watermark(2**63 - 1)
    assert [(p.value, p.pane.timing.name) for p in panes] == [([1, 100], "ON_TIME")]


# -- pane policies -----------------------------------------------------------------------------


def test_on_time_behavior_decides_on_empty_on_time_panes():
    early = AfterWatermark(early=AfterCount(1))
    check(
        fixed(early, on_time_behavior=OnTimeBehavior.FIRE_ALWAYS),
        [
            ("in", [1], ["[0,10) [1] @9 EARLY 0/-1"]),
            ("wm", 10, ["[0,10) [] @9 ON_TIME 1/0 last"]),
        ],
    )
    check(
        fixed(early, on_time_behavior=OnTimeBehavior.FIRE_IF_NON_EMPTY),
        [
            ("in", [1], ["[0,10) [1] @9 EARLY 0/-1"]),
            ("wm", 10, []),
        ],
    )


def test_closing_behavior_decides_on_an_empty_final_pane_at_expiry():
    trigger = Repeatedly(AfterCount(2))
    check(
        fixed(trigger, lateness=5),
        [
            ("in", [1, 2], ["[0,10) [1,2] @9 EARLY 0/-1"]),
            ("in", [3], []),
            ("wm", 16, ["[0,10) [3] @9 ON_TIME 1/0 last"]),
        ],
    )
    check(
        fixed(trigger, lateness=5),
        [
            ("in", [1, 2], ["[0,10) [1,2] @9 EARLY 0/-1"]),
            ("wm", 16, []),
        ],
    )
    check(
        fixed(trigger, lateness=5, closing_behavior=ClosingBehavior.FIRE_ALWAYS),
        [
            ("in", [1, 2], ["[0,10) [1,2] @9 EARLY 0/-1"]),
            ("wm", 16, ["[0,10) [] @9 ON_TIME 1/0 last"]),
        ],
    )


def test_timestamp_combiners_and_data_behind_the_watermark():
    early = AfterWatermark(early=AfterCount(1))
    check(
        fixed(early, timestamp_combiner=TimestampCombiner.EARLIEST),
        [
            ("in", [5], ["[0,10) [5] @5 EARLY 0/-1"]),
            # Before the on-time pane the hold is kept: the earliest so far.
            ("in", [3], ["[0,10) [3] @3 EARLY 1/-1"]),
            ("wm", 10, ["[0,10) [] @3 ON_TIME 2/0 last"]),
        ],
    )
    check(
        fixed(Repeatedly(AfterCount(1)), timestamp_combiner=TimestampCombiner.LATEST),
        [
            ("in", [3, 5], ["[0,10) [3,5] @5 EARLY 0/-1"]),
            # 2 is behind the watermark: it holds nothing, the pane is output at the window's end.
            ("wm", 4, []),
            ("in", [2], ["[0,10) [2] @9 EARLY 1/-1"]),
        ],
    )


# -- merging windows ---------------------------------------------------------------------------


def sessions(trigger, mode, lateness=100, **kw):
    return Windowing(
        Sessions(10), trigger=trigger, accumulation_mode=mode, allowed_lateness=lateness, **kw
    )


@pytest.mark.parametrize(
    ("mode", "merged"),
    [
        (DISCARDING, ["[0,25) [8] @24 EARLY 0/-1 supersedes [0,10),[15,25)"]),
        (ACCUMULATING, ["[0,25) [0,8,15] @24 EARLY 0/-1 supersedes [0,10),[15,25)"]),
        (
            RETRACTING,
            [
                "-[0,10) [0] @9 EARLY 0/-1",
                "-[15,25) [15] @24 EARLY 0/-1",
                "[0,25) [0,8,15] @24 EARLY 0/-1 supersedes [0,10),[15,25)",
            ],
        ),
    ],
)
def test_a_merged_window_names_what_it_supersedes_in_every_mode(mode, merged):
    check(
        sessions(Repeatedly(AfterCount(1)), mode),
        [
            ("in", [0], ["[0,10) [0] @9 EARLY 0/-1"]),
            ("in", [15], ["[15,25) [15] @24 EARLY 0/-1"]),
            ("in", [8], merged),
        ],
    )


def test_retracting_mode_retracts_the_previous_value_of_a_refined_window():
    check(
        fixed(Repeatedly(AfterCount(1)), RETRACTING),
        [
            ("in", [1], ["[0,10) [1] @9 EARLY 0/-1"]),
            ("in", [2], ["-[0,10) [1] @9 EARLY 0/-1", "[0,10) [1,2] @9 EARLY 1/-1"]),
        ],
    )


def test_several_on_time_panes_around_merges_but_one_per_merged_window():
    """004: consumers must expect several ON_TIME panes, only one of them for the merged
    window."""
    check(
        sessions(DefaultTrigger(), ACCUMULATING),
        [
            ("in", [0], []),
            ("wm", 10, ["[0,10) [0] @9 ON_TIME 0/0"]),
            ("in", [5], []),
            ("wm", 15, ["[0,15) [0,5] @14 ON_TIME 0/0 supersedes [0,10)"]),
        ],
    )


def test_an_on_time_pane_can_be_early_for_the_merged_window():
    """004: the end of the merged window is later, so its trigger is rewound to its early
    phase: the next pane is EARLY."""
    trigger = AfterWatermark(early=AfterCount(1), late=AfterCount(1))
    check(
        sessions(trigger, ACCUMULATING),
        [
            ("in", [0], ["[0,10) [0] @9 EARLY 0/-1"]),
            ("wm", 10, ["[0,10) [0] @9 ON_TIME 1/0"]),
            ("in", [5], ["[0,15) [0,5] @14 EARLY 0/-1 supersedes [0,10)"]),
            ("wm", 15, ["[0,15) [0,5] @14 ON_TIME 1/0"]),
        ],
    )


def test_a_late_pane_can_be_on_time_for_the_merged_window():
    trigger = AfterWatermark(late=AfterCount(1))
    check(
        sessions(trigger, ACCUMULATING),
        [
            ("in", [0], []),
            ("wm", 10, ["[0,10) [0] @9 ON_TIME 0/0"]),
            # Merged into [-5,10), whose end has passed: still late.
            ("in", [-5], ["[-5,10) [-5,0] @9 LATE 0/0 supersedes [0,10)"]),
            # Merged into [-5,18), whose end has not passed: rewound, and on time when it does.
            ("in", [8], []),
            ("wm", 18, ["[-5,18) [-5,0,8] @17 ON_TIME 0/0 supersedes [-5,10)"]),
        ],
    )


def test_a_merge_into_a_window_whose_end_has_passed_is_not_rewound():
    trigger = AfterWatermark(late=AfterCount(2))
    check(
        sessions(trigger, ACCUMULATING),
        [
            ("in", [0], []),
            ("in", [30], []),
            ("wm", 40, ["[0,10) [0] @9 ON_TIME 0/0", "[30,40) [30] @39 ON_TIME 0/0"]),
            # [5,15) joins [0,10) after both ends passed: the late phase stays, the late trigger
            # (two elements since the end of the window) waits for a second element.
            ("in", [5], []),
            ("in", [7], ["[0,17) [0,5,7] @16 LATE 0/0 supersedes [0,10)"]),
        ],
    )


def test_text_form_drives_the_same_semantics():
    text = "AfterWatermark(early=AfterCount(2), late=AfterCount(1))"
    assert fixed(parse_trigger(text)) == fixed(
        AfterWatermark(early=AfterCount(2), late=AfterCount(1))
    )
