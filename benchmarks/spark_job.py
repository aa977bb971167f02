"""Spark job benchmark: the 1,000,000-event workload from files, through Spark, into Delta.

    .venv/bin/python benchmarks/spark_job.py [--events N] [--format jsonl|parquet]
                                             [--files-per-batch F] [--repeat R] [--no-native]

The workload of ``benchmarks/workload.py`` (1,000 keys, one hour of event time, ~10% out of order
by up to 5 minutes) is written as one file per bundle (10,000 events) into a landing directory.
Then, in one invocation, ``--repeat`` times (default 3) and alternating:

1. **panestore**: ``panestore run`` in scheduled mode (``availableNow``) on a fresh lake:
   1-minute fixed windows, ``AfterWatermark(early=AfterCount(100), late=AfterCount(1))``,
   accumulating sum, watermark delay 5 minutes, the engine in ``transformWithStateInPandas``,
   panes committed to the Delta pane log (delta-rs) with app transactions.
2. **Spark native** (the ceiling): a Structured Streaming windowed aggregation of the same files
   (``groupBy(window(ts, "1 minute"), key).sum``, same watermark, append mode, ``availableNow``),
   written to a Delta table with delta-rs. No triggers, no per-pane history: one row per window.

Each measurement runs in a fresh process, as a scheduled run does: the JVM and session are
started first, then the run is timed (a JVM warmed by an earlier run in the same process would
flatter whichever runs second). It prints events/s end to end for each run and the medians, the
ratio of the medians, and the peak resident memory of the process tree (driver, JVM, Python
workers). Figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workload import make_bundles  # noqa: E402

TRIGGER = "AfterWatermark(early=AfterCount(100), late=AfterCount(1))"


def _iso(us: int) -> str:
    s, frac = divmod(us, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac:06d}Z"


def write_landing(directory: Path, bundles, fmt: str) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for i, (elements, _wm, _pt) in enumerate(bundles):
        name = directory / f"part-{i:05d}.{fmt}"
        if fmt == "jsonl":
            with open(name, "w") as f:
                for key, value, ts in elements:
                    f.write(json.dumps({"key": key, "ts": _iso(ts), "value": value}) + "\n")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            keys, values, tss = zip(*elements, strict=True)
            pq.write_table(pa.table({
                "key": pa.array(keys, pa.string()),
                "ts": pa.array(tss, pa.timestamp("us", tz="UTC")),
                "value": pa.array(values, pa.int64()),
            }), name)  # fmt: skip
        n += len(elements)
    return n


class PeakRSS:
    """Peak resident set size of this process and all its descendants (Linux /proc)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _tree_rss(self) -> int:
        children: dict[int, list[int]] = {}
        rss: dict[int, int] = {}
        page = os.sysconf("SC_PAGE_SIZE")
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(d), int(stat[1])
            children.setdefault(ppid, []).append(pid)
            rss[pid] = int(stat[21]) * page
        total, todo = 0, [os.getpid()]
        while todo:
            pid = todo.pop()
            total += rss.get(pid, 0)
            todo.extend(children.get(pid, ()))
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def panestore_pipeline(landing: Path, lake: Path, fmt: str, files_per_batch: int):
    from jobs.pipeline import pipeline_from_dict

    return pipeline_from_dict({
        "name": "bench", "lake": str(lake), "keys": ["key"], "event_time": "ts",
        "window": "FixedWindows(1m)", "trigger": TRIGGER, "accumulation_mode": "accumulating",
        "source": {"format": fmt, "path": str(landing), "max_files_per_trigger": files_per_batch,
                   "schema": {"key": "string", "ts": "timestamp", "value": "long"}},
        "watermark": {"delay": "5m"},
        "aggregates": {"value": "sum(value)"},
    })  # fmt: skip


def native(spark, landing: Path, out: Path, fmt: str, files_per_batch: int) -> tuple[float, int]:
    """Spark's own windowed aggregation of the same files into Delta (delta-rs)."""
    from deltalake import write_deltalake
    from pyspark.sql import functions as F

    reader = spark.readStream.schema("key string, ts timestamp, value bigint")
    reader = reader.option("maxFilesPerTrigger", files_per_batch).format(
        "json" if fmt == "jsonl" else "parquet"
    )
    df = reader.load(str(landing))
    agg = (
        df.withWatermark("ts", "5 minutes")
        .groupBy(F.window("ts", "1 minute"), "key")
        .agg(F.sum("value").alias("value"), F.count("*").alias("n"))
        .select(
            "key",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "value",
            "n",
        )
    )
    rows = [0]

    def sink(batch, batch_id):
        t = batch.toArrow()
        rows[0] += t.num_rows
        write_deltalake(str(out), t, mode="append")

    start = time.perf_counter()
    writer = agg.writeStream.outputMode("append").foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(out) + "_ckpt")
    q = writer.trigger(availableNow=True).start()
    q.awaitTermination()
    return time.perf_counter() - start, rows[0]


def measure_once(what: str, work: Path, fmt: str, files_per_batch: int, shuffle: int) -> dict:
    """One measurement in this (fresh) process: JVM and session up first, then the timed run."""
    from jobs.quiet import quiet_spark_stderr
    from jobs.run import run
    from jobs.spark import get_session

    quiet_spark_stderr()
    landing = work / "landing"
    with PeakRSS() as mem:
        spark = get_session("panestore-bench", shuffle_partitions=shuffle)
        spark.range(1).count()  # JVM and session up before timing
        if what == "panestore":
            pipeline = panestore_pipeline(landing, work / "lake", fmt, files_per_batch)
            start = time.perf_counter()
            result = run(pipeline, spark=spark, progress=None)
            secs = time.perf_counter() - start
            from deltalake import DeltaTable

            out = {
                "batches": len(result.batches),
                "panes": DeltaTable(pipeline.table_path("panes")).to_pyarrow_table(
                    columns=["pane_id"]).num_rows,
                "late": DeltaTable(pipeline.table_path("late")).to_pyarrow_table(
                    columns=["record_id"]).num_rows,
            }  # fmt: skip
        else:
            secs, rows = native(spark, landing, work / "native", fmt, files_per_batch)
            out = {"rows": rows}
        spark.stop()
    return {"seconds": secs, "peak_rss": mem.peak, **out}


def _measure_in_child(what: str, work: Path, args: argparse.Namespace) -> dict:
    import subprocess

    for d in ("lake", "native", "native_ckpt"):
        shutil.rmtree(work / d, ignore_errors=True)
    cmd = [sys.executable, __file__, "--measure", what, "--keep", str(work),
           "--format", args.format, "--files-per-batch", str(args.files_per_batch),
           "--shuffle-partitions", str(args.shuffle_partitions)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{what} measurement failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    ap.add_argument(
        "--files-per-batch",
        type=int,
        default=100,
        help="maxFilesPerTrigger (default: all 100 files in one micro-batch)",
    )
    ap.add_argument("--shuffle-partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each (median shown)")
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument("--keep", help="work directory to use and keep (default: a temp dir)")
    ap.add_argument("--measure", choices=("panestore", "native"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="panestore-bench-"))
    if args.measure:  # a child: one measurement, printed as JSON
        print(json.dumps(measure_once(args.measure, work, args.format, args.files_per_batch,
                                      args.shuffle_partitions)))  # fmt: skip
        return
    landing = work / "landing"
    if landing.exists():
        shutil.rmtree(landing)
    bundles = make_bundles(args.events)
    t = time.perf_counter()
    n = write_landing(landing, bundles, args.format)
    print(f"workload: {n:,} events in {len(bundles)} {args.format} files "
          f"({time.perf_counter() - t:.1f}s to write) under {work}", flush=True)  # fmt: skip
    ours, theirs = [], []
    for i in range(args.repeat):
        m = _measure_in_child("panestore", work, args)
        ours.append(m)
        print(f"  run {i + 1}: panestore {m['seconds']:.1f}s = {n / m['seconds']:,.0f} events/s "
              f"({m['batches']} batches, {m['panes']:,} panes, {m['late']:,} late, peak "
              f"{m['peak_rss'] / 2**20:,.0f} MiB)", flush=True)  # fmt: skip
        if not args.no_native:
            m = _measure_in_child("native", work, args)
            theirs.append(m)
            print(f"  run {i + 1}: native {m['seconds']:.1f}s = {n / m['seconds']:,.0f} events/s "
                  f"({m['rows']:,} window rows)", flush=True)  # fmt: skip
    med = statistics.median(m["seconds"] for m in ours)
    print(f"panestore: {n:,} events, median {med:.1f}s of {args.repeat} = {n / med:,.0f} events/s "
          f"end to end (each run in a fresh process: JVM up, then the timed run)")  # fmt: skip
    if theirs:
        nat = statistics.median(m["seconds"] for m in theirs)
        print(f"spark native windowed aggregation: median {nat:.1f}s = {n / nat:,.0f} events/s")
        print(f"ratio panestore / native: {nat / med:.2f} (native is {med / nat:.1f}x faster)")
    print(f"peak memory (process tree RSS) of a panestore run: "
          f"{max(m['peak_rss'] for m in ours) / 2**20:,.0f} MiB")  # fmt: skip
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
