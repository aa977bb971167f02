"""Materializer throughput: fold 1,000,000 pane rows into a view of 1,000,000 rows, in pane-log
versions of 100,000 rows, one materializer run per version; compare with a plain delta-rs MERGE
of the same changes already reduced to one row per (key, window), measured in the same run.

    .venv/bin/python -m benchmarks.materialize [--rows 1000000] [--batch 100000]
        [--shape streaming,uniform]

Two shapes of pane-log versions, each over a 1,000,000-row view, each printed with its ratio:

* ``streaming`` (what a pipeline writes): 1,000 keys x 1,000 hourly windows (42 days). Each
  version opens the next hours' windows (10% of its rows) and updates windows of the last two
  days (90%; the allowed lateness bounds how far back panes go), several panes of one window
  in one version included. The view's days partitioning lets a MERGE rewrite only those days.
* ``uniform`` (the worst case): 100,000 keys x 10 one-minute windows; 90% of the rows update
  windows picked uniformly from the whole view, 10% open new ones. Every MERGE rewrites the
  whole view.

Pane-log rows are built in Arrow and appended through ``ExactlyOnceAppender`` (the pane-log
writer's per-row Python work is not what is measured). The plain MERGE gets the same day filter
(the best a hand-written MERGE can do) and runs on a copy of the same initial view.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

import numpy as np
import pyarrow as pa

from benchmarks.spark_job import PeakMemory
from panes import AccumulationMode, FixedWindows, combiners
from sinks.fold import Materializer, days_filter
from sinks.lake import (
    WINDOW_DAY,
    ExactlyOnceAppender,
    PaneLogLayout,
    ViewSpec,
    open_view,
    pane_log_schema,
    table_identity,
)

S = 1_000_000
MINUTE, HOUR = 60 * S, 3600 * S


def pane_rows(
    keys: np.ndarray,
    starts: np.ndarray,
    size: int,
    index: np.ndarray,
    values: np.ndarray,
    batch_id: int,
    layout: PaneLogLayout,
) -> pa.Table:
    n = len(keys)
    schema = pane_log_schema(layout)
    ts = pa.array(starts + size - 1, pa.int64())
    cols = {
        "pipeline_id": pa.array(["bench"] * n),
        "key": pa.array(keys.astype(str)),
        "window_start_us": pa.array(starts, pa.int64()),
        "window_end_us": pa.array(starts + size, pa.int64()),
        "window_start": pa.array(starts, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "window_end": pa.array(starts + size, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "value": pa.array(values, pa.float64()),
        "timestamp_us": ts,
        "timestamp": ts.cast(pa.timestamp("us", tz="UTC")),
        "pane_index": pa.array(index, pa.int64()),
        "nonspeculative_index": pa.array(np.full(n, -1), pa.int64()),
        "timing": pa.array(["EARLY"] * n),
        "is_first": pa.array(index == 0),
        "is_last": pa.array(np.zeros(n, bool)),
        "is_retraction": pa.array(np.zeros(n, bool)),
        "supersedes": pa.array([[]] * n, schema.field("supersedes").type),
        "watermark_us": pa.array(np.zeros(n, np.int64)),
        "processing_time_us": pa.array(np.full(n, batch_id * S, np.int64)),
        "accumulator": pa.nulls(n, pa.string()),  # sums: the value is the accumulator
        "batch_id": pa.array(np.full(n, batch_id, np.int64)),
        "pane_id": pa.array([f"{batch_id}-{i}" for i in range(n)]),
    }
    return pa.table(cols).cast(schema)


def initial_windows(shape: str, view: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(keys, window starts) of the initial view, and the window size."""
    if shape == "streaming":
        nkeys = 1000
        hours = view // nkeys
        return np.tile(np.arange(nkeys), hours), np.repeat(np.arange(hours) * HOUR, nkeys), HOUR
    nkeys = view // 10
    return np.repeat(np.arange(nkeys), 10), np.tile(np.arange(10) * MINUTE, nkeys), MINUTE


def versions(shape: str, keys: np.ndarray, starts: np.ndarray, batch: int, count: int, rng):
    """Per version: (keys, window starts) of its pane rows (see the module doc)."""
    n_new = batch // 10
    if shape == "streaming":
        nkeys = int(keys.max()) + 1
        end = int(starts.max()) + HOUR
        for _ in range(count):
            hours = -(-n_new // nkeys)
            new_k = np.tile(np.arange(nkeys), hours)[:n_new]
            new_s = end + np.repeat(np.arange(hours) * HOUR, nkeys)[:n_new]
            recent = batch - n_new  # windows of the last 48 hours (new ones included)
            k = rng.integers(0, nkeys, recent)
            s = end + hours * HOUR - rng.integers(1, 49, recent) * HOUR
            end += hours * HOUR
            yield np.concatenate([new_k, k]), np.concatenate([new_s, s])
        return
    nkeys = int(keys.max()) + 1
    for _ in range(count):
        pick = rng.integers(0, len(keys), batch - n_new)
        k = np.concatenate([keys[pick], rng.integers(nkeys, nkeys * 2, n_new)])
        s = np.concatenate([starts[pick], rng.integers(0, 10, n_new) * MINUTE])
        yield k, s


def measure(shape: str, a: argparse.Namespace) -> None:
    from deltalake import DeltaTable, write_deltalake

    mode = AccumulationMode[a.mode.upper()]
    lake = tempfile.mkdtemp(prefix="panestore-bench-")
    layout = PaneLogLayout()
    rng = np.random.default_rng(1)
    keys, starts, size = initial_windows(shape, a.view)
    spec = ViewSpec(
        "bench",
        lake,
        ("key",),
        (("value", combiners.sum()),),
        FixedWindows(size),
        mode,
        combine_fn=combiners.sum(),
    )
    app = ExactlyOnceAppender(
        spec.table_path("panes"),
        "bench",
        pane_log_schema(layout),
        kind="pane_log",
        **table_identity(spec, "panes", "pane log"),
    )
    t = time.perf_counter()
    n = len(keys)
    app.append(0, pane_rows(keys, starts, size, np.zeros(n, np.int64), rng.random(n), 0, layout))
    Materializer(spec).run()
    initial_view_version = open_view(spec).version()
    mat = Materializer(spec, max_versions=1)
    print(
        f"[{shape}] setup: view of {open_view(spec).to_pyarrow_table().num_rows:,} rows "
        f"in {time.perf_counter() - t:.1f}s"
    )
    initial = set(zip(keys.tolist(), starts.tolist(), strict=True))
    next_index: dict = {}
    logged = []
    batches = a.rows // a.batch
    for b, (k, s) in enumerate(versions(shape, keys, starts, a.batch, batches, rng), start=1):
        idx = np.empty(len(k), np.int64)
        for i, at in enumerate(zip(k.tolist(), s.tolist(), strict=True)):
            j = next_index.get(at, 1 if at in initial else 0)
            idx[i] = j
            next_index[at] = j + 1
        rows = pane_rows(k, s, size, idx, rng.random(len(k)), b, layout)
        app.append(b, rows)
        logged.append(rows)
    pane_rows_total, times = 0, []
    for _ in range(batches):
        t = time.perf_counter()
        r = mat.run()
        times.append(time.perf_counter() - t)
        pane_rows_total += r.pane_rows
        m = r.metrics
        print(
            f"  fold v{r.folded_to}: {r.pane_rows:,} pane rows -> {r.changes:,} changes "
            f"({r.path}; {m.get('num_target_files_scanned')} files rewritten, "
            f"{m.get('num_target_files_skipped_during_scan')} skipped) {r.seconds:.3f}s"
        )
    total = sum(times)
    rate = pane_rows_total / total
    print(
        f"[{shape}] materializer: {pane_rows_total:,} pane rows in {total:.2f}s = "
        f"{rate:,.0f} pane rows/s (median version {statistics.median(times):.3f}s)"
    )

    # baseline: plain MERGE of pre-reduced rows into a copy of the initial view
    import duckdb

    base = spec.table_path("baseline")
    initial_view = open_view(spec, version=initial_view_version).to_pyarrow_table()
    write_deltalake(base, initial_view, partition_by=[WINDOW_DAY])
    plain = 0.0
    for rows in logged:
        con = duckdb.connect()
        con.register("t", rows)
        red = con.sql("""SELECT key, window_start_us, window_end_us, window_start, value,
                                pane_index
                         FROM t QUALIFY row_number() OVER (PARTITION BY key, window_start_us
                         ORDER BY pane_index DESC) = 1""").to_arrow_table()
        red = red.append_column(WINDOW_DAY, red.column("window_start").cast(pa.date32()))
        dt = DeltaTable(base)
        predicate = (
            "t.key = s.key AND t.window_start_us = s.window_start_us AND "
            "t.window_end_us = s.window_end_us"
        )
        days = days_filter(red)
        if days:
            predicate += f" AND {days}"
        cols = ["key", "window_start_us", "window_end_us", "value", "pane_index", WINDOW_DAY]
        t = time.perf_counter()
        (
            dt.merge(red, predicate, source_alias="s", target_alias="t")
            .when_matched_update({"value": "s.value", "pane_index": "s.pane_index"})
            .when_not_matched_insert({**{c: f"s.{c}" for c in cols}, "pane_log_version": "0"})
            .execute()
        )
        plain += time.perf_counter() - t
    print(
        f"[{shape}] plain delta-rs MERGE of pre-reduced rows: {plain:.2f}s = "
        f"{pane_rows_total / plain:,.0f} pane rows/s"
    )
    print(f"[{shape}] ratio materializer / plain MERGE time: {total / plain:.2f}")
    if not a.keep:
        shutil.rmtree(lake, ignore_errors=True)


# -- the fold at any volume (--scale) -------------------------------------------------------------

SCALE_KEYS = 10_000
SCALE_VERSION_ROWS = 1_000_000


def scale_spec(lake: str, mode: AccumulationMode, memory: int | None = None) -> ViewSpec:
    spec = ViewSpec(
        "bench",
        lake,
        ("key",),
        (("value", combiners.sum()),),
        FixedWindows(HOUR),
        mode,
        combine_fn=combiners.sum(),
    )
    return spec if memory is None else replace(spec, fold_memory=memory)


def scale_appender(lake: str, mode: AccumulationMode, layout: PaneLogLayout) -> ExactlyOnceAppender:
    """The appender of the pane log of :func:`scale_spec`'s pipeline."""
    spec = scale_spec(lake, mode)
    return ExactlyOnceAppender(
        spec.table_path("panes"),
        "bench",
        pane_log_schema(layout),
        kind="pane_log",
        **table_identity(spec, "panes", "pane log"),
    )


def write_scale_pane_log(lake: str, rows: int, mode: AccumulationMode) -> int:
    """A pane log of ``rows`` pane rows in versions of :data:`SCALE_VERSION_ROWS`: 10,000 keys x
    hourly windows, three panes a window (pane index 0, 1, 2: early, on time, late), the
    windows in time order; returns the view's rows (windows)."""
    layout = PaneLogLayout()
    app = scale_appender(lake, mode, layout)
    rng = np.random.default_rng(7)
    per_window = 3 * SCALE_KEYS
    for b, first in enumerate(range(0, rows, SCALE_VERSION_ROWS)):
        r = np.arange(first, min(rows, first + SCALE_VERSION_ROWS), dtype=np.int64)
        keys, index = r % SCALE_KEYS, (r // SCALE_KEYS) % 3
        starts = (r // per_window) * HOUR
        app.append(b, pane_rows(keys, starts, HOUR, index, rng.random(len(r)), b, layout))
    return -(-rows // 3)


def append_recent_panes(lake: str, rows: int, count: int, mode: AccumulationMode) -> None:
    """One more pane-log version of ``count`` panes: new panes (index 3) of windows of the last
    day of the log written by :func:`write_scale_pane_log` (``rows``), random keys."""
    layout = PaneLogLayout()
    app = scale_appender(lake, mode, layout)
    rng = np.random.default_rng(11)
    last_hour = (rows - 1) // (3 * SCALE_KEYS)
    picks = rng.choice(SCALE_KEYS * 24, size=count, replace=False)
    keys = picks % SCALE_KEYS
    starts = (last_hour - picks // SCALE_KEYS) * HOUR
    index = np.full(count, 3, np.int64)
    batch = -(-rows // SCALE_VERSION_ROWS)
    app.append(batch, pane_rows(keys, starts, HOUR, index, rng.random(count), batch, layout))


def fold_in_child(lake: str, mode: str, memory: int | None, master: str | None = None) -> dict:
    """``Materializer(spec).run()`` in a fresh Python process: its result, the whole process's
    wall time and the peak memory of its process tree (the fold's worker processes included):
    ``peak_mib`` summed proportional set sizes, the targets' figure (each page shared by the
    worker server and its forked children counts once), ``rss_mib`` summed resident sets (the
    shared pages once per process: an overcount), sampled every 20 ms
    (:class:`benchmarks.spark_job.PeakMemory`); ``largest_mib``, the largest single process's
    high-water mark (``ru_maxrss``)."""
    cmd = [sys.executable, "-m", "benchmarks.materialize", "--fold-child", lake, "--mode", mode]
    if memory is not None:
        cmd += ["--memory", str(memory)]
    if master is not None:
        cmd += ["--master", master]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    with PeakMemory(proc.pid, interval=0.02) as memory:
        out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise SystemExit(f"the fold of {lake} failed (status {status})")
    got = json.loads(out.decode().strip().splitlines()[-1])
    got.update(
        wall=wall,
        peak_mib=memory.peak["pss"]["total"] / 2**20,
        rss_mib=memory.peak["rss"]["total"] / 2**20,
        largest_mib=usage.ru_maxrss / 1024,
    )
    return got


def fold_child(a: argparse.Namespace) -> None:
    spec = scale_spec(a.fold_child, AccumulationMode[a.mode.upper()], a.memory)
    spread = None
    if a.master:  # the pieces over Spark's executors, the session started before the fold
        from jobs.driver.fold_spread import SparkSpread
        from jobs.startup.session import get_session

        spread = SparkSpread(get_session("panestore-bench-fold", master=a.master))
    r = Materializer(spec, spread=spread).run()
    print(json.dumps({"pane_rows": r.pane_rows, "pieces": r.pieces, "seconds": r.seconds}))


def scale(a: argparse.Namespace) -> None:
    mode = AccumulationMode[a.mode.upper()]
    sizes = [parse_count(s) for s in a.scale.split(",")]
    memory = None if a.memory is None else a.memory
    found = []
    for rows in sizes:
        lake = tempfile.mkdtemp(prefix="panestore-fold-scale-")
        t = time.perf_counter()
        windows = write_scale_pane_log(lake, rows, mode)
        print(f"[{rows:,}] pane log written in {time.perf_counter() - t:.0f}s", flush=True)
        if a.master:  # the same backlog folded over Spark, into a copy of the lake
            copy = lake + "-spark"
            shutil.copytree(lake, copy)
            spark = fold_in_child(copy, a.mode, memory, a.master)
            print(
                f"[{rows:,}] fold over Spark ({a.master}): {spark['pieces']} pieces, "
                f"{spark['seconds']:.1f}s in the fold ({spark['wall']:.1f}s whole process, the "
                f"session's start included), peak of the driver {spark['peak_mib']:,.0f} MiB",
                flush=True,
            )
            shutil.rmtree(copy, ignore_errors=True)
        full = fold_in_child(lake, a.mode, memory)
        print(
            f"[{rows:,}] fold: {full['pane_rows']:,} pane rows in {full['pieces']} pieces -> "
            f"{windows:,} view rows: {full['wall']:.1f}s whole process ({full['seconds']:.1f}s "
            f"in the fold, {rows / full['wall']:,.0f} rows/s), peak {full['peak_mib']:,.0f} MiB "
            f"(resident sets summed {full['rss_mib']:,.0f}, largest process "
            f"{full['largest_mib']:,.0f})",
            flush=True,
        )
        append_recent_panes(lake, rows, a.incremental, mode)
        inc = fold_in_child(lake, a.mode, memory)
        print(
            f"[{rows:,}] incremental fold of {inc['pane_rows']:,} panes into the view of "
            f"{windows:,} rows: {inc['wall']:.2f}s whole process ({inc['seconds']:.2f}s in the "
            f"fold), peak {inc['peak_mib']:,.0f} MiB",
            flush=True,
        )
        found.append((rows, windows, full, inc))
        if not a.keep:
            shutil.rmtree(lake, ignore_errors=True)
    full0 = found[0][2]
    print(
        "\nrows        view rows   pieces  fold s  s per M rows  peak MiB  x first | inc s  inc MiB"
    )
    for rows, windows, full, inc in found:
        print(
            f"{rows:>11,} {windows:>11,} {full['pieces']:>6} {full['wall']:>7.1f} "
            f"{full['wall'] / rows * 1e6:>12.2f} {full['peak_mib']:>9,.0f} "
            f"{full['peak_mib'] / full0['peak_mib']:>7.2f} | {inc['wall']:>5.2f} "
            f"{inc['peak_mib']:>8,.0f}"
        )


def parse_count(text: str) -> int:
    """``3M``, ``300k`` or a number."""
    text = text.strip().upper()
    scale_ = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale_)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--view", type=int, default=1_000_000)
    ap.add_argument("--mode", default="accumulating")
    ap.add_argument("--shape", default="streaming,uniform", help="streaming, uniform or both")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument(
        "--scale",
        help="fold pane logs of these sizes (3M,10M,30M) from nothing, each in a fresh process, "
        "then an incremental fold into each view",
    )
    ap.add_argument("--incremental", type=int, default=1_000, help="panes of the incremental fold")
    ap.add_argument("--memory", type=int, help="the fold's memory in bytes (default: 512 MiB)")
    ap.add_argument("--fold-child", help=argparse.SUPPRESS)
    ap.add_argument(
        "--master",
        help="with --scale: also fold each backlog over Spark's executors (local[2], ...)",
    )
    a = ap.parse_args(argv)
    if a.fold_child:
        fold_child(a)
        return
    if a.scale:
        scale(a)
        return
    for shape in a.shape.split(","):
        measure(shape.strip(), a)


if __name__ == "__main__":
    main()
