"""Verification: the current view against two independent recomputations.

1. **From the pane log**: the whole pane log (up to the version the view has folded) folded from
   nothing with the reference reducer (:func:`sinks.refold.view_from_pane_log`).
2. **From the accepted raw events**, as a batch: each element assigned to its windows and
   aggregated, minus what the engine dropped (the ``late`` table): :mod:`sinks.batch_check`.

Values are compared exactly (the refold's are Python's integers, the batch's DuckDB's 128-bit
sums): a window whose value the view's integer column cannot hold is a difference that says so.

``verify(spec, elements=...) -> Report``; ``Report.ok`` is False when any difference was
found, and ``str(report)`` lists them. Elements: an Arrow table with the key columns, ``ts_us``
and the value columns the aggregates read (``_value`` for an aggregate without a field), or an
iterable of engine ``(key, value, timestamp)`` tuples. The CLI reads them from the pipeline's
landing zone (``jobs.driver.source_elements.load_source_elements``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sinks.batch_check import View, batch_view
from sinks.column_types import beyond_range
from sinks.refold import refolded_rows
from sinks.spec import ViewSpec
from sinks.tables import arrow_schema, existing_table, open_pane_log, open_view


def view_dict(spec: ViewSpec, table: pa.Table) -> View:
    out: View = {}
    for r in table.to_pylist():
        at = (tuple(r[k] for k in spec.keys), (r["window_start_us"], r["window_end_us"]))
        out[at] = {n: r[n] for n in spec.value_names}
    return out


# -- comparing -----------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return a == b


def diff(expected: View, actual: View, types: Mapping[str, pa.DataType] | None = None) -> list[str]:
    """The differences between two views, exact; ``types``: the view's column types, to say
    which expected value its column cannot hold."""
    out = []
    for at in sorted(set(expected) | set(actual), key=repr):
        e, a = expected.get(at), actual.get(at)
        if e is None:
            out.append(f"extra in view: {_at(at)} = {a}")
        elif a is None:
            out.append(f"missing in view: {_at(at)} (expected {e}){_beyond(e, types or {})}")
        elif not all(_same(e[n], a.get(n)) for n in e):
            out.append(f"differs: {_at(at)}: view {a}, expected {e}{_beyond(e, types or {})}")
    return out


def _beyond(expected: Mapping[str, Any], types: Mapping[str, pa.DataType]) -> str:
    """What of ``expected`` the view's integer columns cannot hold (the materializer stops
    there, naming the window)."""
    return "".join(
        f" ({n}: beyond the view's {types[n].bit_width}-bit integer column {n!r})"
        for n, v in expected.items()
        if n in types and beyond_range(v, types[n])
    )


def _at(at: tuple) -> str:
    key, (s, e) = at
    k = key[0] if len(key) == 1 else key
    return f"key {k!r} window [{s}, {e})"


@dataclass
class Check:
    name: str
    differences: list[str]
    windows: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.differences


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    folded_version: int | None = None
    pane_log_version: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        lines = [
            f"view folded up to pane-log version {self.folded_version} "
            f"(pane log at version {self.pane_log_version})"
        ]
        for c in self.checks:
            status = "OK" if c.ok else f"{len(c.differences)} DIFFERENCES"
            lines.append(
                f"{c.name}: {status} ({c.windows} windows){' - ' + c.note if c.note else ''}"
            )
            lines += [f"  {d}" for d in c.differences[:20]]
            if len(c.differences) > 20:
                lines.append(f"  ... {len(c.differences) - 20} more")
        lines += self.notes
        lines.append("verify: OK" if self.ok else "verify: FAILED")
        return "\n".join(lines)


def verify(
    spec: ViewSpec,
    elements: Any = None,
    late: pa.Table | None = None,
    *,
    engine: str = "auto",
    elements_are: str = "accepted raw events",
) -> Report:
    """Compare ``current`` with the pane log refolded and (given ``elements``) with the batch.

    ``late``: the late table (default: read from the lake when it exists). ``elements_are``
    names the batch's input in the report (a pipeline over a pane log: the upstream's final
    windows).
    """
    view_dt = open_view(spec)
    folded = view_dt.transaction_version(spec.app_id)
    report = Report(folded_version=folded, pane_log_version=open_pane_log(spec).version())
    actual = view_dict(spec, view_dt.to_pyarrow_table())
    types = {f.name: f.type for f in arrow_schema(view_dt)}
    refold: View = {}
    if folded is None:
        report.notes.append("the view has folded nothing yet")
    else:  # exact values: a window beyond its column is a difference, not a wrapped number
        rows, _ = refolded_rows(spec, upto=folded)
        refold = {at: {n: r[n] for n in spec.value_names} for at, r in rows.items()}
    report.checks.append(
        Check("view = pane log refolded", diff(refold, actual, types), len(refold))
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
        note = how
        if folded is not None and report.pane_log_version != folded:
            note += "; the view is behind the pane log, so differences may be expected"
        report.checks.append(
            Check(
                f"view = batch over {elements_are}",
                diff(expected, actual, types),
                len(expected),
                note,
            )
        )
    return report


__all__ = ["Check", "Report", "verify"]
