"""The Dataflow paper's session example (seed 000, the paragraph after Figure 14).

Sessions with a one-minute gap, early panes once a minute of processing time, on-time panes at
the watermark, late panes for every late element, accumulating & retracting, summing values.
The paper's text: singleton sessions 5 and 7 at the first minute; a session of 10 (3, 4, 3) at
the second; the 8 joins the 7 and 10 sessions, and when the watermark passes the merged session
its parts are retracted for 25; the late 9 joins the 5 and 25 sessions (-5, -25, +39); and a
similar dance for 3, 8 and 1 ends with -3, +12. The input below is one that is consistent with
that text (event times in seconds; each step notes the processing time).
"""

from __future__ import annotations

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterProcessingTime,
    AfterWatermark,
    OnTimeBehavior,
    Sessions,
    Simulator,
    Windowing,
    combiners,
)
from panes.fold import fold

S = 1_000_000


def test_the_paper_session_example_with_retractions():
    windowing = Windowing(
        Sessions(60 * S),
        trigger=AfterWatermark(early=AfterProcessingTime(60 * S), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
        allowed_lateness=3600 * S,
        # The 5 session was already emitted at the first minute: an on-time pane with nothing
        # new would retract and re-emit it (-5, +5), which the paper's text does not show.
        on_time_behavior=OnTimeBehavior.FIRE_IF_NON_EMPTY,
    )
    sim = Simulator(windowing, combiners.sum())

    def at(processing_s, *, elements=(), watermark_s=None):
        fired = sim.advance(processing_time=processing_s * S)
        fired += sim.add_elements([("k", v, t * S) for v, t in elements])
        if watermark_s is not None:
            fired += sim.advance_watermark(watermark_s * S)
        return " ".join(f"{'-' if p.is_retraction else '+'}{p.value}" for p in fired)

    groups = [
        at(0, elements=[(5, 10), (7, 120)]),
        at(60),  # first minute of processing time
        at(70, elements=[(3, 220), (4, 230), (3, 240)]),
        at(130),  # second minute
        at(150, elements=[(8, 170)]),  # joins the 7 and 10 sessions
        at(200, watermark_s=310),  # the watermark passes the merged session
        at(250, elements=[(9, 65)]),  # late: joins the 5 and 25 sessions
        at(300, elements=[(3, 400)]),
        at(360),
        at(370, elements=[(8, 430), (1, 440)]),
        at(380, watermark_s=600),
    ]
    assert [g for g in groups if g] == [
        "+5 +7",
        "+10",
        "-7 -10 +25",
        "-5 -25 +39",
        "+3",
        "-3 +12",
    ]
    sim.advance_watermark(END_OF_TIME)
    view = fold(sim.panes, windowing.accumulation_mode, combiners.sum())
    assert sorted(view.values()) == [12, 39]
    assert sum(view.values()) == 51
    assert [(w.start // S, w.end // S) for _, w in sorted(view)] == [(10, 300), (400, 500)]
