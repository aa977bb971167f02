"""Conformance scenarios shared by the Beam generator and the panestore conformance test.

Pure data: this module imports neither Beam nor panes. It is read by
``beam_generate.py`` (under a separate Beam venv) to produce ``beam_expected.json``, and by
``test_beam_conformance.py`` to replay the same transcripts on ``panes.Simulator``.

Conventions
-----------
* All times and durations are integer microseconds (``S`` = one second).
* ``window``: ``{"type": "fixed", "size": us}``, ``{"type": "sliding", "size": us, "period": us}``,
  ``{"type": "sessions", "gap": us}`` or ``{"type": "global"}``.
* ``trigger``: panestore's trigger text form (``panes.parse_trigger``).
* ``accumulation``: ``DISCARDING`` or ``ACCUMULATING``.
* ``timestamp_combiner``: ``END_OF_WINDOW``, ``EARLIEST`` or ``LATEST``.
* ``on_time_behavior`` / ``closing_behavior``: panestore-only options (``FIRE_ALWAYS`` or
  ``FIRE_IF_NON_EMPTY``); they decide which of Beam's (possibly empty) panes panestore emits.
* ``transcript``: steps, each exactly one of
  ``{"input": [ts, ...]}`` (key ``"k"``, value = timestamp) or ``{"input": [[key, ts], ...]}``
  (one bundle), ``{"watermark": ts}``, ``{"processing_time": ts}``.
* ``differences``: documented differences from Beam Python (numbers of the list in
  ``test_beam_conformance.py``) that really occur in this scenario, with a one-line reason.
  The test tolerates a difference only where it is declared, and fails if a declared difference
  does not actually show up.
* ``origin``: where a scenario mirrors Beam's ``testing/data/trigger_transcripts.yaml`` (there
  the unit is one second; here seconds are scaled to microseconds).

Processing times and processing-time delays are whole seconds: Beam Python's test clock and its
AfterProcessingTime timers work in float seconds.
"""

S = 1_000_000
MIN = 60 * S

_DEFAULTS = {
    "accumulation": "ACCUMULATING",
    "timestamp_combiner": "END_OF_WINDOW",
    "allowed_lateness": 0,
    "on_time_behavior": "FIRE_ALWAYS",
    "closing_behavior": "FIRE_IF_NON_EMPTY",
    "differences": {},
    "origin": None,
}

FIXED10 = {"type": "fixed", "size": 10 * S}


def _s(*seconds):
    """Timestamps in whole seconds -> list of microsecond timestamps."""
    return [int(x * S) for x in seconds]


_SCENARIOS = [
    # ---- mirrors of Beam's trigger_transcripts.yaml -------------------------------------------
    {
        "name": "fixed_default",
        "origin": "trigger_transcripts.yaml:fixed_default",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "transcript": [{"input": _s(1, 2, 3, 10, 11)}, {"watermark": 25 * S}],
    },
    {
        "name": "fixed_default_late_data",
        "origin": "trigger_transcripts.yaml:fixed_default_late_data",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "allowed_lateness": 100 * S,
        "transcript": [
            {"input": _s(1, 2, 3, 10, 11, 25)},
            {"watermark": 100 * S},
            {"input": _s(7)},
            {"watermark": 200 * S},
        ],
    },
    {
        "name": "fixed_drop_late_data_after_allowed_lateness",
        "origin": "trigger_transcripts.yaml:fixed_drop_late_data_after_allowed_lateness",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
        "allowed_lateness": 20 * S,
        "transcript": [
            {"input": _s(1, 2, 10, 11, 80, 81)},
            {"watermark": 100 * S},
            {"input": _s(7, 8)},
            {"input": _s(17, 18)},
            {"input": _s(82)},
        ],
    },
    {
        "name": "timestamp_combiner_earliest",
        "origin": "trigger_transcripts.yaml:timestamp_combiner_earliest",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "EARLIEST",
        "transcript": [{"input": _s(1, 2, 3, 10, 11, 25)}, {"watermark": 100 * S}],
    },
    {
        "name": "timestamp_combiner_latest",
        "origin": "trigger_transcripts.yaml:timestamp_combiner_latest",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "LATEST",
        "transcript": [{"input": _s(1, 2, 3, 10, 11, 25)}, {"watermark": 100 * S}],
    },
    {
        "name": "early_late_sessions",
        "origin": "trigger_transcripts.yaml:early_late_sessions",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(3))",
        "allowed_lateness": 100 * S,
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3)},
            {"input": _s(4)},
            {"input": _s(5)},
            {"watermark": 100 * S},
            {"input": _s(1)},
            {"input": _s(3, 4)},
        ],
    },
    {
        "name": "discarding_early_fixed",
        "origin": "trigger_transcripts.yaml:discarding_early_fixed",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "accumulation": "DISCARDING",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(4)},
            {"input": _s(14)},
            {"input": _s(5)},
            {"input": _s(18)},
            {"input": _s(6)},
            {"watermark": 100 * S},
        ],
    },
    {
        "name": "garbage_collection",
        "origin": "trigger_transcripts.yaml:garbage_collection",
        "window": FIXED10,
        "trigger": "AfterCount(2)",
        "accumulation": "DISCARDING",
        "allowed_lateness": 10 * S,
        "transcript": [{"input": _s(1, 2, 3, 10, 11, 25)}, {"watermark": 100 * S}],
        "differences": {
            5: "window [20s,30s) holds unfired [25s]; panestore emits it when GC'd at 100s, "
            "Beam Python never does",
        },
    },
    {
        "name": "known_late_data_watermark",
        "origin": "trigger_transcripts.yaml:known_late_data_watermark",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "EARLIEST",
        "transcript": [{"watermark": 5 * S}, {"input": _s(2, 3, 7, 8)}, {"watermark": 11 * S}],
    },
    {
        "name": "known_late_data_no_watermark_hold_possible",
        "origin": "trigger_transcripts.yaml:known_late_data_no_watermark_hold_possible",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "EARLIEST",
        "transcript": [{"watermark": 8 * S}, {"input": _s(2, 3, 7)}, {"watermark": 11 * S}],
    },
    # ---- fixed windows ------------------------------------------------------------------------
    {
        "name": "fixed_default_two_keys",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "transcript": [
            {"input": [["a", 1 * S], ["b", 2 * S], ["a", 12 * S]]},
            {"input": [["b", 3 * S], ["b", 15 * S]]},
            {"watermark": 10 * S},
            {"watermark": 30 * S},
        ],
    },
    {
        "name": "latest_with_data_behind_watermark",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "LATEST",
        "transcript": [{"watermark": 5 * S}, {"input": _s(2, 3, 7, 8)}, {"watermark": 11 * S}],
    },
    {
        "name": "latest_all_behind_watermark",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "LATEST",
        "transcript": [{"watermark": 8 * S}, {"input": _s(2, 3, 7)}, {"watermark": 11 * S}],
    },
    {
        "name": "earliest_early_on_time_late",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
        "timestamp_combiner": "EARLIEST",
        "allowed_lateness": 30 * S,
        "transcript": [
            {"input": _s(5, 6)},
            {"input": _s(3)},
            {"watermark": 4 * S},
            {"input": _s(2, 9)},
            {"watermark": 12 * S},
            {"input": _s(1)},
            {"input": _s(8, 4)},
        ],
    },
    {
        "name": "early_count_accumulating_eow",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3)},
            {"input": _s(4, 15)},
            {"input": _s(16, 17)},
            {"watermark": 10 * S},
            {"watermark": 20 * S},
        ],
    },
    {
        "name": "discarding_early_fixed_on_time_if_non_empty",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "accumulation": "DISCARDING",
        "on_time_behavior": "FIRE_IF_NON_EMPTY",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(4)},
            {"input": _s(14)},
            {"input": _s(5)},
            {"input": _s(18)},
            {"input": _s(6)},
            {"watermark": 100 * S},
        ],
    },
    {
        "name": "late_panes_discarding",
        "window": FIXED10,
        "trigger": "AfterWatermark(late=AfterCount(2))",
        "accumulation": "DISCARDING",
        "allowed_lateness": 50 * S,
        "transcript": [
            {"input": _s(1, 2)},
            {"watermark": 20 * S},
            {"input": _s(3)},
            {"input": _s(4)},
            {"input": _s(5, 6, 7)},
            {"watermark": 55 * S},
            {"input": _s(8)},
            {"input": _s(9)},
            {"watermark": 61 * S},
            {"input": _s(1, 2)},
        ],
    },
    {
        "name": "late_panes_accumulating_with_drops",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
        "allowed_lateness": 20 * S,
        "transcript": [
            {"input": _s(1, 2, 3, 4, 11)},
            {"watermark": 15 * S},
            {"input": _s(5, 12)},
            {"watermark": 31 * S},
            {"input": _s(6, 13)},
            {"input": _s(7)},
        ],
    },
    {
        "name": "late_element_new_window",
        "window": FIXED10,
        "trigger": "AfterWatermark(late=AfterCount(1))",
        "allowed_lateness": 60 * S,
        # The window's first element arrives after the watermark passed its end.
        "transcript": [{"watermark": 30 * S}, {"input": _s(5)}, {"input": _s(6, 7)}],
    },
    {
        "name": "default_trigger_late_every_bundle",
        "window": FIXED10,
        "trigger": "DefaultTrigger()",
        "accumulation": "DISCARDING",
        "allowed_lateness": 60 * S,
        "transcript": [
            {"input": _s(1, 2)},
            {"watermark": 30 * S},
            {"input": _s(3)},
            {"input": _s(4, 5)},
            {"watermark": 40 * S},
            {"input": _s(6)},
        ],
    },
    {
        "name": "repeatedly_count_fixed_discarding",
        "window": FIXED10,
        "trigger": "Repeatedly(AfterCount(3))",
        "accumulation": "DISCARDING",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3, 4)},
            {"input": _s(11, 12, 13, 5)},
            {"input": _s(6)},
        ],
    },
    {
        "name": "always_fixed_discarding",
        "window": FIXED10,
        "trigger": "Always()",
        "accumulation": "DISCARDING",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3, 14)},
            {"input": _s(15)},
            {"watermark": 30 * S},
        ],
    },
    {
        "name": "never_fixed_gc",
        "window": FIXED10,
        "trigger": "Never()",
        "transcript": [{"input": _s(1, 2, 13)}, {"watermark": 15 * S}, {"watermark": 25 * S}],
        "differences": {
            5: "Never() never fires; panestore emits each window's buffered data when it is "
            "garbage-collected, Beam Python drops it",
        },
    },
    # ---- composite triggers -------------------------------------------------------------------
    {
        "name": "after_each_count_then_watermark",
        "window": FIXED10,
        "trigger": "AfterEach(AfterCount(2), AfterWatermark())",
        # An element reaches every window after its AfterCount(2) fired, so Beam Python's
        # AfterWatermark (which only sees elements once it is current) also gets its timer:
        # difference 2 does not show.
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3)},
            {"input": _s(11, 12, 13)},
            {"input": _s(14)},
            {"watermark": 25 * S},
        ],
    },
    {
        "name": "or_finally_count_watermark",
        "window": FIXED10,
        "trigger": "OrFinally(Repeatedly(AfterCount(2)), AfterWatermark())",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3)},
            {"input": _s(4, 5, 11)},
            {"watermark": 20 * S},
        ],
    },
    {
        "name": "after_all_count_watermark",
        "window": FIXED10,
        "trigger": "AfterAll(AfterCount(2), AfterWatermark())",
        "allowed_lateness": 60 * S,
        "transcript": [
            {"input": _s(1, 2, 11)},
            {"watermark": 20 * S},
            {"input": _s(12)},
            {"input": _s(3)},
        ],
    },
    {
        "name": "after_any_count_watermark",
        "window": FIXED10,
        "trigger": "AfterAny(AfterCount(3), AfterWatermark())",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3, 11)},
            {"watermark": 20 * S},
        ],
    },
    # ---- sliding windows ----------------------------------------------------------------------
    {
        "name": "sliding_default",
        "window": {"type": "sliding", "size": 10 * S, "period": 5 * S},
        "trigger": "DefaultTrigger()",
        "transcript": [{"input": _s(1, 6, 7, 12)}, {"watermark": 10 * S}, {"watermark": 30 * S}],
    },
    {
        "name": "sliding_early_accumulating_earliest",
        "window": {"type": "sliding", "size": 10 * S, "period": 5 * S},
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "timestamp_combiner": "EARLIEST",
        "transcript": [
            {"input": _s(6)},
            {"input": _s(3, 8)},
            {"input": _s(9, 11)},
            {"watermark": 30 * S},
        ],
    },
    {
        "name": "sliding_late_discarding",
        "window": {"type": "sliding", "size": 10 * S, "period": 5 * S},
        "trigger": "AfterWatermark(late=AfterCount(1))",
        "accumulation": "DISCARDING",
        "allowed_lateness": 20 * S,
        "transcript": [{"input": _s(6, 7)}, {"watermark": 16 * S}, {"input": _s(8)}],
    },
    {
        "name": "sliding_partially_expired",
        "window": {"type": "sliding", "size": 10 * S, "period": 5 * S},
        "trigger": "DefaultTrigger()",
        "allowed_lateness": 3 * S,
        # 3s belongs to [-5s,5s) (expired at watermark 12s) and [0s,10s) (not yet expired).
        "transcript": [{"watermark": 12 * S}, {"input": _s(3)}, {"watermark": 14 * S}],
    },
    # ---- sessions -----------------------------------------------------------------------------
    {
        "name": "sessions_default",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "DefaultTrigger()",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(20)},
            {"input": _s(5)},
            {"watermark": 100 * S},
        ],
    },
    {
        "name": "sessions_bridge_merge_early",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "AfterWatermark(early=AfterCount(3))",
        "transcript": [
            {"input": _s(1)},
            {"input": _s(15)},
            {"input": _s(8)},
            {"input": _s(40)},
            {"watermark": 100 * S},
        ],
    },
    {
        "name": "sessions_merge_fired_windows_accumulating",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(20, 21)},
            {"input": _s(11)},
            {"watermark": 100 * S},
        ],
    },
    {
        "name": "sessions_merge_fired_windows_discarding",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "accumulation": "DISCARDING",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(20, 21)},
            {"input": _s(11)},
            {"watermark": 100 * S},
        ],
    },
    {
        "name": "sessions_latest_merge_two_keys",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "DefaultTrigger()",
        "timestamp_combiner": "LATEST",
        "transcript": [
            {"input": [["a", 5 * S], ["b", 5 * S]]},
            {"input": [["a", 1 * S], ["b", 12 * S]]},
            {"watermark": 50 * S},
        ],
    },
    {
        "name": "sessions_earliest_merge_early_panes",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "AfterWatermark(early=AfterCount(2))",
        "timestamp_combiner": "EARLIEST",
        "transcript": [
            {"input": _s(5, 7)},
            {"input": _s(30)},
            {"input": _s(21)},
            {"watermark": 3 * S},
            {"input": _s(4, 12)},
            {"watermark": 60 * S},
        ],
    },
    {
        "name": "sessions_late_merge_default",
        "window": {"type": "sessions", "gap": 10 * S},
        "trigger": "DefaultTrigger()",
        "allowed_lateness": 100 * S,
        "transcript": [
            {"input": _s(1, 4)},
            {"watermark": 50 * S},
            {"input": _s(2)},
            {"input": _s(10)},
            {"watermark": 200 * S},
            {"input": _s(3)},
        ],
    },
    # ---- global window and processing time ----------------------------------------------------
    {
        "name": "global_repeatedly_count_accumulating",
        "window": {"type": "global"},
        "trigger": "Repeatedly(AfterCount(3))",
        "transcript": [
            {"input": _s(1, 2)},
            {"input": _s(3)},
            {"input": _s(4, 5, 6, 7)},
            {"watermark": 100 * S},
            {"input": _s(8, 9, 10)},
        ],
    },
    {
        "name": "global_repeatedly_processing_time",
        "window": {"type": "global"},
        "trigger": "Repeatedly(AfterProcessingTime(10s))",
        "accumulation": "DISCARDING",
        "transcript": [
            {"processing_time": 1 * S},
            {"input": _s(1, 2)},
            {"processing_time": 5 * S},
            {"input": _s(3)},
            {"processing_time": 10 * S},
            {"processing_time": 11 * S},
            {"input": _s(4)},
            {"processing_time": 20 * S},
            {"processing_time": 21 * S},
            {"processing_time": 40 * S},
        ],
    },
    {
        # Event times far above the processing times: Beam Python evaluates a processing-time
        # timer with the timer's (processing-time) timestamp standing in for the watermark, so
        # processing times are kept below every window end to give the EARLY panes it means.
        "name": "fixed_early_processing_time",
        "window": FIXED10,
        "trigger": "AfterWatermark(early=AfterProcessingTime(5s))",
        "transcript": [
            {"processing_time": 1 * S},
            {"input": _s(1001, 1002)},
            {"processing_time": 3 * S},
            {"input": _s(1003, 1014)},
            {"processing_time": 6 * S},
            {"processing_time": 8 * S},
            {"input": _s(1004)},
            {"processing_time": 12 * S},
            {"watermark": 1020 * S},
        ],
    },
]

SCENARIOS = [{**_DEFAULTS, **sc} for sc in _SCENARIOS]

_names = [sc["name"] for sc in SCENARIOS]
assert len(_names) == len(set(_names)), "scenario names must be unique"
