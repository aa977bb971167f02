"""Whether the cost of a scheduled pipeline stays flat over hundreds of runs of one lake.

    PYTHONPATH=. .venv/bin/python benchmarks/long_run.py [--runs 500] [--events 1000]
        [--keys 1000] [--every 50] [--samples 2] [--warmup 20] [--bucket] [--keep DIR]
        [--out FILE]

The pipeline and the landing files are ``benchmarks/bucket_requests.py``'s: 1-minute fixed
windows, ``sum(value)`` over ``--keys`` keys, the trigger of ``benchmarks/spark_job.py``, a
5-minute watermark delay; before each run one landing file of ``--events`` events lands
(``benchmarks/workload.py``: one minute of event time per file, ~10% of the events out of order
by up to 5 minutes), so from the sixth run on each run closes one more window and the state
stays about the same size while the tables grow. The lake is a local directory, or with
``--bucket`` ``s3://lakes/requests`` in an S3 server (moto's, ``benchmarks/s3_server.py``); Spark's
checkpoint is a local ``checkpoint`` directory beside it either way.

A whole ``panestore run CONF`` process takes ~15-30 s on a two-core machine (most of it the
JVM's start and exit), so most runs are made **in process**: one long-lived Python process with
one Spark session calls the run (:func:`jobs.driver.runs.run`) and then the fold
(``fold=True``: the run's last step), as ``panestore run`` does, timed from the
run's call to the fold's end (no JVM start: the cost the lake's growth could add shows here
undiluted). The last ``--samples`` runs of every block of ``--every`` runs, and runs 2 to
``--samples`` + 1, are instead made **as a whole process**: ``panestore run CONF`` (the fold in
it) in a child process, timed from its start to its exit, which is what a scheduler waits for.
Run 1 creates the lake (in process) and counts in no figure. The driver JVM's class-data archive
is written before run 1 if there is none, so no whole-process run writes it. Before run 1 the
long-lived session makes ``--warmup`` runs (default 20) on a scratch lake of its own (local, the
same pipeline and landing files), not measured: a fresh JVM's first runs are several times
slower than its later ones (its JIT compiling), which would inflate the first block's in-process
median and make the growth look smaller than it is.

Beside each run's wall time, its CPU time: the user and system seconds of this process's tree
from ``/proc`` (this process, the Spark JVM, Spark's reused Python workers; a whole-process run's
child with those of its descendants that were waited for), the difference from before the run to
after it. The S3 server is left out of it: with ``--bucket`` its answering is in the wall time,
and its own CPU seconds during each run are a column of their own (the server is moto's, in
memory: how its cost grows with the objects it holds is not a store's).
On a shared machine the wall time of a run stretches with the load; its CPU time much less, so
it is the figure to compare when the load of the blocks differs.

Each run's times (and requests) are printed on stderr as it ends. After each block (runs
``1..every``, ``every+1..2*every``...) one row is printed on stdout: the median in-process time
(wall and CPU), the whole-process times of its sampled runs (wall and CPU), the live files and
bytes of each table (:func:`jobs.inspection.status.lake_status`, what ``panestore status CONF
--json`` reports, read without Spark after the block's last run), the files and bytes on disk
of the checkpoint directory's Spark checkpoint (``<checkpoint>/_checkpoint`` without its
``state``) and of the operator's state (``<checkpoint>/_checkpoint/state``), the machine's
1-minute load average, and
with ``--bucket`` the requests per run (run and fold, in process or not) as the block's median
by kind (LIST, GET, HEAD, PUT, POST, DELETE) and in total, counted from the server's request log
between marks (``benchmarks/s3_server.py``). At the end: the ratio of the last block's figures
to the first block's (the in-process and the whole-process medians, wall and CPU, and the
requests) and whether each is within 1.2x. ``--out FILE`` also writes the table and the ratios
as markdown; ``--keep DIR`` keeps the work directory (the lake, the server's request log) and
writes every block and run there as JSON (``long_run.json``).

The machine may be shared: the load column says how busy it was; a ratio compares blocks of one
invocation only. Figures, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bucket_requests import BUCKET, LAKE, MINUTE_US, Bench, work_directory  # noqa: E402
from benchmarks.s3_server import KINDS, S3Server, by_kind, mark  # noqa: E402
from benchmarks.spark_job import write_file  # noqa: E402
from benchmarks.workload import Bundle, iter_bundles  # noqa: E402

FLAT = 1.2
"""The bound of the issue: the last runs' time within 1.2x of the early runs'."""

TABLES = ("panes", "late", "rejected", "current", "runs")


@dataclass(frozen=True)
class Usage:
    """Files and bytes (of a table's live files, or of a directory on disk)."""

    files: int
    bytes: int

    def text(self) -> str:
        """``files / MiB``.

        >>> Usage(12, 3 * 2**20).text()
        '12 / 3.00 MiB'
        """
        return f"{self.files:,} / {self.bytes / 2**20:.2f} MiB"


@dataclass
class RunTime:
    """One scheduled run: how it was made, its seconds (run and fold), its requests by kind
    (empty on a local lake)."""

    number: int
    whole_process: bool
    seconds: float
    cpu: float  # CPU seconds of the process tree (see the module doc)
    requests: dict[str, int] = field(default_factory=dict)
    server_cpu: float = 0.0  # CPU seconds the S3 server spent meanwhile (--bucket)


@dataclass
class Block:
    """A block of runs and what the lake and the checkpoint held after its last one."""

    first: int
    last: int
    runs: list[RunTime]
    tables: dict[str, Usage]
    checkpoint: Usage
    state: Usage
    load: float

    def in_process(self, cpu: bool = False) -> float | None:
        """The median seconds (``cpu``: CPU seconds) of its in-process runs (run 1, the lake's
        creation, excluded)."""
        return median(
            r.cpu if cpu else r.seconds for r in self.runs if not r.whole_process and r.number > 1
        )

    def whole_process(self, cpu: bool = False) -> list[float]:
        """The seconds (``cpu``: CPU seconds) of its whole-process runs, in order."""
        return [r.cpu if cpu else r.seconds for r in self.runs if r.whole_process]

    def server_cpu(self) -> float | None:
        """The median CPU seconds the S3 server spent answering one in-process run."""
        return median(r.server_cpu for r in self.runs if not r.whole_process and r.number > 1)

    def requests(self) -> dict[str, float]:
        """The median requests per run by kind and ``total`` (run 1 excluded); empty when none
        were counted."""
        counted = [r.requests for r in self.runs if r.requests and r.number > 1]
        if not counted:
            return {}
        out = {k: statistics.median(c.get(k, 0) for c in counted) for k in KINDS}
        out["total"] = statistics.median(sum(c.values()) for c in counted)
        return out


def median(values: Iterable[float]) -> float | None:
    """The median of ``values``, None for none.

    >>> median([3.0, 1.0, 2.0]), median([])
    (2.0, None)
    """
    got = list(values)
    return statistics.median(got) if got else None


def block_ranges(runs: int, every: int) -> list[range]:
    """The blocks of ``runs`` runs numbered from 1, ``every`` runs each (the last one shorter).

    >>> block_ranges(12, 5)
    [range(1, 6), range(6, 11), range(11, 13)]
    """
    return [range(s, min(s + every, runs + 1)) for s in range(1, runs + 1, every)]


def whole_process_runs(runs: int, every: int, samples: int) -> frozenset[int]:
    """The runs made as a whole process: runs 2 to ``samples + 1`` (the early runs) and the
    last ``samples`` runs of every block of ``every`` (never run 1, which creates the lake).

    >>> sorted(whole_process_runs(20, 5, 2))
    [2, 3, 4, 5, 9, 10, 14, 15, 19, 20]
    """
    chosen = set(range(2, samples + 2))
    for block in block_ranges(runs, every):
        chosen.update(block[-samples:] if samples else ())
    return frozenset(n for n in chosen if 1 < n <= runs)


def dir_usage(path: Path, skip: str | None = None) -> Usage:
    """The files under ``path`` and their bytes, the subdirectory ``skip`` left out (nothing
    for a missing directory)."""
    files = size = 0
    for root, dirs, names in os.walk(path):
        if skip is not None and Path(root) == path and skip in dirs:
            dirs.remove(skip)
        for name in names:
            try:
                size += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # gone while walked
                continue
            files += 1
    return Usage(files, size)


def cpu_ticks(stat: str) -> int:
    """The CPU clock ticks a ``/proc/<pid>/stat`` line counts: the process's user and system
    time and its waited-for children's (fields 14-17).

    >>> cpu_ticks("42 (java (x)) S 1 42 42 0 -1 0 0 0 0 0 150 30 7 3 20 0 9")
    190
    """
    fields = stat.rsplit(")", 1)[1].split()  # after the name, which may hold spaces and ')'
    return sum(int(f) for f in fields[11:15])


def tree_cpu(root: int, skip: int | None = None) -> float:
    """The CPU seconds of the live process tree of ``root`` (:func:`cpu_ticks` of each; the
    subtree of ``skip`` left out), from ``/proc``."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d))
        ticks[int(d)] = cpu_ticks(stat)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid == skip:
            continue
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def ratio(first: float | None, last: float | None) -> float | None:
    """``last / first``, None when either is missing or ``first`` is 0.

    >>> ratio(2.0, 2.3), ratio(None, 1.0)
    (1.15, None)
    """
    if first is None or last is None or first == 0:
        return None
    return round(last / first, 4)


def verdict(r: float | None) -> str:
    """Whether a ratio is within :data:`FLAT`.

    >>> verdict(1.15), verdict(1.3), verdict(None)
    ('1.15x: within 1.2x', '1.30x: NOT within 1.2x', 'not measured')
    """
    if r is None:
        return "not measured"
    return f"{r:.2f}x: {'within' if r <= FLAT else 'NOT within'} {FLAT}x"


# -- the runs -------------------------------------------------------------------------------


class InProcess:
    """One Spark session in this process, and the run and fold of the pipeline on it."""

    def __init__(self, conf: Path, spark: Any) -> None:
        from jobs.config.load import load_pipeline

        self.pipeline = load_pipeline(str(conf))
        self.spark = spark

    def run(self) -> float:
        """Run, the fold its last step (as ``panestore run`` does); the seconds of both. A failed
        fold fails the run (:class:`jobs.driver.runs.FoldFailed`), which ends the benchmark."""
        from jobs.driver.runs import run

        started = time.perf_counter()
        run(self.pipeline, spark=self.spark, progress=None, fold=True)
        return time.perf_counter() - started


class LongRun:
    """The lake, its runs (in process or as a whole process) and what is measured after them."""

    def __init__(self, work: Path, server: S3Server | None, spark: Any, lake: str) -> None:
        self.server = server
        self.bench = Bench(server, work, lake)
        self.checkpoint = work / "checkpoint" / "_checkpoint"
        self.in_process = InProcess(self.bench.conf, spark)
        self.pipeline = self.in_process.pipeline
        self.marks = 0

    def cpu(self) -> float:
        """The CPU seconds of this process's tree so far, the S3 server's left out."""
        return tree_cpu(os.getpid(), skip=self.server.pid if self.server else None)

    def scheduled_run(self, number: int, elements: list, whole: bool) -> RunTime:
        """Land ``elements``, then run and fold (``whole``: as ``panestore run CONF``)."""
        write_file(self.bench.landing / f"part-{number:05d}.jsonl", elements, "jsonl")
        return self._scheduled_run(number, whole)

    def _server_cpu(self) -> float:
        pid = self.server.pid if self.server else None
        return 0.0 if pid is None else tree_cpu(pid)

    def _scheduled_run(self, number: int, whole: bool) -> RunTime:
        served = self._server_cpu()
        run = self._timed_run(number, whole)
        run.server_cpu = self._server_cpu() - served
        return run

    def _timed_run(self, number: int, whole: bool) -> RunTime:
        cpu = self.cpu()
        if whole:  # Bench counts a child's requests itself
            counted = self.bench.command("run")
            cpu = self.cpu() - cpu
            return RunTime(number, True, counted.seconds, cpu, dict(counted.kinds))
        if self.server is None:
            seconds = self.in_process.run()
            return RunTime(number, False, seconds, self.cpu() - cpu)
        self.marks += 1
        label = f"in-process-{self.marks}"
        mark(f"{label}-start")
        seconds = self.in_process.run()
        mark(f"{label}-end")
        cpu = self.cpu() - cpu
        requests = self.server.requests_between(f"{label}-start", f"{label}-end")
        return RunTime(number, False, seconds, cpu, by_kind(requests))

    def block(self, runs: list[RunTime]) -> Block:
        """What the lake and the checkpoint hold now, with the block's runs."""
        from jobs.inspection.status import lake_status

        status = lake_status(self.pipeline)
        tables = {t: Usage(s.files, s.bytes) for t, s in status.tables.items() if t in TABLES}
        return Block(
            runs[0].number,
            runs[-1].number,
            runs,
            tables,
            dir_usage(self.checkpoint, skip="state"),
            dir_usage(self.checkpoint / "state"),
            os.getloadavg()[0],
        )


# -- printing -------------------------------------------------------------------------------


def _secs(s: float | None) -> str:
    return "-" if s is None else f"{s:.2f}"


def table(blocks: list[Block], bucket: bool) -> list[str]:
    """The blocks as markdown table lines."""
    head = ["runs", "in process, median s (CPU s)", "whole process s (CPU s)"]
    head += [f"{t} table" if t == "runs" else t for t in TABLES]
    head += ["checkpoint", "state"]
    head += ["load"]
    head += ["requests/run", "by kind " + "/".join(KINDS), "S3 server CPU s/run"] if bucket else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in blocks:
        cells = [
            f"{b.first}-{b.last}",
            f"{_secs(b.in_process())} ({_secs(b.in_process(cpu=True))})",
            ", ".join(
                f"{s:.1f} ({c:.1f})"
                for s, c in zip(b.whole_process(), b.whole_process(cpu=True), strict=True)
            )
            or "-",
            *(b.tables[t].text() if t in b.tables else "-" for t in TABLES),
            b.checkpoint.text(),
            b.state.text(),
            f"{b.load:.1f}",
        ]
        if bucket:
            req = b.requests()
            cells += [
                f"{req['total']:,.0f}" if req else "-",
                "/".join(f"{req[k]:,.0f}" for k in KINDS) if req else "-",
                _secs(b.server_cpu()),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def ratios(blocks: list[Block], bucket: bool) -> list[str]:
    """The last block's figures against the first block's, each with its verdict."""
    first, last = blocks[0], blocks[-1]
    out = []
    for cpu, what in ((False, "s"), (True, "CPU s")):
        a, b = first.in_process(cpu), last.in_process(cpu)
        out.append(
            f"in process, {what}: first block median {_secs(a)}, last block {_secs(b)}: "
            + verdict(ratio(a, b))
        )
    for cpu, what in ((False, "s"), (True, "CPU s")):
        a, b = median(first.whole_process(cpu)), median(last.whole_process(cpu))
        out.append(
            f"whole process, {what}: first block median {_secs(a)} "
            f"({len(first.whole_process())} runs), last block {_secs(b)} "
            f"({len(last.whole_process())} runs): " + verdict(ratio(a, b))
        )
    if bucket:
        a, b = first.requests().get("total"), last.requests().get("total")
        out.append(
            f"requests per run: first block median {a}, last block {b}: " + verdict(ratio(a, b))
        )
        a, b = first.server_cpu(), last.server_cpu()
        out.append(
            f"S3 server CPU s per in-process run: first block median {_secs(a)}, last block "
            f"{_secs(b)}: " + verdict(ratio(a, b))
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=500, help="scheduled runs (500)")
    ap.add_argument("--events", type=int, default=1_000, help="events landed per run (1,000)")
    ap.add_argument("--keys", type=int, default=1_000, help="keys (1,000)")
    ap.add_argument("--every", type=int, default=50, help="runs per printed block (50)")
    ap.add_argument(
        "--samples",
        type=int,
        default=2,
        help="whole-process runs at the end of each block, and after run 1 (2)",
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=20,
        help="unmeasured in-process runs on a scratch lake first, to warm the JVM (20)",
    )
    ap.add_argument("--bucket", action="store_true", help="the lake in an S3 server's bucket")
    ap.add_argument("--keep", help="work directory to use and keep (must not exist)")
    ap.add_argument("--out", help="also write the table and the ratios as markdown to FILE")
    args = ap.parse_args()
    if args.runs < 2 or args.events < 1 or args.keys < 1 or args.every < 2:
        ap.error("--runs >= 2, --events >= 1, --keys >= 1 and --every >= 2 are required")
    if args.warmup < 0:
        ap.error("--warmup must be at least 0")
    if not 0 <= args.samples < args.every:
        ap.error("--samples must be at least 0 and less than --every")

    work = work_directory(ap, args.keep, "panestore-long-run-")
    # the driver JVM's class-data archive, if there is none: no measured process writes it
    subprocess.run([sys.executable, "-m", "jobs.startup.session"], check=True, cwd=ROOT)

    whole = whole_process_runs(args.runs, args.every, args.samples)

    def bundles(runs: int) -> Iterator[Bundle]:
        span = runs * MINUTE_US
        return iter_bundles(runs * args.events, args.keys, bundle_size=args.events, span_us=span)

    from jobs.startup.session import SessionOptions, end_session

    started = time.perf_counter()
    blocks: list[Block] = []
    with S3Server(work / "s3-server.log") if args.bucket else contextlib.nullcontext() as server:
        if server is not None:
            server.fresh_bucket(BUCKET)
        # the session after the server: Spark's Python workers inherit its AWS environment
        spark = SessionOptions("panestore-long-run", quiet_stderr=True).start()
        if args.warmup:
            scratch = LongRun(work / "warmup", None, spark, str(work / "warmup" / "lake"))
            for number, (elements, _wm, _pt) in enumerate(bundles(args.warmup), start=1):
                r = scratch.scheduled_run(number, elements, whole=False)
                print(f"  warm-up run {number}: {r.seconds:.2f} s", file=sys.stderr, flush=True)
        bench = LongRun(work, server, spark, LAKE if server else str(work / "lake"))
        where = f"{LAKE} at {server.endpoint}" if server else bench.bench.lake
        what = (
            f"{args.runs} scheduled runs of {args.events:,} new events each over {args.keys:,} "
            f"keys; lake {where}"
        )
        how = (
            f"{len(whole)} runs as a whole process ({', '.join(map(str, sorted(whole)))}), the "
            f"others in process, after {args.warmup} in-process warm-up runs on a scratch lake"
        )
        print(f"{what}; work directory {work}; {how}", flush=True)
        lines = table([], args.bucket)
        print("\n".join(lines), flush=True)
        ranges = iter(block_ranges(args.runs, args.every))
        current, runs = next(ranges), []
        for number, (elements, _wm, _pt) in enumerate(bundles(args.runs), start=1):
            r = bench.scheduled_run(number, elements, number in whole)
            runs.append(r)
            made = "whole process" if r.whole_process else "in process"
            total = f", {sum(r.requests.values()):,} requests" if r.requests else ""
            line = f"  run {number}: {r.seconds:.2f} s (CPU {r.cpu:.2f} s) {made}{total}"
            print(line, file=sys.stderr, flush=True)
            if number == current[-1]:
                blocks.append(bench.block(runs))
                print(table(blocks, args.bucket)[-1], flush=True)
                current, runs = next(ranges, current), []
        end_session()
    summary = ratios(blocks, args.bucket)
    minutes = (time.perf_counter() - started) / 60
    print("\n" + "\n".join(summary) + f"\n\nin {minutes:.1f} min", flush=True)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        command = "benchmarks/long_run.py " + " ".join(sys.argv[1:])
        text = [f"`{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
        text += [f"{what}; {how}.", "", *table(blocks, args.bucket), ""]
        text += [f"- {s}" for s in summary] + [f"- in {minutes:.1f} min", ""]
        out.write_text("\n".join(text))
        print(f"written: {out}")
    if args.keep:
        dump: list[dict[str, Any]] = [asdict(b) for b in blocks]
        (work / "long_run.json").write_text(json.dumps(dump, indent=1))
        print(f"per run and block as JSON: {work / 'long_run.json'}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
