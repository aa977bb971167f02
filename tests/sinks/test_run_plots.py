"""The pictures of a pipeline's runs (``sinks.presentation.run_plots``): drawn from run records
alone (no lake, no Spark), from one run to hundreds, with runs that failed, were killed, drained or
never saw an event time."""

from __future__ import annotations

import random

import pytest

from sinks.lake.errors import InvalidRequest
from sinks.lake.lake_format import MAX_TIMESTAMP_US
from sinks.lake.run_history import FAILED, KILLED, OUTCOMES, STOPPED, SUCCEEDED, RunRecord
from sinks.presentation.key_plot import COLORS
from sinks.presentation.run_plots import (
    LATE_COLOR,
    OUTCOME_COLORS,
    REJECTED_COLOR,
    WATERMARK_COLOR,
    dropped_plot,
    duration_text,
    panes_plot,
    skew_plot,
    skew_text,
)
from tests.report_dom import pixels_of

MIN = 60_000_000
T0 = 1_780_000_000_000_000  # 2026


def runs_every_hour(outcomes, lag_min=(10,), late=(0,), rejected=(0,)) -> list[RunRecord]:
    """A run an hour, 2 minutes long, the watermark after run ``i`` ``lag_min[i]`` minutes
    behind its end (cycled), as are ``late`` and ``rejected``."""
    out = []
    for i, outcome in enumerate(outcomes):
        start = T0 + i * 60 * MIN
        out.append(
            RunRecord(
                run_id=f"r{i}",
                pipeline="clicks",
                started_us=start,
                ended_us=start + 2 * MIN,
                outcome=outcome,
                error="boom" if outcome == FAILED else None,
                early=2,
                on_time=3,
                late_panes=1,
                panes=6,
                late=late[i % len(late)],
                rejected=rejected[i % len(rejected)],
                watermark_after_us=start + 2 * MIN - lag_min[i % len(lag_min)] * MIN,
            )
        )
    return out


@pytest.mark.heavy
def test_three_runs_show_the_watermark_and_mark_the_failed_one(tmp_path):
    ok = skew_plot(runs_every_hour([SUCCEEDED] * 3), str(tmp_path / "ok.png"))
    failed = skew_plot(
        runs_every_hour([SUCCEEDED, FAILED, SUCCEEDED], late=(0, 5, 0), rejected=(0, 0, 2)),
        str(tmp_path / "failed.png"),
    )
    assert pixels_of(ok, WATERMARK_COLOR) > 500 and pixels_of(failed, WATERMARK_COLOR) > 500
    assert pixels_of(ok, OUTCOME_COLORS[FAILED]) == 0
    assert pixels_of(failed, OUTCOME_COLORS[FAILED]) > 100  # its band and its mark
    # the legend has a patch of each; the bars are the rest
    assert pixels_of(failed, LATE_COLOR) > pixels_of(ok, LATE_COLOR) + 100
    assert pixels_of(failed, REJECTED_COLOR) > pixels_of(ok, REJECTED_COLOR) + 100


@pytest.mark.heavy
def test_five_hundred_runs_of_every_outcome(tmp_path):
    rnd = random.Random(7)
    outcomes = [rnd.choices(OUTCOMES, weights=(90, 4, 3, 3))[0] for _ in range(500)]
    runs = runs_every_hour(
        outcomes, lag_min=[rnd.randint(1, 180) for _ in range(50)], late=(0, 3, 0, 9)
    )
    out = skew_plot(runs, str(tmp_path / "skew.png"))
    for outcome in (FAILED, STOPPED, SUCCEEDED):
        assert pixels_of(out, OUTCOME_COLORS[outcome]) > 50, outcome
    assert pixels_of(out, WATERMARK_COLOR) > 2000 and pixels_of(out, LATE_COLOR) > 100
    assert skew_text(runs) == duration_text(runs[-1].ended_us - runs[-1].watermark_after_us)


def test_the_skew_is_the_last_runs_that_has_a_watermark():
    runs = runs_every_hour([SUCCEEDED] * 2, lag_min=(30, 90))
    assert skew_text(runs) == "1.5 h"
    drained = RunRecord(
        run_id="d", pipeline="clicks", started_us=T0 + 3 * 60 * MIN, ended_us=None,
        outcome=KILLED, watermark_after_us=MAX_TIMESTAMP_US,
    )  # fmt: skip
    assert skew_text([*runs, drained]) == "1.5 h"  # drained (the end of time): no skew
    none = RunRecord(run_id="n", pipeline="clicks", started_us=T0, ended_us=T0, outcome=SUCCEEDED)
    assert skew_text([none]) is None


@pytest.mark.heavy
def test_drained_killed_and_watermark_less_runs_are_drawn(tmp_path):
    runs = [
        RunRecord(run_id="a", pipeline="p", started_us=T0, ended_us=T0 + MIN, outcome=SUCCEEDED),
        *runs_every_hour([KILLED, SUCCEEDED])[1:],
        RunRecord(
            run_id="k", pipeline="p", started_us=T0 + 3 * 60 * MIN, ended_us=None, outcome=KILLED
        ),
        RunRecord(
            run_id="z", pipeline="p", started_us=T0 + 4 * 60 * MIN, ended_us=T0 + 5 * 60 * MIN,
            outcome=SUCCEEDED, watermark_after_us=MAX_TIMESTAMP_US,
        ),
    ]  # fmt: skip
    out = skew_plot(runs, str(tmp_path / "s.png"))
    assert pixels_of(out, WATERMARK_COLOR) > 100  # the line, and the drained run's arrow
    only = skew_plot(runs[:1], str(tmp_path / "one.png"))  # no watermark at all
    assert pixels_of(only, OUTCOME_COLORS[SUCCEEDED]) > 0


@pytest.mark.heavy
def test_panes_by_timing_and_dropped_over_time(tmp_path):
    runs = runs_every_hour([SUCCEEDED] * 4, late=(1, 0), rejected=(0, 2))
    panes = panes_plot(runs, str(tmp_path / "panes.png"))
    for timing in ("EARLY", "ON_TIME", "LATE"):
        assert pixels_of(panes, COLORS[timing]) > 500, timing
    dropped = dropped_plot(runs, str(tmp_path / "dropped.png"))
    assert pixels_of(dropped, LATE_COLOR) > 100 and pixels_of(dropped, REJECTED_COLOR) > 100


@pytest.mark.parametrize("draw", [skew_plot, panes_plot, dropped_plot])
def test_no_runs_is_refused(tmp_path, draw):
    with pytest.raises(InvalidRequest, match="no runs to plot"):
        draw([], str(tmp_path / "x.png"))


@pytest.mark.parametrize("behind_days", [0, 910])
def test_a_single_runs_watermark_is_drawn_on_an_axis_of_dates_and_hours(behind_days):
    """One run (no watermark before it), its watermark ``behind_days`` behind its end (a
    replay of old data): the point is drawn, and the event-time axis says dates and hours, not
    minutes and microseconds of an unnamed day."""
    import re

    from sinks.presentation.run_plots import skew_figure

    (run,) = runs_every_hour([SUCCEEDED], lag_min=(behind_days * 24 * 60 + 10,))
    plt, fig = skew_figure([run])
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert len(labels) >= 2, labels
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", t) for t in labels), labels
        watermark = next(
            line for line in ax.get_lines() if line.get_label() == "watermark after each run"
        )
        assert watermark.get_marker() == "o" and len(watermark.get_xdata()) >= 1
        (when,) = {t for t in watermark.get_ydata()}
        assert when.timestamp() * 1e6 == run.watermark_after_us
    finally:
        plt.close(fig)
