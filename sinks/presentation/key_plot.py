"""A picture of how a key's windows evolved, in the style of the Dataflow paper's figures.

Event time runs across, processing time up. Each pane is a box spanning its window in event time,
drawn at the processing time it was emitted, labelled with its value, index and timing (EARLY
yellow, ON_TIME green, LATE purple); retractions are hatched red boxes with the withdrawn value.
The watermark at each emission is the line (event time reached vs processing time). Elements are
dots at (event time, processing time of arrival) when they are known: raw elements are not in the
lake, so the CLI plots dropped elements from the ``late`` table and, when given, the elements of
the landing zone (``elements=``: rows with ``ts_us`` and optionally ``processing_time_us``; without
it an element is drawn at the processing time of the first pane of its window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from sinks.lake import InvalidRequest, ViewSpec
from sinks.presentation.duck import connect, history_rows
from sinks.verification import elements_table

COLORS = {"EARLY": "#f2c94c", "ON_TIME": "#6fcf97", "LATE": "#bb6bd9"}


def _finite(us: int, lo: int, hi: int) -> int:
    return min(max(us, lo), hi)


@dataclass(frozen=True)
class _Frame:
    """The plotted ranges: event time ``lo..hi`` across, processing time up; ``h`` is the height
    of a pane's box (in processing time); ``x``/``y`` map times to axes fractions and back."""

    lo: int
    hi: int
    ptlo: int
    pthi: int
    h: int
    x: tuple[Callable[[float], float], Callable[[float], float]]
    y: tuple[Callable[[float], float], Callable[[float], float]]


def plot(
    spec: ViewSpec,
    key: Any,
    out: str,
    *,
    window_start: int | None = None,
    elements: Any = None,
    late: bool = True,
    title: str | None = None,
) -> str:
    """Write a PNG of ``key``'s panes (and elements, watermark) to ``out``; returns ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = history_rows(spec, key, window_start)
    if not rows:
        raise InvalidRequest(f"no panes for key {key!r}")
    keys = spec.key_of(key)
    dropped = _dropped(spec, keys) if late else []
    el_points = _element_points(spec, keys, elements, rows)
    frame = _frame(rows, dropped, el_points)
    fig, ax = plt.subplots(figsize=(11, 6.5), dpi=110)
    _draw_panes(ax, spec, rows, frame)
    _draw_watermark(ax, rows, frame)
    _draw_points(ax, el_points, dropped, frame)
    _decorate(ax, spec, keys, frame, title, bool(el_points))
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def _dropped(spec: ViewSpec, keys: tuple) -> list[tuple]:
    """(timestamp, processing time, reason) of the key's dropped elements (the ``late`` table)."""
    con = connect(spec)
    try:
        tables = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views()"
            ).fetchall()
        }
        if "late" not in tables:
            return []
        where = " AND ".join(f'"{k}" = ?' for k in spec.keys)
        return con.execute(
            f"SELECT timestamp_us, processing_time_us, reason FROM late WHERE {where}",
            list(keys),
        ).fetchall()
    finally:
        con.close()


def _frame(rows: list[dict], dropped: list[tuple], el_points: list[tuple]) -> _Frame:
    """The ranges of the finite windows, elements and drops, padded, and the pane stacking."""
    finite = [v for r in rows for v in (r["window_start_us"], r["window_end_us"]) if abs(v) < 2**62]
    finite += [d[0] for d in dropped]
    finite += [p[0] for p in el_points]
    lo, hi = (min(finite), max(finite)) if finite else (0, 1)
    pad = max(1, (hi - lo) // 20)
    lo, hi = lo - pad, hi + pad
    pts = [r["processing_time_us"] for r in rows if r["processing_time_us"] is not None]
    stack = max([sum(1 for r in rows if r["processing_time_us"] == p) for p in set(pts)] or [1])
    pts += [d[1] for d in dropped if d[1] is not None] + [p[1] for p in el_points]
    ptlo, pthi = min(pts), max(pts)
    h = max(1, (pthi - ptlo) // 18)
    return _Frame(lo, hi, ptlo, pthi, h, _scale(lo, hi), _scale(ptlo - h, pthi + (stack + 1) * h))


def _draw_panes(ax: Any, spec: ViewSpec, rows: list[dict], frame: _Frame) -> None:
    """Pane boxes, stacked slightly when several share a processing time."""
    from matplotlib.patches import Rectangle

    sx, sy, h = frame.x[0], frame.y[0], frame.h
    seen: dict[Any, int] = {}
    for r in rows:
        ws = _finite(r["window_start_us"], frame.lo, frame.hi)
        we = _finite(r["window_end_us"], frame.lo, frame.hi)
        pt = r["processing_time_us"]
        slot = seen.get(pt, 0)  # retractions come first: they sit below the new pane
        seen[pt] = slot + 1
        y = pt + slot * h * 0.95
        x0, x1 = sx(ws), sx(we)
        y0 = sy(y - h * 0.4)
        height = sy(y + h * 0.4) - y0
        retract = r["is_retraction"]
        box = Rectangle(
            (x0, y0),
            x1 - x0,
            height,
            facecolor="white" if retract else COLORS.get(r["timing"], "#cccccc"),
            edgecolor="#c0392b" if retract else "#333333",
            hatch="///" if retract else None,
            linewidth=1.2,
            alpha=0.9,
        )
        ax.add_patch(box)
        value = ", ".join(_fmt(r[v]) for v in spec.value_names)
        label = f"{'-' if retract else ''}{value}  #{r['pane_index']} {r['timing']}"
        ax.text(
            (x0 + x1) / 2,
            y0 + height / 2,
            label,
            ha="center",
            va="center",
            fontsize=8,
            color="#c0392b" if retract else "black",
            fontweight="normal" if retract else "bold",
            bbox=dict(facecolor="white", alpha=0.8, pad=0.6, edgecolor="none") if retract else None,
        )


def _draw_watermark(ax: Any, rows: list[dict], frame: _Frame) -> None:
    """The watermark: event time reached at each processing time of an emission."""
    wm = sorted(
        {
            (r["processing_time_us"], r["watermark_us"])
            for r in rows
            if r["watermark_us"] is not None and r["processing_time_us"] is not None
        }
    )
    if wm:
        xs = [frame.x[0](_finite(w, frame.lo, frame.hi)) for _, w in wm]
        ys = [frame.y[0](pt) for pt, _ in wm]
        ax.step(xs, ys, where="post", color="#2d9cdb", linewidth=2, label="watermark")


def _draw_points(ax: Any, el_points: list[tuple], dropped: list[tuple], frame: _Frame) -> None:
    """Elements (dots, labelled with their values) and dropped elements (crosses)."""
    sx, sy = frame.x[0], frame.y[0]
    if el_points:
        ax.scatter(
            [sx(p[0]) for p in el_points],
            [sy(p[1]) for p in el_points],
            s=28,
            color="#222222",
            zorder=3,
            label="elements",
        )
        for x, y, v in el_points:
            if v is not None:
                ax.annotate(
                    _fmt(v), (sx(x), sy(y)), textcoords="offset points", xytext=(4, 4), fontsize=7
                )
    if dropped:
        ax.scatter(
            [sx(d[0]) for d in dropped],
            [sy(d[1] if d[1] is not None else frame.ptlo) for d in dropped],
            marker="x",
            s=50,
            color="#c0392b",
            zorder=3,
            label="dropped (late table)",
        )


def _decorate(
    ax: Any, spec: ViewSpec, keys: tuple, frame: _Frame, title: str | None, has_elements: bool
) -> None:
    """Axes, ticks, title and legend."""
    from matplotlib.patches import Patch

    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ticks = [i / 6 for i in range(7)]
    ax.set_xticks(ticks, [_tick(frame.x[1](t), frame.hi - frame.lo) for t in ticks])
    ax.set_yticks(ticks, [_tick(frame.y[1](t), frame.pthi - frame.ptlo) for t in ticks])
    ax.set_xlabel("event time")
    ax.set_ylabel("processing time")
    k = keys[0] if len(keys) == 1 else keys
    note = "" if has_elements else "  (raw elements not in the lake: panes only)"
    ax.set_title(
        title or f"{spec.name}: key {k!r} — {spec.window_fn}, {spec.mode.name.lower()}{note}",
        fontsize=10,
    )
    handles = [Patch(facecolor=c, edgecolor="#333333", label=t) for t, c in COLORS.items()]
    handles.append(Patch(facecolor="white", edgecolor="#c0392b", hatch="///", label="retraction"))
    h2, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + h2, loc="upper left", fontsize=8, framealpha=0.9)
    ax.grid(True, alpha=0.25)


def _element_points(spec, keys, elements, rows) -> list[tuple[int, int, Any]]:
    if elements is None:
        return []
    if not isinstance(elements, pa.Table):
        elements = elements_table(spec, elements)
    out = []
    first_pt: dict[tuple[int, int], int] = {}
    for r in rows:
        w = (r["window_start_us"], r["window_end_us"])
        if not r["is_retraction"] and w not in first_pt:
            first_pt[w] = r["processing_time_us"]
    value_col = next(
        (c for c in elements.column_names if c not in (*spec.keys, "ts_us", "processing_time_us")),
        None,
    )
    for e in elements.to_pylist():
        if tuple(e[k] for k in spec.keys) != tuple(keys):
            continue
        ts = e["ts_us"]
        pt = e.get("processing_time_us")
        if pt is None:
            cands = [p for (s, en), p in first_pt.items() if s <= ts < en and p is not None]
            if not cands:
                continue
            pt = min(cands)
        out.append((ts, pt, e.get(value_col) if value_col else None))
    return out


def _scale(lo: int, hi: int):
    span = max(1, hi - lo)
    return (lambda v: (v - lo) / span), (lambda f: lo + f * span)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _tick(us: float, span: int) -> str:
    if abs(us) > 2**62:
        return "∞"
    if abs(us) < 86_400e6:  # model time near 0 (tests, simulations): minutes:seconds
        sign, secs = ("-" if us < 0 else ""), abs(us) / 1e6
        return f"{sign}{int(secs // 60)}:{secs % 60:04.1f}"
    dt = datetime.fromtimestamp(us / 1e6, tz=timezone.utc)
    return dt.strftime("%m-%d %H:%M:%S" if span < 86_400e6 * 3 else "%Y-%m-%d %H:%M")
