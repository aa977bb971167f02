"""Materializer throughput: fold 1,000,000 pane rows into a view of 1,000,000 rows, in pane-log
versions of 100,000 rows, one materializer run per version; compare with a plain delta-rs MERGE
of the same changes already reduced to one row per (key, window), measured in the same run.

    .venv/bin/python -m benchmarks.materialize [--rows 1000000] [--batch 100000]
        [--mode accumulating]

Pane-log rows are built in Arrow and appended through ``ExactlyOnceAppender`` (the pane-log
writer's per-row Python work is not what is measured). Each 100,000-row version updates random
existing windows (several panes of one window in a version happen) and opens new ones.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

from panes import AccumulationMode, FixedWindows, combiners
from sinks.delta_append import ExactlyOnceAppender
from sinks.materializer import Materializer, open_view
from sinks.pane_log import PaneLogLayout, pane_log_schema
from sinks.spec import ViewSpec

S = 1_000_000
SIZE = 60 * S


def pane_rows(
    keys: np.ndarray,
    starts: np.ndarray,
    index: np.ndarray,
    values: np.ndarray,
    batch_id: int,
    layout: PaneLogLayout,
) -> pa.Table:
    n = len(keys)
    schema = pane_log_schema(layout)
    ts = pa.array(starts + SIZE - 1, pa.int64())
    cols = {
        "pipeline_id": pa.array(["bench"] * n),
        "key": pa.array(keys.astype(str)),
        "window_start_us": pa.array(starts, pa.int64()),
        "window_end_us": pa.array(starts + SIZE, pa.int64()),
        "window_start": pa.array(starts, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "window_end": pa.array(starts + SIZE, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--view", type=int, default=1_000_000)
    ap.add_argument("--mode", default="accumulating")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    mode = AccumulationMode[a.mode.upper()]
    lake = tempfile.mkdtemp(prefix="panestore-bench-")
    layout = PaneLogLayout()
    spec = ViewSpec(
        "bench",
        lake,
        ("key",),
        (("value", combiners.sum()),),
        FixedWindows(SIZE),
        mode,
        combine_fn=combiners.sum(),
    )
    rng = np.random.default_rng(1)
    app = ExactlyOnceAppender(
        spec.table_path("panes"), "bench", pane_log_schema(layout), kind="pane_log"
    )
    # the initial view: a.view windows (keys k0..kN, 10 windows each), folded from version 1
    nkeys = a.view // 10
    keys = np.repeat(np.arange(nkeys), 10)
    starts = np.tile(np.arange(10) * SIZE, nkeys)
    t = time.perf_counter()
    app.append(
        0, pane_rows(keys, starts, np.zeros(a.view, np.int64), rng.random(a.view), 0, layout)
    )
    Materializer(spec).run()
    initial_view_version = open_view(spec).version()
    mat = Materializer(spec, max_versions=1)
    print(
        f"setup: view of {open_view(spec).to_pyarrow_table().num_rows:,} rows "
        f"in {time.perf_counter() - t:.1f}s"
    )
    # the measured pane-log versions
    batches = a.rows // a.batch
    next_index: dict = {}
    reduced_batches = []
    for b in range(1, batches + 1):
        # 90% updates of existing windows (some windows twice), 10% new windows
        n_new = a.batch // 10
        pick = rng.integers(0, a.view, a.batch - n_new)
        k = np.concatenate([keys[pick], rng.integers(nkeys, nkeys * 2, n_new)])
        s = np.concatenate([starts[pick], rng.integers(0, 10, n_new) * SIZE])
        idx = np.empty(len(k), np.int64)
        for i, (kk, ss) in enumerate(zip(k.tolist(), s.tolist(), strict=True)):
            j = next_index.get((kk, ss), 1 if kk < nkeys else 0)
            idx[i] = j
            next_index[(kk, ss)] = j + 1
        rows = pane_rows(k, s, idx, rng.random(len(k)), b, layout)
        app.append(b, rows)
        reduced_batches.append(rows)
    total = 0.0
    pane_rows_total = 0
    for _ in range(batches):
        t = time.perf_counter()
        r = mat.run()
        total += time.perf_counter() - t
        pane_rows_total += r.pane_rows
        print(
            f"  fold v{r.folded_to}: {r.pane_rows:,} pane rows -> {r.changes:,} changes "
            f"({r.path}) {r.seconds:.3f}s"
        )
    rate = pane_rows_total / total
    print(f"materializer: {pane_rows_total:,} pane rows in {total:.2f}s = {rate:,.0f} pane rows/s")

    # baseline: plain MERGE of pre-reduced rows into a copy of the initial view
    from deltalake import DeltaTable

    base = spec.table_path("baseline")
    initial = open_view(spec, version=initial_view_version).to_pyarrow_table()
    from deltalake import write_deltalake

    write_deltalake(base, initial)
    import duckdb

    plain = 0.0
    for rows in reduced_batches:
        con = duckdb.connect()
        con.register("t", rows)
        red = con.sql("""SELECT key, window_start_us, window_end_us, value, pane_index
                         FROM t QUALIFY row_number() OVER (PARTITION BY key, window_start_us
                         ORDER BY pane_index DESC) = 1""").to_arrow_table()
        dt = DeltaTable(base)
        t = time.perf_counter()
        (
            dt.merge(
                red,
                "t.key = s.key AND t.window_start_us = s.window_start_us AND "
                "t.window_end_us = s.window_end_us",
                source_alias="s",
                target_alias="t",
            )
            .when_matched_update({"value": "s.value", "pane_index": "s.pane_index"})
            .when_not_matched_insert(
                {
                    "key": "s.key",
                    "window_start_us": "s.window_start_us",
                    "window_end_us": "s.window_end_us",
                    "value": "s.value",
                    "pane_index": "s.pane_index",
                    "pane_log_version": "0",
                }
            )
            .execute()
        )
        plain += time.perf_counter() - t
    print(
        f"plain delta-rs MERGE of pre-reduced rows: {plain:.2f}s = "
        f"{pane_rows_total / plain:,.0f} pane rows/s"
    )
    print(f"ratio materializer / plain MERGE time: {total / plain:.2f}")
    if not a.keep:
        shutil.rmtree(lake, ignore_errors=True)


if __name__ == "__main__":
    main()
