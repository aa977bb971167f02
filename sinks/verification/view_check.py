"""Verification: the current view against two independent recomputations.

1. **From the pane log**: the whole pane log (up to the version the view has folded) folded from
   nothing with the reference reducer (:func:`sinks.fold.recompute.refold`). Every window is
   compared.
2. **From the accepted raw events**, as a batch: each element assigned to its windows and
   aggregated, minus what the engine dropped (the ``late`` table):
   :mod:`sinks.verification.batch_check`. Only the windows that are *final* are compared: those the
   engine has let go at the watermark of the folded pane log (the latest a pane records), i.e. whose
   merge horizon plus the allowed lateness it passed (:meth:`panes.rules.WindowRules.gone`). The
   others are still open (a run that has not drained): the view may hold an early or on-time value
   of them, or nothing yet, and is not wrong. They are left out of both sides and counted
   (:func:`final_windows`); after a drain (watermark at the end of time) every window is final.

Values are compared as each aggregate says (:meth:`panes.combine_fn.CombineFn.agrees`): exactly
(the refold's are Python's integers, the batch's DuckDB's 128-bit sums; a window whose value the
view's integer column cannot hold is a difference that says so), but a sketch aggregate's values
(:mod:`panes.sketches`) by its one tolerance rule,
:meth:`panes.sketches.SketchFn.agrees`: exact where the sketches are exact, otherwise within
the sketches' documented error bounds (the sketch bytes of the same elements differ with their
order, and KLL's compactions are random).

``verify(spec, elements=...) -> Report``; ``Report.ok`` is False when any difference was
found, and ``str(report)`` lists them, ending with :meth:`Report.summary`. Elements: an Arrow
table with the key columns, ``ts_us`` and the value columns the aggregates read (``_value`` for
an aggregate without a field), or an iterable of engine ``(key, value, timestamp)`` tuples. The
CLI reads them from the pipeline's landing zone
(``jobs.inspection.source_elements.load_source_elements``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from panes.combine_fn import same_values
from panes.combiners import CombineFn
from panes.dedup import DUPLICATE
from panes.time import BEGINNING_OF_TIME, END_OF_TIME
from panes.window import Window
from sinks.fold import fold_in_progress, refold
from sinks.lake import (
    ViewSpec,
    arrow_schema,
    beyond_range,
    column_text,
    existing_table,
    open_pane_log,
    open_view,
    representable_us,
)
from sinks.verification.batch_check import View, batch_view, duplicates_left_out


def view_dict(spec: ViewSpec, table: pa.Table) -> View:
    out: View = {}
    for r in table.to_pylist():
        at = (tuple(r[k] for k in spec.keys), (r["window_start_us"], r["window_end_us"]))
        out[at] = {n: r[n] for n in spec.value_names}
    return out


# -- final windows -------------------------------------------------------------------------------


def final_windows(
    spec: ViewSpec, expected: View, actual: View, watermark_us: int | None
) -> tuple[View, View, int]:
    """The windows of the batch's ``expected`` view and of the ``actual`` view that are final at
    ``watermark_us`` (None: no watermark yet), and how many windows are still open.

    A batch window is final when the engine has let it go at the watermark
    (:meth:`panes.rules.WindowRules.gone`: its merge horizon plus the allowed lateness passed; for
    sessions the horizon is ``end - 1 + gap``, since until then an element that is not late
    can still merge with the session). A batch window still open is left out of both sides.
    A window of the view that the batch does not have is compared when it is final by its own
    bounds, except, for merging windows, when it overlaps a session of the same key that is
    still open: the view may hold an early pane of a session that later elements merged into a
    larger one, not fired yet. Still open: the open batch windows, and the view's open windows
    that overlap none of them.
    """
    wm = BEGINNING_OF_TIME if watermark_us is None else watermark_us
    fn, gone = spec.window_fn, spec.window_rules.gone

    def final(at: tuple) -> bool:
        start, end = at[1]
        return gone(Window(start, end), wm)

    final_expected = {at: v for at, v in expected.items() if final(at)}
    still_open = [at for at in expected if at not in final_expected]
    spans: dict[tuple, list[tuple[int, int]]] = {}
    if fn.is_merging:  # a key's merged windows are disjoint: sorted by start, ends sorted too
        for key, window in still_open:
            spans.setdefault(key, []).append(window)
        for windows in spans.values():
            windows.sort()

    def in_open_window(at: tuple) -> bool:
        key, (start, end) = at
        windows = spans.get(key)
        if not windows:
            return False
        i = bisect.bisect_left(windows, (end,))  # the windows starting before this one's end
        return i > 0 and windows[i - 1][1] > start

    final_actual: View = {}
    view_only_open = 0
    for at, values in actual.items():
        if at in expected:
            if at in final_expected:
                final_actual[at] = values
        elif in_open_window(at):
            continue
        elif final(at):
            final_actual[at] = values
        else:
            view_only_open += 1
    return final_expected, final_actual, len(still_open) + view_only_open


def watermark_text(us: int | None) -> str:
    """A pane-log watermark for the report: ISO-8601 UTC (ms, or µs when it has them)."""
    if us is None or us <= BEGINNING_OF_TIME:
        return "no watermark yet: no pane in the folded pane log"
    if us >= END_OF_TIME:
        return "watermark: the end of time"
    if representable_us(us) is None:
        return f"watermark {us} µs"
    t = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)
    spec = "milliseconds" if us % 1000 == 0 else "microseconds"
    return "watermark " + t.isoformat(timespec=spec).replace("+00:00", "Z")


# -- comparing -----------------------------------------------------------------------------------


def diff(
    expected: View,
    actual: View,
    types: Mapping[str, pa.DataType] | None = None,
    fns: Mapping[str, CombineFn] | None = None,
) -> list[str]:
    """The differences between two views, exact; ``types``: the view's column types, to say
    which expected value its column cannot hold; ``fns``: the aggregates by column, each of which
    says when two of its answers agree (:meth:`panes.combine_fn.CombineFn.agrees`: a sketch
    within its error bound)."""
    out = []
    by_column = dict(fns or {})

    def same(name: str, e: Any, a: Any) -> bool:
        fn = by_column.get(name)
        return same_values(e, a) if fn is None else fn.agrees(e, a)

    for at in sorted(set(expected) | set(actual), key=repr):
        e, a = expected.get(at), actual.get(at)
        if e is None:
            out.append(f"extra in view: {_at(at)} = {a}")
        elif a is None:
            out.append(f"missing in view: {_at(at)} (expected {e}){_beyond(e, types or {})}")
        elif not all(same(n, e[n], a.get(n)) for n in e):
            out.append(f"differs: {_at(at)}: view {a}, expected {e}{_beyond(e, types or {})}")
    return out


def _beyond(expected: Mapping[str, Any], types: Mapping[str, pa.DataType]) -> str:
    """What of ``expected`` the view's integer columns cannot hold (the materializer stops
    there, naming the window)."""
    return "".join(
        f" ({n}: beyond the view's {column_text(types[n])} column {n!r})"
        for n, v in expected.items()
        if n in types and beyond_range(v, types[n])
    )


def _at(at: tuple) -> str:
    key, (s, e) = at
    k = key[0] if len(key) == 1 else key
    return f"key {k!r} window [{s}, {e})"


def _windows(n: int) -> str:
    return f"{n} window{'' if n == 1 else 's'}"


@dataclass
class Check:
    """One comparison. ``windows``: the windows compared; ``open``: the windows left out as
    still open (None: a check that compares every window)."""

    name: str
    differences: list[str]
    windows: int = 0
    note: str = ""
    open: int | None = None

    @property
    def ok(self) -> bool:
        return not self.differences

    def counts(self) -> str:
        if self.open is None:
            return _windows(self.windows)
        return f"{_windows(self.windows)} compared, {self.open} still open"


@dataclass
class Report:
    """``watermark_us``: the watermark of the folded pane log (None: no pane), at which the
    batch check tells final windows from open ones."""

    checks: list[Check] = field(default_factory=list)
    folded_version: int | None = None
    pane_log_version: int | None = None
    notes: list[str] = field(default_factory=list)
    watermark_us: int | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def summary(self) -> str:
        """One line: OK or FAILED, and, with a batch check, how many windows it compared and
        how many are still open at which watermark."""
        line = "verify: OK" if self.ok else "verify: FAILED"
        judged = [c for c in self.checks if c.open is not None]
        if judged:
            c = judged[-1]
            line += f": {c.counts()} ({watermark_text(self.watermark_us)})"
        return line

    def __str__(self) -> str:
        lines = [
            f"view folded up to pane-log version {self.folded_version} "
            f"(pane log at version {self.pane_log_version})"
        ]
        for c in self.checks:
            status = "OK" if c.ok else f"{len(c.differences)} DIFFERENCES"
            lines.append(f"{c.name}: {status} ({c.counts()}){' - ' + c.note if c.note else ''}")
            lines += [f"  {d}" for d in c.differences[:20]]
            if len(c.differences) > 20:
                lines.append(f"  ... {len(c.differences) - 20} more")
        lines += self.notes
        lines.append(self.summary())
        return "\n".join(lines)


def verify(
    spec: ViewSpec,
    elements: Any = None,
    late: pa.Table | None = None,
    *,
    engine: str = "auto",
    elements_are: str = "accepted raw events",
) -> Report:
    """Compare ``current`` with the pane log refolded and (given ``elements``) with the batch
    over the windows final at the folded pane log's watermark (the module's doc).

    ``late``: the late table (default: read from the lake when it exists). ``elements_are``
    names the batch's input in the report (a pipeline over a pane log: the upstream's final
    windows).
    """
    view_dt = open_view(spec)
    folded = view_dt.transaction_version(spec.app_id)
    report = Report(folded_version=folded, pane_log_version=open_pane_log(spec).version())
    progress = fold_in_progress(view_dt, spec.app_id, folded)
    if progress is not None:  # some keys are folded further than the transaction says
        plan = progress.plan
        report.checks.append(
            Check(
                "view = pane log refolded",
                [
                    f"the view is in the middle of a fold of pane-log versions {plan.first}.."
                    f"{plan.last}: {len(progress.done)} of its {plan.pieces} pieces are "
                    "committed; run panestore materialize to finish it, then verify"
                ],
            )
        )
        return report
    actual = view_dict(spec, view_dt.to_pyarrow_table())
    types = {f.name: f.type for f in arrow_schema(view_dt)}
    refolded: View = {}
    if folded is None:
        report.notes.append("the view has folded nothing yet")
    else:  # exact values: a window beyond its column is a difference, not a wrapped number
        again = refold(spec, upto=folded)
        refolded = {at: {n: r[n] for n in spec.value_names} for at, r in again.rows.items()}
        report.watermark_us = again.watermark_us
    report.checks.append(
        Check("view = pane log refolded", diff(refolded, actual, types, spec.fns), len(refolded))
    )
    if folded is not None and report.pane_log_version != folded:
        report.notes.append(
            f"note: pane-log versions {folded + 1}..{report.pane_log_version} "
            f"are not folded yet (run panestore materialize)"
        )
    if elements is not None:
        late_table = existing_table(spec, "late") if late is None else None
        if late_table is not None:
            late = late_table.to_pyarrow_table()
        expected, how = batch_view(spec, elements, late, engine)
        copies = duplicates_left_out(spec, elements, late)
        if copies is not None:
            report.notes.append(_duplicates_note(spec, copies))
        expected, compared, still_open = final_windows(spec, expected, actual, report.watermark_us)
        report.checks.append(
            Check(
                f"view = batch over {elements_are}",
                diff(expected, compared, types, spec.fns),
                len(expected),
                how,
                open=still_open,
            )
        )
    return report


def _duplicates_note(spec: ViewSpec, copies: int) -> str:
    """A deduplicated pipeline's note: the copies the batch left out, beside the ``DUPLICATE``
    rows of the ``rejected`` table (equal once the job has read every raw event, with identical
    copies and the windows' horizon: docs/running.md, "Duplicates")."""
    table = existing_table(spec, "rejected")
    rejected = 0
    if table is not None:
        reasons = table.to_pyarrow_table(columns=["reason"]).column("reason").to_pylist()
        rejected = sum(1 for r in reasons if r is not None and r.startswith(DUPLICATE))
    return (
        f"duplicates: the batch left out {copies} copies of records; "
        f"the rejected table holds {rejected} {DUPLICATE} rows"
    )


__all__ = ["Check", "Report", "final_windows", "verify"]
