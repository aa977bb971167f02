"""A one-page HTML report of a pipeline's health (``panestore report CONF --out DIR``).

:func:`write_report` writes ``DIR/index.html``: one file, its pictures embedded as PNG data
URIs, no script and nothing fetched from a network, so it opens anywhere (a browser offline, an
attachment). Its sections, each an element with a stable ``id``:

* ``status``: the lake's status as the caller read it (``panestore status``: any dataclass; its
  fields are rendered as they are, nested ones as tables, so a field added to the status appears
  without a change here), headed by its ``state`` (``id="state"``); then the last run
  (``id="last-run"``: its outcome ``id="last-run-outcome"`` and error ``id="last-run-error"``);
* ``skew``: the watermark against processing time (:func:`sinks.presentation.run_plots.skew_plot`);
* ``panes``: panes per run by timing (:func:`sinks.presentation.run_plots.panes_plot`);
* ``dropped``: late and rejected records over time
(:func:`sinks.presentation.run_plots.dropped_plot`);
* ``open-windows``: the largest open windows: those of the operator's state when the caller
  read it (``largest``; ``panestore report`` gives the status's ``operator_state``'s, the
  windows holding the most elements), else the pane log's (:func:`open_windows`);
* ``runs``: the last runs as a table, newest first (``id="run-count"``: how many the lake holds).

Every text from the lake (keys, errors, hosts, the status's values) is escaped.

Without a summary of the state, the largest open windows are read from the pane log (DuckDB):
a window is open when none of its
panes is its last (``is_last``), no later pane of a merged window superseded it, and the engine
has not let it go at the lake's watermark (:meth:`panes.rules.WindowRules.gone`: a window that
expired without firing again has no last pane), the later of the pane log's and the last run's
(:func:`lake_watermark`). They are ranked by the panes they emitted. The
pane log does not count a window's elements, nor what the operator's state holds now: a window
that has only buffered elements and never fired is not seen.
"""

from __future__ import annotations

import base64
import html
import os
import struct
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime, timezone
from typing import Any

from panes.time import BEGINNING_OF_TIME
from panes.window import Window
from sinks.lake import RunRecord, ViewSpec, read_runs, representable_us
from sinks.presentation.run_plots import (
    drained,
    dropped_plot,
    duration_text,
    panes_plot,
    skew_plot,
    skew_us,
)

LAST_RUNS = 30
"""How many runs the report's table lists (the pictures have them all)."""
OPEN_WINDOWS = 10
"""How many open windows the report lists."""


@dataclass(frozen=True)
class OpenWindow:
    """A window of the pane log still open (see the module doc): its key, bounds, the panes it
    emitted (retractions not counted), the processing times of its first and latest pane, and
    the latest pane's timing."""

    key: tuple[Any, ...]
    window_start_us: int
    window_end_us: int
    panes: int
    first_pane_us: int | None
    last_pane_us: int | None
    last_timing: str


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lake_watermark(spec: ViewSpec, con: Any) -> int | None:
    """The lake's watermark as far as its tables tell: the later of the latest a pane of the
    pane log records (``con``: a :func:`sinks.presentation.duck.connect` connection) and the one
    after the last recorded run (:mod:`sinks.lake.run_history`: a run that emitted nothing still
    moved it)."""
    (watermark,) = con.execute("SELECT max(watermark_us) FROM panes").fetchone() or (None,)
    marks = [int(watermark)] if watermark is not None else []
    runs = read_runs(spec, last=1)
    if runs and runs[-1].watermark_after_us is not None:
        marks.append(runs[-1].watermark_after_us)
    return max(marks) if marks else None


def open_windows(
    spec: ViewSpec, limit: int = OPEN_WINDOWS, *, watermark_us: int | None = None
) -> list[OpenWindow]:
    """The ``limit`` open windows of ``spec``'s pane log that emitted the most panes (ties: the
    latest first); empty when there is no pane log. Open at ``watermark_us`` (default: the
    lake's, :func:`lake_watermark`).

    >>> import tempfile
    >>> from panes import AccumulationMode, FixedWindows
    >>> from panes.combiners import count
    >>> spec = ViewSpec("clicks", tempfile.mkdtemp(), ("user",), (("n", count()),),
    ...     FixedWindows(60_000_000), AccumulationMode.DISCARDING)
    >>> open_windows(spec)
    []
    """
    from sinks.lake import table_exists
    from sinks.presentation.duck import connect

    if not table_exists(spec, "panes"):
        return []
    keys = ", ".join(_quote(k) for k in spec.keys)
    con = connect(spec)
    try:
        if watermark_us is None:
            watermark_us = lake_watermark(spec, con)
        wm = BEGINNING_OF_TIME if watermark_us is None else watermark_us
        superseded: set[tuple] = set()
        if spec.window_fn.is_merging:
            rows = con.execute(
                f"SELECT {keys}, s.start_us, s.end_us FROM "
                f"(SELECT {keys}, unnest(supersedes) AS s FROM panes WHERE len(supersedes) > 0)"
            ).fetchall()
            superseded = {tuple(r) for r in rows}
        result = con.execute(
            f"SELECT {keys}, window_start_us, window_end_us, "
            "count(*) FILTER (WHERE NOT is_retraction) AS n, min(processing_time_us), "
            "max(processing_time_us), arg_max(timing, processing_time_us) "
            f"FROM panes GROUP BY {keys}, window_start_us, window_end_us "
            "HAVING NOT bool_or(is_last) ORDER BY n DESC, window_end_us DESC"
        )
        out: list[OpenWindow] = []
        nk = len(spec.keys)
        while len(out) < limit:
            batch = result.fetchmany(1000)
            if not batch:
                break
            for row in batch:
                key, (start, end, n, first, last, timing) = tuple(row[:nk]), row[nk:]
                if (*key, start, end) in superseded:
                    continue
                if spec.window_rules.gone(Window(start, end), wm):
                    continue
                out.append(OpenWindow(key, start, end, n, first, last, timing))
                if len(out) == limit:
                    break
        return out
    finally:
        con.close()


# -- rendering ------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _time(us: int | None) -> str:
    """µs since 1970 as ISO-8601 UTC to the second ("—": none; the end of time said so)."""
    if us is None:
        return "—"
    if drained(us) or representable_us(us) is None:
        return "end of time"
    return datetime.fromtimestamp(us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _value(value: Any, name: str = "") -> str:
    """A status value as HTML: a dataclass or mapping as a nested table, a sequence as a list
    (of dataclasses: a table, a row each), a whole number named ``*_us`` as a UTC time, None as
    "—"."""
    if isinstance(value, int) and not isinstance(value, bool) and name.endswith("_us"):
        return _e(_time(value))
    if isinstance(value, (list, tuple)) and value and all(is_dataclass(v) for v in value):
        return _matrix(dict(enumerate(value, 1)))
    if value is None:
        return '<span class="none">—</span>'
    if is_dataclass(value) and not isinstance(value, type):
        return _fields_table({f.name: getattr(value, f.name) for f in fields(value)})
    if isinstance(value, dict):
        if not value:
            return '<span class="none">none</span>'
        kinds = {type(v) for v in value.values()}
        if len(kinds) == 1 and is_dataclass(next(iter(value.values()))):
            return _matrix(value)
        return _fields_table({str(k): v for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return ", ".join(_e(v) for v in value) if value else '<span class="none">none</span>'
    if isinstance(value, float):
        return _e(f"{value:.6g}")
    return _e(value)


def _matrix(values: dict[Any, Any]) -> str:
    """Dataclasses of one kind by name (the status's tables, its locks): a row each, a column
    per field."""
    names = [f.name for f in fields(next(iter(values.values())))]
    head = "<tr><th></th>" + "".join(f"<th>{_e(n.replace('_', ' '))}</th>" for n in names)
    rows = "".join(
        f"<tr><th>{_e(k)}</th>"
        + "".join(f'<td data-field="{_e(n)}">{_value(getattr(v, n), n)}</td>' for n in names)
        + "</tr>"
        for k, v in values.items()
    )
    return f'<table class="fields">{head}</tr>{rows}</table>'


def _row_table(values: dict[str, Any], id_: str) -> str:
    """Named values across: a header row and a row of values."""
    head = "".join(f"<th>{_e(n.replace('_', ' '))}</th>" for n in values)
    row = "".join(f'<td data-field="{_e(n)}">{_value(v, n)}</td>' for n, v in values.items())
    return f'<table class="fields" id="{_e(id_)}"><tr>{head}</tr><tr>{row}</tr></table>'


def _fields_table(values: dict[str, Any], id_: str | None = None) -> str:
    attr = f' id="{_e(id_)}"' if id_ else ""
    rows = "".join(
        f"<tr><th>{_e(name.replace('_', ' '))}</th>"
        f'<td data-field="{_e(name)}">{_value(v, name)}</td></tr>'
        for name, v in values.items()
    )
    return f'<table class="fields"{attr}>{rows}</table>'


def _status_section(status: Any | None, runs: Sequence[RunRecord]) -> str:
    if status is None:
        body = '<p id="state" class="state">status not read</p>'
    else:
        state = getattr(status, "state", None)
        # the last run has its own block (below the state); every other field is listed
        shown = {
            f.name: getattr(status, f.name)
            for f in fields(status)
            if not (f.name == "last_run" and _told_run(status) is not None)
        }
        body = (
            f'<p id="state" class="state state-{_e(state)}">{_e(str(state).replace("_", " "))}'
            f"</p>{_last_run(runs, status)}<h3>All status fields</h3>"
            + _fields_table(shown, "status-fields")
        )
        return f'<section id="status"><h2>Status</h2>{body}</section>'
    return f'<section id="status"><h2>Status</h2>{body}{_last_run(runs, status)}</section>'


def _told_run(status: Any | None) -> Any | None:
    """The status's ``last_run`` when it is a run (a dataclass with an ``outcome``)."""
    told = getattr(status, "last_run", None)
    if told is not None and is_dataclass(told) and hasattr(told, "outcome"):
        return told
    return None


def _last_run(runs: Sequence[RunRecord], status: Any | None) -> str:
    """The last run: the status's ``last_run`` when it has one (it also knows a run killed
    since, from the run's note), else the last row of the runs table."""
    told = _told_run(status)
    if told is not None:
        error = getattr(told, "error", None)
        rest = {
            f.name: getattr(told, f.name)
            for f in fields(told)
            if f.name not in ("outcome", "error")
        }
        return _last_run_block(told.outcome, error, _row_table(rest, "last-run-fields"))
    if not runs:
        return '<div id="last-run"><h3>Last run</h3><p>no runs recorded yet</p></div>'
    r = runs[-1]
    seconds = "—" if r.seconds is None else f"{r.seconds:.1f} s"
    said = (
        f"<p>run {_e(r.run_id)}, started {_e(_time(r.started_us))}, {_e(seconds)}, "
        f"{_e(r.batches)} batches, {_e(r.records)} records, {_e(r.panes)} panes, "
        f"watermark after {_e(_time(r.watermark_after_us))}</p>"
    )
    return _last_run_block(r.outcome, r.error, said)


def _last_run_block(outcome: str, error: str | None, details: str) -> str:
    shown = f'<pre id="last-run-error">{_e(error)}</pre>' if error else ""
    return (
        '<div id="last-run"><h3>Last run</h3>'
        f'<p><span id="last-run-outcome" class="outcome-{_e(outcome)}">{_e(outcome)}</span></p>'
        f"{shown}{details}</div>"
    )


def _png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _picture(
    id_: str, title: str, draw: Callable[[Sequence[RunRecord], str], str], runs, work: str
) -> str:
    if not runs:
        return f'<section id="{id_}"><h2>{_e(title)}</h2><p>no runs recorded yet</p></section>'
    path = draw(runs, os.path.join(work, f"{id_}.png"))
    with open(path, "rb") as f:
        data = f.read()
    width, height = _png_size(data)
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return (
        f'<section id="{id_}"><h2>{_e(title)}</h2>'
        f'<img id="{id_}-plot" alt="{_e(title)}" src="{uri}" width="{width}" '
        f'height="{height}"></section>'
    )


def _open_windows_section(
    spec: ViewSpec, windows: list[OpenWindow], largest: Sequence[Any] | None
) -> str:
    """The largest open windows: the operator's state's (``largest``: dataclasses, a row each)
    when the caller read them, else the pane log's (``windows``)."""
    head = '<section id="open-windows"><h2>Largest open windows</h2>'
    if largest is not None:
        table = (
            _matrix(dict(enumerate(largest, 1))).replace(
                '<table class="fields">', '<table class="fields" id="open-windows-table">', 1
            )
            if largest
            else "<p>no open windows in the operator's state</p>"
        )
        return (
            f"{head}<p>From the operator's state after the last committed batch, by the "
            f"elements they hold (the state's figures: in the status above).</p>{table}</section>"
        )
    keys = "".join(f"<th>{_e(k)}</th>" for k in spec.keys)
    rows = "".join(
        "<tr>"
        + "".join(f"<td>{_e(k)}</td>" for k in w.key)
        + f"<td>{_e(_time(w.window_start_us))}</td><td>{_e(_time(w.window_end_us))}</td>"
        f'<td class="n">{w.panes}</td><td>{_e(w.last_timing)}</td>'
        f"<td>{_e(_time(w.first_pane_us))}</td><td>{_e(_time(w.last_pane_us))}</td></tr>"
        for w in windows
    )
    table = (
        f'<table id="open-windows-table"><tr>{keys}<th>window start</th><th>window end</th>'
        "<th>panes</th><th>latest pane</th><th>first pane at</th><th>latest pane at</th></tr>"
        f"{rows}</table>"
        if windows
        else "<p>no open windows in the pane log</p>"
    )
    return (
        f"{head}<p>Windows of the pane log not final yet, by the panes they emitted (the "
        "operator's state was not read: a window that never fired is not seen).</p>"
        f"{table}</section>"
    )


def _runs_section(runs: Sequence[RunRecord], last: int) -> str:
    shown = list(reversed(runs[-last:])) if last > 0 else []
    cols = (
        "run",
        "started",
        "seconds",
        "outcome",
        "mode",
        "batches",
        "records",
        "panes (early/on time/late)",
        "late",
        "rejected",
        "watermark after",
        "skew",
        "error",
    )
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = []
    for r in shown:
        skew = skew_us(r)
        cells = (
            r.run_id,
            _time(r.started_us),
            "—" if r.seconds is None else f"{r.seconds:.1f}",
            r.outcome,
            r.mode,
            r.batches,
            r.records,
            f"{r.panes} ({r.early}/{r.on_time}/{r.late_panes})",
            r.late,
            r.rejected,
            _time(r.watermark_after_us),
            "—" if skew is None else duration_text(skew),
            r.error or "",
        )
        body.append(
            f'<tr class="outcome-{_e(r.outcome)}">'
            + "".join(f"<td>{_e(c)}</td>" for c in cells)
            + "</tr>"
        )
    return (
        '<section id="runs-section"><h2>Runs</h2>'
        f'<p><span id="run-count">{len(runs)}</span> runs recorded'
        f"{f'; the last {len(shown)}, newest first' if shown else ''}.</p>"
        f'<table id="runs"><tr>{head}</tr>{"".join(body)}'
        "</table></section>"
    )


_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1200px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
table.fields table.fields { font-size: 1em; }
td.n { text-align: right; }
#last-run-fields, #runs, #open-windows-table { display: block; overflow-x: auto; max-width: 100%; }
.state { font-size: 1.3em; font-weight: bold; }
.state-ok { color: #1e7e34; } .state-never_run { color: #666; }
.state-lagging, .state-failed { color: #b00020; }
.outcome-failed, .outcome-killed { color: #b00020; } .outcome-stopped { color: #a35a00; }
pre { white-space: pre-wrap; background: #fff4f4; border: 1px solid #e6b3b3; padding: 6px; }
img { max-width: 100%; height: auto; }
.none { color: #888; }
"""


def render_report(
    spec: ViewSpec,
    runs: Sequence[RunRecord],
    status: Any | None = None,
    windows: list[OpenWindow] | None = None,
    *,
    largest: Sequence[Any] | None = None,
    last: int = LAST_RUNS,
) -> str:
    """The report's HTML (see the module doc) for ``runs`` (oldest first), ``status`` (a
    dataclass, or None) and the open windows: ``largest`` (the operator's state's largest open
    windows, dataclasses) when given, else ``windows`` (the pane log's, :func:`open_windows`)."""
    with tempfile.TemporaryDirectory(prefix="panestore-report-") as work:
        pictures = [
            _picture("skew", "Watermark vs processing time (skew)", skew_plot, runs, work),
            _picture("panes", "Panes per run by timing", panes_plot, runs, work),
            _picture("dropped", "Late and rejected records over time", dropped_plot, runs, work),
        ]
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # nothing from a network, no script: the page is what it shows
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">",
        f"<title>panestore report: {_e(spec.name)}</title><style>{_STYLE}</style></head><body>",
        f'<h1 id="title">{_e(spec.name)}: pipeline report</h1>',
        f'<p id="generated">lake {_e(spec.lake)}; written {_e(now)}</p>',
        _status_section(status, runs),
        *pictures,
        _open_windows_section(spec, windows or [], largest),
        _runs_section(runs, last),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_report(
    spec: ViewSpec,
    out_dir: str,
    status: Any | None = None,
    *,
    largest: Sequence[Any] | None = None,
    last: int = LAST_RUNS,
) -> str:
    """Write ``out_dir/index.html`` (the directory is created) for ``spec``'s lake, with
    ``status`` (the caller's reading of the lake's status: a dataclass, or None) and ``largest``
    (the largest open windows of the operator's state, dataclasses; None: not read, the open
    windows are then read from the pane log); returns the file's path."""
    runs = read_runs(spec)
    windows = open_windows(spec) if largest is None else []
    page = render_report(spec, runs, status, windows, largest=largest, last=last)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "index.html")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return path


__all__ = [
    "LAST_RUNS",
    "OPEN_WINDOWS",
    "OpenWindow",
    "open_windows",
    "render_report",
    "write_report",
]
