"""Pictures of a pipeline's runs, from the lake's run history (:mod:`sinks.lake.run_history`).

:func:`skew_plot` is the Dataflow paper's Figure 2 over months: processing time across, event
time up. The watermark after each run is a step line (flat while a run is going, a step at its
end); the diagonal is the ideal watermark, event time = processing time; the distance between
them (across or up) is the skew, labelled at the last run. Each run's span is a band along the
processing-time axis coloured by how it ended, with failed, stopped and killed runs marked on the
watermark line. A lower panel has the late and rejected records of each run.

:func:`panes_plot` stacks each run's panes by timing (early, on time, late);
:func:`dropped_plot` draws the late and rejected records summed over the runs, against
processing time. Every function takes the runs (:class:`~sinks.lake.run_history.RunRecord`, oldest
first) and writes a PNG (matplotlib's Agg backend, as :mod:`sinks.presentation.key_plot`);
:func:`plot_skew` reads the runs of a lake first. Each stays readable from 1 run to thousands: marks
and labels are drawn only while there are few runs; with many, the bands and bars merge into a
density.

>>> import os, tempfile
>>> from sinks.lake.run_history import RunRecord
>>> runs = [RunRecord(run_id=f"r{i}", pipeline="clicks", started_us=i * 600_000_000,
...     ended_us=i * 600_000_000 + 60_000_000, outcome="succeeded",
...     watermark_after_us=i * 600_000_000 - 300_000_000, late=i) for i in range(1, 4)]
>>> out = skew_plot(runs, os.path.join(tempfile.mkdtemp(), "skew.png"))
>>> os.path.getsize(out) > 10_000
True
>>> skew_text(runs)
'6 min'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sinks.lake import (
    FAILED,
    KILLED,
    MAX_TIMESTAMP_US,
    STOPPED,
    SUCCEEDED,
    InvalidRequest,
    RunRecord,
    ViewSpec,
    read_runs,
)
from sinks.presentation.key_plot import COLORS

OUTCOME_COLORS = {
    SUCCEEDED: "#bdbdbd",
    STOPPED: "#f2994a",
    FAILED: "#eb5757",
    KILLED: "#333333",
}
"""The band (and mark) colour of a run by how it ended."""
WATERMARK_COLOR = "#2d9cdb"  # sinks.presentation.key_plot's watermark line
LATE_COLOR = COLORS["LATE"]
REJECTED_COLOR = "#c0392b"
FEW = 40
"""Up to this many runs, each gets its own marks and labels."""
_DRAINED_US = MAX_TIMESTAMP_US - 86_400_000_000  # a drained run's watermark: the end of time


def drained(watermark_us: int | None) -> bool:
    """Whether a watermark is the end of time (a drained run), not a time to plot.

    >>> drained(MAX_TIMESTAMP_US), drained(1_717_232_700_000_000), drained(None)
    (True, False, False)
    """
    return watermark_us is not None and watermark_us >= _DRAINED_US


def skew_us(run: RunRecord) -> int | None:
    """How far the watermark after ``run`` lagged its end (µs; None: no watermark yet, no end
    known, or drained).

    >>> skew_us(RunRecord(run_id="r", pipeline="p", started_us=0, ended_us=90_000_000,
    ...     outcome="succeeded", watermark_after_us=30_000_000))
    60000000
    """
    w = run.watermark_after_us
    if w is None or run.ended_us is None or drained(w):
        return None
    return run.ended_us - w


def skew_text(runs: Sequence[RunRecord]) -> str | None:
    """The skew after the last run that has one, as a reader says it (None: no run has)."""
    for run in reversed(runs):
        s = skew_us(run)
        if s is not None:
            return duration_text(s)
    return None


def duration_text(us: int) -> str:
    """A duration in the largest unit that keeps it readable.

    >>> [duration_text(x) for x in (1_500_000, 300_000_000, 5_400_000_000, 3 * 86_400_000_000)]
    ['1.5 s', '5 min', '1.5 h', '3 days']
    >>> duration_text(-120_000_000)
    '-2 min'
    """
    sign, s = ("-" if us < 0 else ""), abs(us) / 1e6
    for unit, size in (("days", 86_400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{sign}{s / size:.3g} {unit}"
    return f"{sign}{s:.3g} s"


def _dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1e6, tz=timezone.utc)


@dataclass(frozen=True)
class _Run:
    """A run as drawn: its span in processing time and the watermark before and after it."""

    record: RunRecord
    start: int
    end: int
    before: int | None
    after: int | None


def _drawn(runs: Sequence[RunRecord]) -> list[_Run]:
    """The runs oldest first; a run with no end known is drawn as a moment at its start; the
    watermark before a run defaults to the one after the run before it."""
    out: list[_Run] = []
    previous: int | None = None
    for r in sorted(runs, key=lambda r: r.started_us):
        end = r.ended_us if r.ended_us is not None else r.started_us
        before = r.watermark_before_us if r.watermark_before_us is not None else previous
        after = r.watermark_after_us if r.watermark_after_us is not None else before
        out.append(_Run(r, r.started_us, max(end, r.started_us), before, after))
        previous = after
    return out


def _span(drawn: list[_Run]) -> tuple[int, int]:
    lo = min(r.start for r in drawn)
    hi = max(r.end for r in drawn)
    pad = max(1_000_000, (hi - lo) // 25)
    return lo - pad, hi + pad


def _figure(rows: int, heights: list[float]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        rows,
        1,
        figsize=(11, sum(heights)),
        dpi=100,
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    return plt, fig, [a[0] for a in axes]


def _time_axis(ax: Any) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


EVENT_TIME_SPAN_US = 3600 * 1_000_000
"""The event-time axis spans at least an hour: its labels are dates and hours whatever the
watermark did (one run's watermark alone would otherwise span two seconds)."""


def _event_time_axis(ax: Any) -> None:
    """Ticks of the event-time (watermark) axis labelled with their date and time, UTC."""
    import matplotlib.dates as mdates

    ax.yaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=8))
    ax.yaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d %H:%M", tz=timezone.utc))


def _save(plt: Any, fig: Any, out: str) -> str:
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def _bar_width(drawn: list[_Run], lo: int, hi: int) -> float:
    """A bar's width in days (matplotlib's date unit): a share of the space per run, at most
    a thirtieth of the chart (a few runs' bars stay bars, not blocks)."""
    return min((hi - lo) / max(len(drawn), 1) * 0.8, (hi - lo) / 30) / 86_400e6


def _bars(ax: Any, xs: list, heights: list[int], width: float, color: str, label: str,
          bottom: list[int] | None = None) -> None:  # fmt: skip
    """Bars at ``xs`` (stacked on ``bottom``): patches while there are few, one collection of
    lines beyond (a patch each for thousands of runs is slow to draw, and too thin to see)."""
    bottom = bottom or [0] * len(xs)
    if len(xs) <= FEW:
        ax.bar(xs, heights, width=width, bottom=bottom, color=color, label=label)
    else:
        tops = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.vlines(xs, bottom, tops, colors=color, linewidth=1.5, antialiased=False, label=label)


def skew_plot(runs: Sequence[RunRecord], out: str, *, title: str | None = None) -> str:
    """Write the skew picture of ``runs`` (see the module doc) as a PNG to ``out``; returns
    ``out``. ``runs`` must not be empty."""
    plt, fig = skew_figure(runs, title=title)
    return _save(plt, fig, out)


def skew_figure(runs: Sequence[RunRecord], *, title: str | None = None) -> tuple[Any, Any]:
    """The skew picture of ``runs`` as a matplotlib figure (and ``pyplot``): its axes are the
    watermark's, the skew's and the late and rejected records'."""
    if not runs:
        raise InvalidRequest("no runs to plot")
    drawn = _drawn(runs)
    lo, hi = _span(drawn)
    plt, fig, (ax, mid, low) = _figure(3, [4.6, 1.6, 1.6])
    _bands(ax, drawn)
    ys = _watermark(ax, drawn)
    _ideal(ax, drawn, lo, hi, ys)
    _outcome_marks(ax, drawn)
    _skew_line(mid, drawn)
    _late_rejected_bars(low, drawn, lo, hi)
    ax.set_xlim(_dt(lo), _dt(hi))
    _time_axis(low)
    ax.set_ylabel("event time (watermark)")
    low.set_xlabel("processing time (UTC)")
    low.set_ylabel("records")
    failed = sum(1 for r in drawn if r.record.outcome in (FAILED, KILLED))
    name = runs[-1].pipeline
    what = f"{len(drawn)} run{'s' if len(drawn) != 1 else ''}"
    if failed:
        what += f", {failed} failed or killed"
    ax.set_title(title or f"{name}: watermark vs processing time ({what})", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    ax.grid(True, alpha=0.25)
    return plt, fig


def _bands(ax: Any, drawn: list[_Run]) -> None:
    """Each run's span along the bottom of the axes, coloured by its outcome (one call per
    outcome: thousands of runs stay cheap)."""
    for outcome, color in OUTCOME_COLORS.items():
        spans = [
            (_dt(r.start), _dt(r.end) - _dt(r.start)) for r in drawn if r.record.outcome == outcome
        ]
        if spans:
            ax.broken_barh(
                spans,
                (0, 0.035),
                transform=ax.get_xaxis_transform(),
                facecolors=color,
                edgecolors=color,
                linewidth=0.8,
                label=f"run {outcome} ({len(spans)})",
            )


def _watermark(ax: Any, drawn: list[_Run]) -> list[int]:
    """The watermark as a step line: flat at its value before a run while the run goes, a step
    to its value after at the run's end; a drained run's (the end of time) is an arrow at the
    top. Returns the event times drawn."""
    xs: list[datetime] = []
    ys: list[int] = []
    for r in drawn:
        for t, w in ((r.start, r.before), (r.end, r.after)):
            if w is not None and not drained(w):
                xs.append(_dt(t))
                ys.append(w)
    if xs:
        ax.step(
            xs,
            [_dt(y) for y in ys],
            where="post",
            color=WATERMARK_COLOR,
            linewidth=2 if len(drawn) <= FEW else 1.2,
            marker="o" if len(drawn) <= FEW else None,  # one run's watermark: a point
            markersize=4,
            label="watermark after each run",
            zorder=3,
        )
    ends = [_dt(r.end) for r in drawn if drained(r.after)]
    if ends:
        ax.plot(
            ends,
            [0.97] * len(ends),
            "^",
            color=WATERMARK_COLOR,
            transform=ax.get_xaxis_transform(),
            label="watermark at the end of time (drained)",
            zorder=4,
        )
    return ys


def _ideal(ax: Any, drawn: list[_Run], lo: int, hi: int, ys: list[int]) -> None:
    """The ideal watermark (event time = processing time) and the skew at the last run. The
    event-time axis covers the watermark, and the diagonal too unless that would squash the
    watermark flat (event times years behind the processing time: a replay of old data)."""
    from matplotlib.dates import date2num

    if ys:
        ylo, yhi = min(ys), max(ys)
        if max(hi, yhi) - min(lo, ylo) <= 10 * max(yhi - ylo, hi - lo):
            ylo, yhi = min(lo, ylo), max(hi, yhi)
    else:
        ylo, yhi = lo, hi
    pad = max((EVENT_TIME_SPAN_US - (yhi - ylo)) // 2, (yhi - ylo) // 20)
    ax.set_ylim(_dt(ylo - pad), _dt(yhi + pad))
    _event_time_axis(ax)
    ax.plot(
        [_dt(lo), _dt(hi)],
        [_dt(lo), _dt(hi)],
        linestyle="--",
        color="#888888",
        linewidth=1,
        label="ideal: event time = processing time",
    )
    last = next((r for r in reversed(drawn) if skew_us(r.record) is not None), None)
    if last is None or last.after is None:
        return
    text = f"skew {duration_text(last.end - last.after)}"
    if ylo - pad <= last.end <= yhi + pad:  # the diagonal at the run's end is on the chart
        ax.annotate(
            "",
            xy=(date2num(_dt(last.end)), date2num(_dt(last.end))),
            xytext=(date2num(_dt(last.end)), date2num(_dt(last.after))),
            arrowprops=dict(arrowstyle="<->", color="#555555", linewidth=1),
        )
        ax.annotate(
            text,
            (date2num(_dt(last.end)), date2num(_dt((last.end + last.after) // 2))),
            textcoords="offset points",
            xytext=(-6, 0),
            ha="right",
            fontsize=9,
            color="#333333",
        )
    else:
        note = text + " (ideal line off the chart)"
        ax.text(0.99, 0.06, note, transform=ax.transAxes, ha="right", fontsize=9)


def _skew_line(ax: Any, drawn: list[_Run]) -> None:
    """The skew after each run (the vertical distance above, in the unit that suits its
    largest value) against the run's end: over months the two lines above merge, this does
    not."""
    points: list[tuple[int, int]] = []
    for r in drawn:
        s = skew_us(r.record)
        if s is not None:
            points.append((r.end, s))
    ax.set_ylabel("skew")
    ax.grid(True, alpha=0.25)
    if not points:
        ax.text(0.5, 0.5, "no watermark yet", transform=ax.transAxes, ha="center", fontsize=9)
        return
    top = max(abs(s) for _, s in points)
    unit, size = next(
        ((u, z) for u, z in (("days", 86_400e6), ("h", 3600e6), ("min", 60e6)) if top >= 2 * z),
        ("s", 1e6),
    )
    ax.plot(
        [_dt(t) for t, _ in points],
        [s / size for _, s in points],
        color=WATERMARK_COLOR,
        marker="o" if len(drawn) <= FEW else None,
        markersize=4,
        linewidth=1.5 if len(drawn) <= FEW else 1,
    )
    ax.set_ylabel(f"skew ({unit})")
    values = [s / size for _, s in points]
    low, high = min(0.0, *values), max(0.0, *values)
    ax.set_ylim(low - (high - low) * 0.05, high + (high - low) * 0.15 + (0 if high > low else 1))


def _outcome_marks(ax: Any, drawn: list[_Run]) -> None:
    """Failed, stopped and killed runs marked on the watermark line at their end (along the
    top when there is no watermark to put them on)."""
    marks = {FAILED: "X", KILLED: "s", STOPPED: "o"}
    for outcome, marker in marks.items():
        these = [r for r in drawn if r.record.outcome == outcome]
        on_line = [r for r in these if r.after is not None and not drained(r.after)]
        off = [r for r in these if r not in on_line]
        style = dict(
            marker=marker,
            linestyle="none",
            color=OUTCOME_COLORS[outcome],
            markersize=8 if len(drawn) <= FEW else 5,
            markeredgecolor="white",
            zorder=5,
        )
        if on_line:
            ax.plot(
                [_dt(r.end) for r in on_line],
                [_dt(r.after) for r in on_line if r.after is not None],
                label=f"{outcome} ({len(these)})",
                **style,
            )
        if off:
            ax.plot(
                [_dt(r.end) for r in off],
                [0.92] * len(off),
                transform=ax.get_xaxis_transform(),
                label=None if on_line else f"{outcome} ({len(these)})",
                **style,
            )


def _late_rejected_bars(ax: Any, drawn: list[_Run], lo: int, hi: int) -> None:
    """Late and rejected records of each run, side by side at its end."""
    from datetime import timedelta

    width = _bar_width(drawn, lo, hi) / 2
    shift = timedelta(days=width / 2)
    ends = [_dt(r.end) for r in drawn]
    late = [r.record.late for r in drawn]
    rejected = [r.record.rejected for r in drawn]
    _bars(ax, [e - shift for e in ends], late, width, LATE_COLOR, "late")
    _bars(ax, [e + shift for e in ends], rejected, width, REJECTED_COLOR, "rejected")
    if len(drawn) <= FEW:
        for e, n in zip(ends, late, strict=True):
            if n:
                ax.annotate(str(n), (e - shift, n), ha="center", va="bottom", fontsize=7)
        for e, n in zip(ends, rejected, strict=True):
            if n:
                ax.annotate(str(n), (e + shift, n), ha="center", va="bottom", fontsize=7)
    top = max([*late, *rejected, 1])
    ax.set_ylim(0, top * 1.25)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    ax.grid(True, axis="y", alpha=0.25)


def panes_plot(runs: Sequence[RunRecord], out: str) -> str:
    """Write a PNG of each run's panes stacked by timing (early, on time, late; retractions
    are among them) to ``out``; returns ``out``."""
    if not runs:
        raise InvalidRequest("no runs to plot")
    drawn = _drawn(runs)
    lo, hi = _span(drawn)
    plt, fig, (ax,) = _figure(1, [3.2])
    width = _bar_width(drawn, lo, hi)
    ends = [_dt(r.end) for r in drawn]
    bottom = [0] * len(drawn)
    for timing, name, label in (
        ("EARLY", "early", "early"),
        ("ON_TIME", "on_time", "on time"),
        ("LATE", "late_panes", "late"),
    ):
        counts = [getattr(r.record, name) for r in drawn]
        _bars(ax, ends, counts, width, COLORS[timing], label, bottom)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    ax.set_xlim(_dt(lo), _dt(hi))
    ax.set_ylim(0, max([*bottom, 1]) * 1.15)
    _time_axis(ax)
    ax.set_ylabel("panes")
    ax.set_xlabel("processing time (UTC), at each run's end")
    ax.set_title(f"{runs[-1].pipeline}: panes per run by timing", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    ax.grid(True, axis="y", alpha=0.25)
    return _save(plt, fig, out)


def dropped_plot(runs: Sequence[RunRecord], out: str) -> str:
    """Write a PNG of the late and rejected records summed over the runs so far, against
    processing time, to ``out``; returns ``out``."""
    if not runs:
        raise InvalidRequest("no runs to plot")
    drawn = _drawn(runs)
    lo, hi = _span(drawn)
    plt, fig, (ax,) = _figure(1, [3.0])
    ends = [_dt(r.end) for r in drawn]
    for name, color, label in (
        ("late", LATE_COLOR, "late records"),
        ("rejected", REJECTED_COLOR, "rejected records"),
    ):
        total, sums = 0, []
        for r in drawn:
            total += getattr(r.record, name)
            sums.append(total)
        ax.step(ends, sums, where="post", color=color, linewidth=2, label=f"{label}: {total}")
    ax.set_xlim(_dt(lo), _dt(hi))
    _time_axis(ax)
    ax.set_ylabel("records, since the first run")
    ax.set_xlabel("processing time (UTC)")
    ax.set_title(f"{runs[-1].pipeline}: late and rejected records over time", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    ax.grid(True, alpha=0.25)
    return _save(plt, fig, out)


def plot_skew(spec: ViewSpec, out: str, *, last: int | None = None) -> str:
    """Write the skew picture of the lake's runs (the ``last`` newest; all by default) to
    ``out``; returns ``out``. A lake with no run recorded yet is refused
    (:class:`~sinks.lake.errors.InvalidRequest`)."""
    runs = read_runs(spec, last=last)
    if not runs:
        raise InvalidRequest(
            f"no runs recorded in the lake {spec.lake} yet (the runs table is written at the "
            "end of each `panestore run`)"
        )
    return skew_plot(runs, out)


__all__ = [
    "OUTCOME_COLORS",
    "drained",
    "dropped_plot",
    "duration_text",
    "panes_plot",
    "plot_skew",
    "skew_plot",
    "skew_text",
    "skew_us",
]
