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
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

from panes import AccumulationMode, FixedWindows, combiners
from sinks.delta_append import ExactlyOnceAppender
from sinks.lake_format import WINDOW_DAY
from sinks.materializer import Materializer
from sinks.pane_log import PaneLogLayout, pane_log_schema
from sinks.spec import ViewSpec
from sinks.tables import open_view, table_identity
from sinks.view_merge import days_filter

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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--view", type=int, default=1_000_000)
    ap.add_argument("--mode", default="accumulating")
    ap.add_argument("--shape", default="streaming,uniform", help="streaming, uniform or both")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    for shape in a.shape.split(","):
        measure(shape.strip(), a)


if __name__ == "__main__":
    main()
