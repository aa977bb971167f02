"""Driver memory against a batch's output: one batch emitting ~1M, then ~5M pane rows.

    PYTHONPATH=. .venv/bin/python benchmarks/driver_memory.py [--panes 1000000,5000000]
        [--master local-cluster[2,1,2048]] [--driver-memory 1g]

Workload per size: 1,000 keys, each with events an hour apart, in ``SlidingWindows(60m, 1m)``
with ``Repeatedly(AfterCount(1))`` (discarding): every event is in 60 windows of its own and
fires one EARLY pane in each, so ``panes / 60`` events written as JSON-lines files make one
micro-batch (all files in one trigger) that emits ``panes`` pane rows (plus the panes its
watermark advance fires, if any).

Each size runs in a fresh process, as a scheduled run does, on ``--master`` (default: a local
cluster, so the executors are JVMs of their own and the driver's figures are the driver's; under
``local[N]`` the executors live in the driver's JVM). Printed per size: the pane rows committed,
the run's seconds, and the driver's peak resident memory, separately for its Python process
(``ru_maxrss``) and its JVM (``VmHWM``), each also right after the session started. The JVM's
heap is fixed by ``--driver-memory`` (``spark.driver.memory``, its ``-Xmx``). Figures, not a test:
flat in the batch's output means the 5M figures within 20% of the 1M ones.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

KEYS = 1_000
WINDOWS_PER_EVENT = 60
EVENTS_PER_FILE = 20_000
HOUR_US = 3_600 * 1_000_000


def _iso(us: int) -> str:
    s, frac = divmod(us, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac:06d}Z"


def write_landing(directory: Path, events: int) -> None:
    """``events`` events: key ``i % KEYS``, the events of a key 61 minutes apart."""
    directory.mkdir(parents=True, exist_ok=True)
    start = 1_704_067_200 * 1_000_000
    for f in range(0, events, EVENTS_PER_FILE):
        with open(directory / f"part-{f // EVENTS_PER_FILE:05d}.jsonl", "w") as out:
            for i in range(f, min(f + EVENTS_PER_FILE, events)):
                ts = start + (i // KEYS) * (HOUR_US + 60_000_000)
                out.write(json.dumps({"key": f"k{i % KEYS}", "ts": _iso(ts), "value": 1}) + "\n")


def pipeline_of(work: Path):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "memory",
            "lake": str(work / "lake"),
            "keys": ["key"],
            "event_time": "ts",
            "window": "SlidingWindows(60m, 1m)",
            "trigger": "Repeatedly(AfterCount(1))",
            "accumulation_mode": "discarding",
            "source": {
                "path": str(work / "landing"),
                "max_files_per_trigger": 100_000,
                "schema": {"key": "string", "ts": "timestamp", "value": "long"},
            },
            "watermark": {"delay": "1d"},
            "aggregates": {"value": "sum(value)"},
        }
    )


def jvm_peak_rss(spark) -> int:
    """The driver JVM's peak resident memory in bytes (``VmHWM``)."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc status")


def python_peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(panes: int, master: str, driver_memory: str) -> dict:
    """One size in this (fresh) process."""
    from deltalake import DeltaTable

    from jobs.driver.runs import run
    from jobs.startup.quiet import quiet_spark_stderr
    from jobs.startup.session import get_session

    quiet_spark_stderr()
    work = Path(tempfile.mkdtemp(prefix="panestore-memory-"))
    events = -(-panes // WINDOWS_PER_EVENT)
    write_landing(work / "landing", events)
    spark = get_session(
        "panestore-memory", master=master, driver_memory=driver_memory, shuffle_partitions=2
    )
    spark.range(1).count()
    started = {"python": python_peak_rss(), "jvm": jvm_peak_rss(spark)}
    pipeline = pipeline_of(work)
    t = time.perf_counter()
    result = run(pipeline, spark=spark, progress=None)
    seconds = time.perf_counter() - t
    peak = {"python": python_peak_rss(), "jvm": jvm_peak_rss(spark)}
    spark.stop()
    rows = DeltaTable(pipeline.table_path("panes")).to_pyarrow_table(columns=["batch_id"])
    largest = max((b.stats.panes for b in result.batches if b.stats), default=0)
    return {
        "events": events,
        "panes": rows.num_rows,
        "largest_batch": largest,
        "seconds": seconds,
        "started": started,
        "peak": peak,
        "work": str(work),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--panes", default="1000000,5000000", help="pane rows per run (comma list)")
    ap.add_argument("--master", default="local-cluster[2,1,2048]")
    ap.add_argument("--driver-memory", default="1g", help="spark.driver.memory (JVM -Xmx)")
    ap.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.master, args.driver_memory)))
        return
    mib = 2**20
    print(f"master {args.master}, driver JVM heap {args.driver_memory} (spark.driver.memory)")
    figures = []
    for panes in (int(p) for p in args.panes.split(",")):
        cmd = [
            sys.executable,
            __file__,
            "--measure",
            str(panes),
            "--master",
            args.master,
            "--driver-memory",
            args.driver_memory,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(
                f"run of {panes} panes failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        m = json.loads(lines[-1])
        figures.append(m)
        print(
            f"{m['panes']:>10,} pane rows ({m['largest_batch']:,} in one batch, "
            f"{m['events']:,} events) in {m['seconds']:.1f}s: driver peak RSS Python "
            f"{m['peak']['python'] / mib:,.0f} MiB (after session start "
            f"{m['started']['python'] / mib:,.0f}), JVM {m['peak']['jvm'] / mib:,.0f} MiB "
            f"(after session start {m['started']['jvm'] / mib:,.0f})",
            flush=True,
        )
    if len(figures) > 1:
        first, last = figures[0]["peak"], figures[-1]["peak"]
        print(
            "largest / smallest run: "
            + ", ".join(f"{k} {last[k] / first[k]:.2f}x" for k in ("python", "jvm"))
        )


if __name__ == "__main__":
    main()
