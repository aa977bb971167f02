"""Spark job benchmark: panestore against Spark's own windowed aggregation of the same files.

    .venv/bin/python benchmarks/spark_job.py [--workload 1m|10m|small|two-inputs|all ...]
        [--repeat R] [--format jsonl|parquet|delta] [--files-per-batch F] [--no-native] [--keep DIR]
        [--compare-code DIR ...] [--lake-in-bucket] [--no-process]

Workloads (``benchmarks/workload.py``; ~10% of events out of order by up to 5 minutes, one file
per 10,000 events in a landing directory; ``--format delta``: one append per 10,000 events to a
Delta table, the pipeline's source):

* ``1m`` (default): 1,000,000 events, 1,000 keys, one hour of event time, one micro-batch
  (``--files-per-batch`` 100): the throughput of a large scheduled run.
* ``10m``: 10,000,000 events, 10,000 keys, six hours of event time, micro-batches of 100 files
  (1,000,000 events each).
* ``small``: a small scheduled run. A lake's history (10,000 keys, one event each, over four
  minutes: no window closes, the state holds every key) is run once, not timed; each
  measurement starts from a copy of that lake and runs 1,000 new events on random keys of it,
  which move the watermark far enough to close the windows of 1% of the keys.
* ``small-1m-keys``: the same small run on a lake holding 1,000,000 keys.
* ``1m-sketches``: the events of ``1m``, each window computing an approximate count of distinct
  values and a 95th percentile: ``approx_count_distinct(value)`` and
  ``approx_percentile(value, 0.95)`` (DataSketches HLL and KLL) against Spark's own
  ``approx_count_distinct`` and ``percentile_approx``.
* ``1m-own``: the events of ``1m``, each window computing the exact number of distinct values
  with a combiner of a user's own (:func:`own_combiners`: a ``CombineFn`` defined here, a
  frozenset accumulator, its own ``add_all``) against Spark's ``size(collect_set(value))``. A
  code pipeline: its ``panestore run`` process side is not measured (a configuration file
  cannot name the combiner).
* ``two-inputs``: two inputs co-grouped by key (issue #50): 1,000,000 impressions (``ad``,
  ``ts``) and 100,000 clicks (``ad``, ``click_ts``, ``cost``) over the same hour, 1,000 ads,
  JSON lines in two landing directories (one file per 10,000 events, all in one micro-batch),
  impressions, clicks and cost per ad and minute with the default trigger (the on-time pane).
  panestore reads them as ``[inputs.impressions]`` and ``[inputs.clicks]`` with aggregates
  ``count() filter (input = 'impressions')``, ``count() filter (input = 'clicks')`` and
  ``sum(cost)``; Spark natively as two file sources, each with its watermark, unioned with a tag
  column and aggregated with ``count_if`` and ``sum``. Beside each panestore side, **one
  input**: the same 1,100,000 events in one landing directory, each line telling its ``kind``,
  counted with ``count() filter (kind = 'click')``: printed as the ratio of two inputs to one.
  JSON lines only, no ``--lake-in-bucket``.

Both sides run in scheduled mode (``availableNow``) with 1-minute fixed windows and a 5-minute
watermark delay:

1. **panestore**: ``panestore run`` with ``AfterWatermark(early=AfterCount(100),
   late=AfterCount(1))``, accumulating sum, the operator in the batch sink's Spark tasks, panes
   committed to the Delta pane log (delta-rs) with app transactions.
2. **Spark native** (the ceiling): a Structured Streaming windowed aggregation
   (``groupBy(window(ts, "1 minute"), key)``, same watermark, append mode, its own checkpoint
   and state), written to a Delta table with delta-rs. No triggers, no per-pane history: one row
   per window when the watermark closes it.

Each measurement runs in a fresh process, as a scheduled run does: the JVM and session are started
first (timed apart; the driver JVM maps Spark's classes from the class-data archive, which the
benchmark writes first if there is none), then the run is timed. ``--repeat`` times (default 3) the
two sides are measured alternately, the order swapped every other round (the machine may be shared:
only medians and ratios of one invocation mean anything). Printed per workload: each run's time, the
medians, the ratio of throughputs (native time / panestore time: 1.0 means as fast as native), the
peak memory of the process tree (the largest of the runs; driver Python, JVM and Python workers
apart) as proportional set size, the memory the tree holds (:class:`PeakMemory`), and beside it
the resident sets summed, which count the pages Spark's forked Python workers share with their
daemon once per process, the CPU time of each side's parts (medians; the driver JVM's JIT
compilers and task threads apart: :class:`TreeUse`), and a table of
where the time of a run goes (median per row): JVM and session start, preparing the lake, building
the query, Spark's phases of each micro-batch (listing, planning, execution with the sink's Delta
commits, checkpoint writes), and the query's start and stop around them.
Beside it, **as a process**: each panestore side (not the bucket's) is also measured as a
scheduler runs it, ``panestore run CONF`` (the installed entry point, its fold included) on a lake
of its own, timed from the process's start to its end (its exit, and its output closed by
whatever holds it: a JVM outliving the command would count); printed with the run's and the
fold's time as the command reports them (the run's includes the JVM's and session's start), the
rest being the interpreter's start and imports, the checks before the run and the JVM's exit
(``--no-process``: not measured). Every side's **whole process** (its child from its start to
its end, native's too) is printed beside, as a multiple of native's.
``--compare-code DIR`` (repeatable) measures panestore from another checkout too (before/after).
Every side's checkout is byte-compiled first, as an installation is (:func:`compile_checkout`),
and the memory is sampled from this parent process, not from a thread of the measured one.

``--lake-in-bucket`` (workloads ``1m`` and ``10m``) adds the side **panestore (bucket)**: the
same pipeline with its lake in a bucket (``lake = "s3://bench/lake"``) and Spark's
checkpoint and the run's files in a local directory beside the other sides' targets
(``checkpoint``). The benchmark starts an S3 server for it (moto's, a child process on the
loopback address: ``benchmarks/s3_server.py``) and stops it at the end; each measurement starts
from an emptied server and a new bucket. The requests the run makes to the store (from its start
to its end, the output's row count after it excluded) are counted from the server's request log
by kind (LIST, GET, HEAD, PUT, POST, DELETE), shown per run and as medians. The server shares
the machine's cores with Spark and answers from memory over loopback: these figures are not a
cloud store's latencies, and the request counts are the comparable figure. The small runs do not
support it (each of its measurements starts from a copy of a lake's history, which would have to
be copied into the bucket).
Figures, not a test.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.s3_server import KINDS, S3Server, by_kind, mark  # noqa: E402
from benchmarks.workload import (  # noqa: E402
    HOUR_US,
    iter_bundles,
    scheduled_run_bundles,
)

TRIGGER = "AfterWatermark(early=AfterCount(100), late=AfterCount(1))"
MiB = 2**20


@dataclass(frozen=True)
class Workload:
    """A benchmark workload: the events of its landing files and how a run takes them."""

    name: str
    events: int  # the events a timed run reads
    keys: int
    span_us: int
    files_per_batch: int = 100
    history_keys: int = 0  # > 0: a small scheduled run on a lake holding this many keys
    aggregates: str = "sum"  # what each window computes: a key of AGGREGATES
    clicks: int = 0  # > 0: two inputs, ``events - clicks`` impressions and ``clicks`` clicks

    @property
    def is_small_run(self) -> bool:
        return self.history_keys > 0

    @property
    def has_two_inputs(self) -> bool:
        return self.clicks > 0


WORKLOADS = {
    "1m": Workload("1m", 1_000_000, 1_000, HOUR_US),
    "10m": Workload("10m", 10_000_000, 10_000, 6 * HOUR_US),
    "small": Workload("small", 1_000, 10_000, HOUR_US, history_keys=10_000),
    "small-1m-keys": Workload("small-1m-keys", 1_000, 1_000_000, HOUR_US, history_keys=1_000_000),
    "1m-sketches": Workload("1m-sketches", 1_000_000, 1_000, HOUR_US, aggregates="sketches"),
    "1m-own": Workload("1m-own", 1_000_000, 1_000, HOUR_US, aggregates="own"),
    # 110 files (100 of impressions, 10 of clicks), one micro-batch on every side
    "two-inputs": Workload(
        "two-inputs", 1_100_000, 1_000, HOUR_US, 200, aggregates="ctr", clicks=100_000
    ),
}


@dataclass(frozen=True)
class Aggregation:
    """What each window computes, on each side: panestore's aggregates (their text, and
    ``own``: a function giving combiners of a user's own by name) and Spark's own functions for
    the same answers (``F`` is ``pyspark.sql.functions``)."""

    panestore: dict[str, str]
    native: Callable[[Any], list]
    own: Callable[[], dict[str, Any]] | None = None


def own_combiners() -> dict[str, Any]:
    """A combiner of a user's own: the exact number of distinct values of ``value`` (a
    frozenset accumulator; ``add_all`` adds a list of values at once). Defined when a
    measurement builds its pipeline, from the checkout measured (``panes`` is imported then),
    and in the measuring script's ``__main__``: Spark's workers get the class by value, whatever
    checkout they import."""
    from panes.combiners import CombineFn

    class DistinctValues(CombineFn):
        output_type = "long"
        fields = ("value",)

        def create(self):
            return frozenset()

        def add_all(self, acc, values):
            return acc.union([v["value"] for v in values if v["value"] is not None])

        def add(self, acc, value):
            return self.add_all(acc, [value])

        def merge(self, accs):
            return frozenset().union(*accs)

        def extract(self, acc):
            return len(acc)

        def __repr__(self) -> str:
            return "distinct_values(value)"

    return {"distinct": DistinctValues()}


def _counted_kinds(column: str, impression: str, click: str) -> Aggregation:
    """Impressions, clicks and their cost per ad and window, an event's kind told by ``column``
    (``impression`` or ``click``): panestore's filtered counts and Spark's ``count_if``."""
    return Aggregation(
        {
            "impressions": f"count() filter ({column} = '{impression}')",
            "clicks": f"count() filter ({column} = '{click}')",
            "cost": "sum(cost)",
        },
        lambda F: [
            F.count_if(F.col(column) == impression).alias("impressions"),
            F.count_if(F.col(column) == click).alias("clicks"),
            F.sum("cost").alias("cost"),
        ],
    )


AGGREGATES = {
    "sum": Aggregation(
        {"value": "sum(value)"},
        lambda F: [F.sum("value").alias("value"), F.count("*").alias("n")],
    ),
    # distinct values and a 95th percentile per key and window: sketches on both sides
    "sketches": Aggregation(
        {"distinct": "approx_count_distinct(value)", "p95": "approx_percentile(value, 0.95)"},
        lambda F: [
            F.approx_count_distinct("value").alias("distinct"),
            F.percentile_approx("value", 0.95).alias("p95"),
        ],
    ),
    # impressions, clicks and their cost per ad and window, from two inputs (co-grouped by
    # key): each element's input is its column ``input``, on both sides (native: a tag column)
    "ctr": _counted_kinds("input", "impressions", "clicks"),
    # the same answers from one input of the same events, each telling its kind
    "ctr-one": _counted_kinds("kind", "impression", "click"),
    # the exact number of distinct values: a user's CombineFn against Spark's collect_set
    "own": Aggregation(
        {},
        lambda F: [F.size(F.collect_set("value")).alias("distinct")],
        own=own_combiners,
    ),
}


# -- landing files --------------------------------------------------------------------------


def _iso(us: int) -> str:
    s, frac = divmod(us, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac:06d}Z"


def write_file(name: Path, elements, fmt: str) -> None:
    """One landing file of ``(key, value, timestamp µs)`` elements, written under a hidden name
    and renamed (files must appear atomically)."""
    tmp = name.with_name(f".{name.name}.tmp")
    if fmt == "jsonl":
        with open(tmp, "w") as f:
            f.writelines(
                f'{{"key": "{key}", "ts": "{_iso(ts)}", "value": {value}}}\n'
                for key, value, ts in elements
            )
    else:
        import pyarrow.parquet as pq

        pq.write_table(_arrow(elements), tmp)
    os.replace(tmp, name)


def write_landing(directory: Path, bundles: Iterable, fmt: str, prefix: str = "part") -> int:
    """Each bundle as one file ``<prefix>-NNNNN.<fmt>`` (``delta``: one append to the Delta
    table ``directory``); returns the number of events."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for i, (elements, _wm, _pt) in enumerate(bundles):
        if fmt == "delta":
            from deltalake import write_deltalake

            write_deltalake(str(directory), _arrow(elements), mode="append")
        else:
            write_file(directory / f"{prefix}-{i:05d}.{fmt}", elements, fmt)
        n += len(elements)
    return n


def _arrow(elements):
    """``(key, value, timestamp µs)`` elements as an Arrow table of the landing's columns."""
    import pyarrow as pa

    keys, values, tss = zip(*elements, strict=True)
    return pa.table(
        {
            "key": pa.array(keys, pa.string()),
            "ts": pa.array(tss, pa.timestamp("us", tz="UTC")),
            "value": pa.array(values, pa.int64()),
        }
    )


CTR_INPUTS = ("impressions", "clicks")
ONE_INPUT = "one"  # the two-inputs workload's landing sub-directory of both inputs' events


def _ctr_line(input_name: str, key: str, value: int, ts: int, kind: bool) -> str:
    """One event of the two-inputs workload as a JSON line: an impression ``{ad, ts}`` or a
    click ``{ad, click_ts, cost}`` (``cost``: whole cents, a long: its sums are exact in any
    order); ``kind``: the line of the one-input landing instead, ``{ad, ts, kind[, cost]}``."""
    ad = "ad-" + key.split("-", 1)[1]
    if kind:
        name = "impression" if input_name == "impressions" else "click"
        cost = f', "cost": {value}' if name == "click" else ""
        return f'{{"ad": "{ad}", "ts": "{_iso(ts)}", "kind": "{name}"{cost}}}\n'
    if input_name == "impressions":
        return f'{{"ad": "{ad}", "ts": "{_iso(ts)}"}}\n'
    return f'{{"ad": "{ad}", "click_ts": "{_iso(ts)}", "cost": {value}}}\n'


def write_two_inputs(landing: Path, wl: Workload) -> int:
    """The two-inputs workload's landing files (JSON lines, one file per 10,000 events, each
    written under a hidden name and renamed): ``impressions/`` (``events - clicks`` events of
    :func:`iter_bundles`, seed 0) and ``clicks/`` (``clicks`` events over the same hour, seed
    1), and the same events again in ``one/``, each line telling its ``kind`` (the one-input
    side's landing: the same files, the same sizes plus that column). Returns the number of
    events of one landing."""
    counts = {"impressions": wl.events - wl.clicks, "clicks": wl.clicks}
    n = 0
    for seed, input_name in enumerate(CTR_INPUTS):
        bundles = iter_bundles(counts[input_name], wl.keys, span_us=wl.span_us, seed=seed)
        for i, (elements, _wm, _pt) in enumerate(bundles):
            for directory, kind in ((landing / input_name, False), (landing / ONE_INPUT, True)):
                directory.mkdir(parents=True, exist_ok=True)
                name = directory / (
                    f"{input_name}-{i:05d}.jsonl" if kind else f"part-{i:05d}.jsonl"
                )
                tmp = name.with_name(f".{name.name}.tmp")
                with open(tmp, "w") as f:
                    f.writelines(_ctr_line(input_name, k, v, ts, kind) for k, v, ts in elements)
                os.replace(tmp, name)
            n += len(elements)
    return n


def prepare_landing(work: Path, wl: Workload, fmt: str) -> Path:
    """The workload's landing directory under ``work``, written unless a previous invocation
    left the same one (``_workload.json``: Spark skips files named ``_*``)."""
    landing = work / wl.name / "landing"
    manifest = {**asdict(wl), "format": fmt, "version": 3}
    marker = landing / "_workload.json"
    if marker.exists() and json.loads(marker.read_text()) == manifest:
        print(f"[{wl.name}] landing files reused from {landing}", flush=True)
        return landing
    shutil.rmtree(landing, ignore_errors=True)
    t = time.perf_counter()
    if wl.is_small_run:
        history, _new = scheduled_run_bundles(wl.history_keys, wl.events)
        n = write_landing(landing, history, fmt, "history")
        what = f"{n:,} history events ({wl.history_keys:,} keys)"
    elif wl.has_two_inputs:
        n = write_two_inputs(landing, wl)
        what = (
            f"{n - wl.clicks:,} impressions and {wl.clicks:,} clicks ({wl.keys:,} ads), and "
            f"the same {n:,} events as one input"
        )
    else:
        bundles = iter_bundles(wl.events, wl.keys, span_us=wl.span_us)
        n = write_landing(landing, bundles, fmt)
        what = f"{n:,} events ({wl.keys:,} keys, {wl.span_us / HOUR_US:g} h of event time)"
    marker.write_text(json.dumps(manifest))
    print(
        f"[{wl.name}] wrote {what} as {fmt} in {time.perf_counter() - t:.1f}s under {landing}",
        flush=True,
    )
    return landing


# -- memory and CPU -------------------------------------------------------------------------


def _stat(path: str) -> tuple[str, list[str]] | None:
    """A process's or thread's ``/proc/.../stat``: its name and the fields after it (None: it
    has ended)."""
    try:
        with open(path) as f:
            head, rest = f.read().rsplit(")", 1)
    except OSError:
        return None
    return head.split("(", 1)[1], rest.split()


def _cpu_seconds(stat: list[str]) -> float:
    """The CPU time (user and system) of :func:`_stat`'s fields, in seconds."""
    return (int(stat[11]) + int(stat[12])) / CLOCK_TICKS


class PeakMemory:
    """Peak memory of the process tree of ``root`` (Linux /proc), in total and by part
    (``driver``: the root, a measurement's Python process; ``jvm``: Java processes; ``workers``:
    the other Python processes, Spark's daemon and workers), each part's peak taken on its own,
    in two measures:

    * ``pss`` (proportional set size, ``/proc/<pid>/smaps_rollup``): each page shared by n
      processes counts 1/n in each, so the sum is the memory the tree holds. Spark's Python
      workers are forked from one daemon and share the modules it imported: their resident sets
      count those pages once per process, their PSS once in all. The figure the targets use.
    * ``rss`` (resident set size, ``/proc/<pid>/stat``): every page each process maps, shared
      or not, summed: the earlier figure, an overcount for forked processes.

    Other processes (the JVM's short-lived helpers) are not counted. The parent samples from
    its own process, not a thread of the measured one: there its reading of ``/proc`` (every
    0.2 s) competed with the measured driver for the GIL and slowed it (docs/decisions.md, "Where
    the job stands", sitting 11)."""

    PARTS = ("total", "driver", "jvm", "workers")
    MEASURES = ("pss", "rss")

    def __init__(self, root: int, interval: float = 0.2) -> None:
        self.root = root
        self.interval = interval
        self.peak = {m: dict.fromkeys(self.PARTS, 0) for m in self.MEASURES}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _processes() -> tuple[dict[int, list[int]], dict[int, tuple[str, int, float]]]:
        """Every process's children, and its name, resident set (bytes) and CPU time so far
        (seconds, user and system)."""
        children: dict[int, list[int]] = {}
        info: dict[int, tuple[str, int, float]] = {}
        page = os.sysconf("SC_PAGE_SIZE")
        for d in os.listdir("/proc"):
            if not d.isdigit() or (read := _stat(f"/proc/{d}/stat")) is None:
                continue
            name, stat = read
            pid, ppid = int(d), int(stat[1])
            children.setdefault(ppid, []).append(pid)
            info[pid] = (name, int(stat[21]) * page, _cpu_seconds(stat))
        return children, info

    @staticmethod
    def _pss(pid: int) -> int:
        """The process's proportional set size in bytes (0 if it has ended)."""
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    @staticmethod
    def _part(is_driver: bool, name: str) -> str | None:
        """The part a process counts in, or None for a helper the JVM spawns (``chmod``, ``rm``):
        just forked, such a process reports the JVM's pages as its own."""
        if is_driver:
            return "driver"
        if name == "java":
            return "jvm"
        return "workers" if name.startswith("python") else None

    def sample(self) -> None:
        children, info = self._processes()
        now = {m: dict.fromkeys(self.PARTS, 0) for m in self.MEASURES}
        tree: list[tuple[int, str]] = []
        todo = [self.root]
        while todo:
            pid = todo.pop()
            name, rss, _ = info.get(pid, ("", 0, 0.0))
            part = self._part(pid == self.root, name)
            if part is not None:
                tree.append((pid, part))
                for measure, value in (("rss", rss), ("pss", self._pss(pid))):
                    now[measure][part] += value
                    now[measure]["total"] += value
            todo.extend(children.get(pid, ()))
        for measure, parts in now.items():
            for part, value in parts.items():
                self.peak[measure][part] = max(self.peak[measure][part], value)
        self.sampled(tree, info)

    def sampled(self, tree: list[tuple[int, str]], info: dict[int, tuple[str, int, float]]) -> None:
        """After each sample: the tree's processes (pid, part) and every process's
        :meth:`_processes` figures (nothing more here)."""

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
JVM_THREAD_KINDS = (
    ("JIT compilers", ("C1 CompilerThre", "C2 CompilerThre")),
    ("task threads", ("Executor task l",)),
)
"""The driver JVM's threads counted apart, by the start of their name (Linux keeps 15
characters): HotSpot's compilers, and the executor's threads that run Spark's tasks."""


class TreeUse(PeakMemory):
    """:class:`PeakMemory`, and the CPU time each part of the tree used (seconds, user and system,
    as last sampled: a process's last 0.2 s and a process shorter than that are not counted), with
    the driver JVM's threads of each of :data:`JVM_THREAD_KINDS` apart (sampled every second:
    their last second is not counted). Where the CPU goes, beside where the time goes: on two cores
    a process is as long as the CPU it needs (docs/decisions.md, "where the CPU of a run goes")."""

    THREADS_EVERY = 5  # samples

    def __init__(self, root: int, interval: float = 0.2) -> None:
        super().__init__(root, interval)
        self._cpu: dict[int, tuple[str, float]] = {}  # pid -> (part, seconds)
        self._threads: dict[tuple[int, str], tuple[str, float]] = {}  # (pid, tid) -> (kind, s)
        self._samples = 0

    def sampled(self, tree: list[tuple[int, str]], info: dict[int, tuple[str, int, float]]) -> None:
        for pid, part in tree:
            self._cpu[pid] = (part, info[pid][2])
        self._samples += 1
        if self._samples % self.THREADS_EVERY:
            return
        for pid in (p for p, part in tree if part == "jvm"):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                if (read := _stat(f"/proc/{pid}/task/{tid}/stat")) is None:
                    continue
                name, stat = read
                kind = next((k for k, starts in JVM_THREAD_KINDS if name.startswith(starts)), "")
                self._threads[(pid, tid)] = (kind, _cpu_seconds(stat))

    @property
    def cpu(self) -> dict[str, float]:
        """CPU seconds by part (:attr:`PARTS`), and of the JVM's threads by kind."""
        got = dict.fromkeys(self.PARTS, 0.0)
        for part, seconds in self._cpu.values():
            got[part] += seconds
            got["total"] += seconds
        for kind, _ in JVM_THREAD_KINDS:
            got[kind] = sum(s for k, s in self._threads.values() if k == kind)
        return got


# -- one measurement (in a child process) ---------------------------------------------------

# where the panestore API lives: this layout, and the flat jobs/ of checkouts before the
# sub-packages (so --compare-code can measure them)
API = {
    "pipeline_from_dict": ("jobs.config.load", "jobs.pipeline"),
    "run": ("jobs.driver.runs", "jobs.run"),
    "get_session": ("jobs.startup.session", "jobs.spark"),
    "quiet_spark_stderr": ("jobs.startup.quiet", "jobs.quiet"),
}


def panestore_api(name: str):
    """``name`` of the panestore checkout measured (see :data:`API`). The layout is read from
    the checkout's files: an editable install would answer for modules a checkout lacks."""
    import importlib

    import jobs

    flat = not (Path(jobs.__file__).parent / "driver").is_dir()
    return getattr(importlib.import_module(API[name][flat]), name)


def panestore_pipeline(
    landing: Path,
    lake: str,
    fmt: str,
    files_per_batch: int,
    checkpoint: Path | None = None,
    aggregates: str = "sum",
):
    """The benchmark's pipeline, its lake at ``lake`` (a directory, or ``s3://bucket/prefix``
    with ``checkpoint``, a local directory), computing ``AGGREGATES[aggregates]``."""
    pipeline_from_dict = panestore_api("pipeline_from_dict")
    settings = pipeline_settings(landing, lake, fmt, files_per_batch, checkpoint, aggregates)
    own = AGGREGATES[aggregates].own
    if own is None:
        return pipeline_from_dict(settings)
    from jobs.config.aggregates import Aggregate

    # a code pipeline: built from a stand-in aggregate, then given the user's combiners
    pipeline = pipeline_from_dict({**settings, "aggregates": {"rows": "count()"}})
    return replace(pipeline, aggregates=tuple(Aggregate(n, fn) for n, fn in own().items()))


def pipeline_settings(
    landing: Path,
    lake: str,
    fmt: str,
    files_per_batch: int,
    checkpoint: Path | None = None,
    aggregates: str = "sum",
) -> dict:
    """The settings of :func:`panestore_pipeline` (a configuration file's, as a dict)."""
    if aggregates in ("ctr", "ctr-one"):
        return ctr_settings(landing, lake, files_per_batch, checkpoint, aggregates)
    return {
        "name": "bench",
        "lake": lake,
        **({} if checkpoint is None else {"checkpoint": str(checkpoint)}),
        "keys": ["key"],
        "event_time": "ts",
        "window": "FixedWindows(1m)",
        "trigger": TRIGGER,
        "accumulation_mode": "accumulating",
        "source": {
            "format": fmt,
            "path": str(landing),
            "schema": {"key": "string", "ts": "timestamp", "value": "long"},
            # a Delta source reads every new version in one batch
            **({} if fmt == "delta" else {"max_files_per_trigger": files_per_batch}),
        },
        "watermark": {"delay": "5m"},
        "aggregates": dict(AGGREGATES[aggregates].panestore),
    }


def ctr_settings(
    landing: Path,
    lake: str,
    files_per_batch: int,
    checkpoint: Path | None = None,
    aggregates: str = "ctr",
) -> dict:
    """The two-inputs workload's pipeline: impressions and clicks per ad and minute, the default
    trigger (the on-time pane, then one per late bundle), a 5-minute watermark delay on each
    input. ``ctr``: two inputs, ``[inputs.impressions]`` and ``[inputs.clicks]`` (the landing's
    sub-directories); ``ctr-one``: one ``[source]``, ``landing`` holding both's events, each
    telling its ``kind``."""
    common = {
        "name": "bench",
        "lake": lake,
        **({} if checkpoint is None else {"checkpoint": str(checkpoint)}),
        "keys": ["ad"],
        "window": "FixedWindows(1m)",
    }
    aggs = dict(AGGREGATES[aggregates].panestore)
    if aggregates == "ctr-one":
        return {
            **common,
            "event_time": "ts",
            "source": {
                "format": "jsonl",
                "path": str(landing),
                "schema": {"ad": "string", "ts": "timestamp", "kind": "string", "cost": "long"},
                "max_files_per_trigger": files_per_batch,
            },
            "watermark": {"delay": "5m"},
            "aggregates": aggs,
        }
    schemas = {
        "impressions": ("ts", {"ad": "string", "ts": "timestamp"}),
        "clicks": ("click_ts", {"ad": "string", "click_ts": "timestamp", "cost": "long"}),
    }
    inputs = {
        name: {
            "format": "jsonl",
            "path": str(landing / name),
            "schema": schema,
            "event_time": event_time,
            "max_files_per_trigger": files_per_batch,
            "watermark": {"delay": "5m"},
        }
        for name, (event_time, schema) in schemas.items()
    }
    return {**common, "inputs": inputs, "aggregates": aggs}


def _toml_value(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, str) else str(value)


def write_conf(path: Path, settings: dict) -> Path:
    """``settings`` as a pipeline configuration file (TOML: the scalars, then one table per
    dict; a dict within a table inline)."""
    scalars = [f"{k} = {_toml_value(v)}" for k, v in settings.items() if not isinstance(v, dict)]
    tables = [
        f"\n[{k}]\n" + "\n".join(f"{kk} = {_toml_value(vv)}" for kk, vv in v.items())
        for k, v in settings.items()
        if isinstance(v, dict)
    ]
    path.write_text("\n".join(scalars + tables) + "\n")
    return path


def _batch_record(batch_id: int, rows: int, durations: dict, compute_s=None, commit_s=None):
    return {
        "id": batch_id,
        "rows": rows,
        "durations_ms": dict(durations),
        "compute_s": compute_s,
        "commit_s": commit_s,
    }


def measure_panestore(
    spark,
    landing: Path,
    lake: str,
    fmt: str,
    files_per_batch: int,
    checkpoint: Path | None = None,
    marks: str | None = None,
    aggregates: str = "sum",
) -> dict:
    """One run of the pipeline. ``marks``: the lake is in a bucket of the benchmark's S3 server;
    the run is bracketed by the marks ``<marks>-start`` and ``<marks>-end`` in its log."""
    from deltalake import DeltaTable

    run = panestore_api("run")
    pipeline = panestore_pipeline(landing, lake, fmt, files_per_batch, checkpoint, aggregates)
    if marks:
        mark(f"{marks}-start")
    start = time.perf_counter()
    result = run(pipeline, spark=spark, progress=None)
    secs = time.perf_counter() - start
    if marks:
        mark(f"{marks}-end")
    batches = [
        _batch_record(
            b.batch_id,
            b.rows,
            getattr(b, "durations_ms", {}),
            b.stats.compute_s if b.stats else None,
            b.stats.commit_s if b.stats else None,
        )
        for b in result.batches
    ]

    def rows(table: str, column: str) -> int:
        return DeltaTable(pipeline.table_path(table)).to_pyarrow_table(columns=[column]).num_rows

    return {
        "seconds": secs,
        "phases": dict(getattr(result, "phases", {})),
        "batches": batches,
        "output": {"panes": rows("panes", "pane_id"), "late": rows("late", "record_id")},
    }


def measure_native(
    spark, landing: Path, out: Path, fmt: str, files_per_batch: int, aggregates: str = "sum"
) -> dict:
    """Spark's own windowed aggregation of the same files into Delta (delta-rs); a Delta
    table's data files are read as Parquet (no delta-spark here; the same rows: appends only)."""
    from deltalake import write_deltalake
    from pyspark.sql import functions as F

    start = time.perf_counter()
    key = "key"
    if aggregates == "ctr":
        df, key = native_two_inputs(spark, landing, files_per_batch), "ad"
    else:
        reader = spark.readStream.schema("key string, ts timestamp, value bigint")
        reader = reader.option("maxFilesPerTrigger", files_per_batch).format(
            "json" if fmt == "jsonl" else "parquet"
        )
        df = reader.load(str(landing)).withWatermark("ts", "5 minutes")
    agg = df.groupBy(F.window("ts", "1 minute"), key).agg(*AGGREGATES[aggregates].native(F))
    agg = agg.select(
        key,
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *(c for c in agg.columns if c not in ("window", key)),
    )
    rows = [0]
    sink_s: dict[int, float] = {}

    def sink(batch, batch_id):
        t = time.perf_counter()
        table = batch.toArrow()
        rows[0] += table.num_rows
        write_deltalake(str(out), table, mode="append")
        sink_s[batch_id] = time.perf_counter() - t

    writer = agg.writeStream.outputMode("append").foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(out) + "_ckpt")
    started = time.perf_counter()
    q = writer.trigger(availableNow=True).start()
    q.awaitTermination()
    ended = time.perf_counter()
    batches = [
        _batch_record(p.batchId, int(p.numInputRows), p.durationMs or {})
        for p in q.recentProgress
        if p.batchId in sink_s
    ]
    return {
        "seconds": ended - start,
        "phases": {"build": started - start, "query": ended - started},
        "batches": batches,
        "output": {"window rows": rows[0]},
    }


def native_two_inputs(spark, landing: Path, files_per_batch: int):
    """The two-inputs workload's streams as Spark natively co-groups them: each landing
    directory a file source with its own 5-minute watermark (Spark keeps the minimum of a
    query's watermarks, its default policy, as panestore does of its inputs'), unioned with a
    tag column ``input`` (and the clicks' ``cost``, null for impressions), event time ``ts``."""
    from pyspark.sql import functions as F

    def stream(name: str, schema: str):
        reader = spark.readStream.schema(schema).option("maxFilesPerTrigger", files_per_batch)
        return reader.format("json").load(str(landing / name))

    impressions = stream("impressions", "ad string, ts timestamp").select(
        "ad", "ts", F.lit("impressions").alias("input"), F.lit(None).cast("bigint").alias("cost")
    )
    clicks = stream("clicks", "ad string, click_ts timestamp, cost bigint").select(
        "ad", F.col("click_ts").alias("ts"), F.lit("clicks").alias("input"), "cost"
    )
    return impressions.withWatermark("ts", "5 minutes").unionByName(
        clicks.withWatermark("ts", "5 minutes")
    )


def measure_once(
    what: str,
    landing: Path,
    target: Path,
    fmt: str,
    files_per_batch: int,
    shuffle: int,
    lake_uri: str | None = None,
    marks: str | None = None,
    aggregates: str = "sum",
) -> dict:
    """One measurement in this (fresh) process: JVM and session up first, then the timed run.
    ``PANESTORE_BENCH_CODE`` in the environment: run the panestore of that checkout.
    ``lake_uri``: panestore's lake is there (in a bucket), ``target`` its checkpoint."""
    if os.environ.get("PANESTORE_BENCH_CODE"):
        sys.path.insert(0, os.environ["PANESTORE_BENCH_CODE"])
    get_session = panestore_api("get_session")
    panestore_api("quiet_spark_stderr")()
    t = time.perf_counter()
    spark = get_session("panestore-bench", shuffle_partitions=shuffle)
    spark.range(1).count()  # JVM and session up before timing
    session_s = time.perf_counter() - t
    if what == "native":
        got = measure_native(spark, landing, target, fmt, files_per_batch, aggregates)
    elif lake_uri is None:
        got = measure_panestore(
            spark, landing, str(target), fmt, files_per_batch, aggregates=aggregates
        )
    else:
        got = measure_panestore(
            spark,
            landing,
            lake_uri,
            fmt,
            files_per_batch,
            checkpoint=target,
            marks=marks,
            aggregates=aggregates,
        )
    spark.stop()
    return {**got, "session_s": session_s}


# -- the parent: runs children, prints figures ----------------------------------------------


def compile_checkout(code: Path) -> None:
    """Byte-compile a measured checkout's packages, as installing them does (pip compiles a
    wheel's modules; ``./dev`` compiles the checkout's): each measured Python process (the
    driver, Spark's worker daemon) then loads them compiled instead of compiling them again,
    ~0.4 s of each process's start here, where ``PYTHONDONTWRITEBYTECODE`` keeps Python from
    writing its own caches."""
    for package in ("panes", "sinks", "jobs"):
        if (code / package).is_dir():
            compileall.compile_dir(str(code / package), quiet=1)


@dataclass(frozen=True)
class Side:
    """What is measured: ``panestore`` (a run in the measuring process), ``native``, or
    ``command`` (``panestore run CONF`` as a process); the checkout panestore runs from, and
    whether its lake is in a bucket (this checkout's panestore). ``one_input``: the two-inputs
    workload's events as one input (its landing ``one/``, aggregates ``ctr-one``)."""

    what: str
    label: str
    code: str | None = None
    bucket: bool = False
    one_input: bool = False


BUCKET = "bench"
BUCKET_SUFFIX = " (bucket)"  # the bucket side's label: panestore's, with this suffix
ONE_INPUT_SUFFIX = " (one input)"  # a one-input side's label: the two-input side's, with this
PROCESS_SUFFIX = " (process)"  # a command side's label: the in-process side's, with this suffix


class BucketLakes:
    """The S3 server of the bucket side: a new bucket for each measurement, and the requests
    counted between its marks."""

    def __init__(self, server: S3Server) -> None:
        self.server = server
        self.measurements = 0

    def fresh(self) -> tuple[str, str]:
        """(the lake URI of a new measurement, the label of its marks), the server emptied and
        the bucket new."""
        self.measurements += 1
        self.server.fresh_bucket(BUCKET)
        return f"s3://{BUCKET}/lake", f"m{self.measurements}"

    def requests(self, marks: str) -> dict[str, int]:
        """The requests of the run marked ``marks``, by kind."""
        return by_kind(self.server.requests_between(f"{marks}-start", f"{marks}-end"))


ATTEMPTS = 3
LOAD_FLAKE = "Python worker failed to connect back"
"""Spark gives a Python process it starts 10 s to connect back (hard-coded): on an overloaded
machine the driver's pre-init process of transformWithState can miss that. Such a measurement is
repeated (and says so), at most ``ATTEMPTS`` times."""


def _one_input_label(label: str) -> str:
    """``panestore (process)`` -> ``panestore (one input) (process)``."""
    if label.endswith(PROCESS_SUFFIX):
        return label[: -len(PROCESS_SUFFIX)] + ONE_INPUT_SUFFIX + PROCESS_SUFFIX
    return label + ONE_INPUT_SUFFIX


def _child(
    side: Side,
    landing: Path,
    target: Path,
    fmt: str,
    files_per_batch: int,
    shuffle: int,
    history: Path | None = None,
    lakes: BucketLakes | None = None,
    aggregates: str = "sum",
) -> dict:
    """One measurement of ``side`` in a child process. ``lakes``: the bucket side's server (each
    attempt gets a new bucket; the run's requests are added to the result). A ``command`` side's
    child is ``panestore run CONF`` itself (:func:`_command_result`)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--measure",
        side.what,
        "--landing",
        str(landing),
        "--target",
        str(target),
        "--format",
        fmt,
        "--files-per-batch",
        str(files_per_batch),
        "--shuffle-partitions",
        str(shuffle),
        "--aggregates",
        aggregates,
    ]
    if side.what == "command":  # the installed entry point: jobs.cli:command
        conf = write_conf(
            target.with_name(target.name + ".toml"),
            pipeline_settings(landing, str(target), fmt, files_per_batch, aggregates=aggregates),
        )
        cmd = [sys.executable, "-c", "from jobs.cli import command; command()", "run", str(conf)]
        cmd += ["--shuffle-partitions", str(shuffle)]
    # The checkout measured comes first on every Python process's path, and the child runs in
    # the landing's parent directory: Spark's Python processes put their working directory
    # first on their path, and a checkout there would shadow the one measured.
    code = side.code or str(HERE.parent)
    env = dict(os.environ)
    env["PANESTORE_BENCH_CODE"] = code
    env["PYTHONPATH"] = os.pathsep.join([code, env.get("PYTHONPATH", "")])
    for attempt in range(1, ATTEMPTS + 1):
        marks: str | None = None
        bucket: list[str] = []
        if side.bucket:
            if lakes is None:
                raise ValueError(f"{side.label} needs the S3 server")
            lake_uri, marks = lakes.fresh()
            bucket = ["--lake-uri", lake_uri, "--marks", marks]
        started = time.perf_counter()
        with (
            subprocess.Popen(
                cmd + bucket,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=landing.parent,
            ) as proc,
            TreeUse(proc.pid) as mem,
        ):
            # ends when the process has and its output is closed (by whatever holds it: a JVM
            # that outlived the process): what a scheduler waits for
            stdout, stderr = proc.communicate()
        process_s = time.perf_counter() - started
        if side.what == "command":
            lines = [json.dumps(_command_result(stderr, process_s))]
        else:
            lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if proc.returncode == 0 and lines:
            got = json.loads(lines[-1])
            got.update(
                peak_pss=mem.peak["pss"], peak_rss=mem.peak["rss"], cpu=mem.cpu, process_s=process_s
            )
            if lakes is not None and marks is not None:
                got["requests"] = lakes.requests(marks)
            return got
        if attempt < ATTEMPTS and LOAD_FLAKE in stderr:
            print(
                f"  ({side.label}: {LOAD_FLAKE!r}: the machine is overloaded; measuring again)",
                flush=True,
            )
            _reset(target, history)
            continue
        raise SystemExit(f"{side.label} measurement failed ({proc.returncode}):\n{stderr[-3000:]}")
    raise AssertionError("unreachable")


RUN_SUMMARY = re.compile(r"rejected in ([0-9.]+)s")
RUN_SESSION = re.compile(r"rejected in [0-9.]+s \(session ([0-9.]+)s")
FOLD_SUMMARY = re.compile(r"materialize: folded .* in ([0-9.]+)s$", re.MULTILINE)


def _command_result(stderr: str, process_s: float) -> dict:
    """A ``command`` side's measurement: the process from its start to its end, and what it
    reported of it (its run's summary line, the session's start in it where the run started
    the session, its fold's; None where it said none)."""
    run = RUN_SUMMARY.findall(stderr)
    session = RUN_SESSION.findall(stderr)
    fold = FOLD_SUMMARY.findall(stderr)
    return {
        "seconds": process_s,
        "run_s": float(run[-1]) if run else None,
        "run_session_s": float(session[-1]) if session else None,
        "fold_s": float(fold[-1]) if fold else None,
    }


def _targets(work: Path, wl: Workload, side: Side) -> tuple[Path, Path | None]:
    """(where a measurement of ``side`` writes, the history snapshot it starts from)."""
    name = {"panestore": "lake", "command": "lake-command"}.get(side.what, "native")
    suffix = "" if side.code is None else f"-{Path(side.code).name}"
    suffix += "-bucket" if side.bucket else ""  # the checkpoint of the lake in a bucket
    suffix += "-one-input" if side.one_input else ""
    target = work / wl.name / f"{name}{suffix}"
    return target, (target.with_name(target.name + ".history") if wl.is_small_run else None)


def _reset(target: Path, history: Path | None) -> None:
    for path in (target, target.with_name(target.name + "_ckpt")):
        shutil.rmtree(path, ignore_errors=True)
        if history is not None:
            snapshot = history.with_name(history.name + path.name[len(target.name) :])
            if snapshot.exists():
                shutil.copytree(snapshot, path, symlinks=True)


def _prepare_history(
    work: Path, wl: Workload, landing: Path, sides: list[Side], fmt: str, shuffle: int
) -> None:
    """Small runs: run each side once over the history (not timed), keep the result as the
    snapshot every measurement starts from, then land the run's new events."""
    for stale in landing.glob("new-*"):
        stale.unlink()
    for side in sides:
        target, history = _targets(work, wl, side)
        for path in (history, history.with_name(history.name + "_ckpt")):
            shutil.rmtree(path, ignore_errors=True)
        _reset(target, None)
        t = time.perf_counter()
        _child(side, landing, target, fmt, wl.files_per_batch, shuffle, aggregates=wl.aggregates)
        shutil.move(target, history)
        if target.with_name(target.name + "_ckpt").exists():
            shutil.move(
                target.with_name(target.name + "_ckpt"), history.with_name(history.name + "_ckpt")
            )
        print(
            f"[{wl.name}] {side.label}: history run in {time.perf_counter() - t:.1f}s (not timed)",
            flush=True,
        )
    _, new = scheduled_run_bundles(wl.history_keys, wl.events)
    write_landing(landing, new, fmt, "new")


def _requests_text(counts: dict[str, float]) -> str:
    """``1,234 store requests: LIST 12, GET 1,000, ...``."""
    parts = ", ".join(f"{k} {counts[k]:,.0f}" for k in KINDS)
    return f"{sum(counts[k] for k in KINDS):,.0f} store requests: {parts}"


def _peak(m: dict, part: str, measure: str = "pss") -> float:
    """A measurement's peak memory of ``part`` in MiB (results from before PSS: their RSS)."""
    return m.get(f"peak_{measure}", m["peak_rss"])[part] / MiB


def _summary(m: dict) -> str:
    if "run_s" in m:  # a command side's
        return (
            f"{m['seconds']:.1f}s from its start to its end (its run {_secs(m['run_s'])}, "
            f"JVM and session start in it {_secs(m.get('run_session_s'))}, its fold "
            f"{_secs(m['fold_s'])}; peak {_peak(m, 'total'):,.0f} MiB)"
        )
    out = ", ".join(f"{v:,} {k}" for k, v in m["output"].items())
    requests = f"; {_requests_text(m['requests'])}" if "requests" in m else ""
    return (
        f"{m['seconds']:.1f}s (+ {m['session_s']:.1f}s JVM and session start; "
        f"{len(m['batches'])} batches, {out}, peak {_peak(m, 'total'):,.0f} MiB"
        f"{requests})"
    )


def run_workload(
    work: Path, wl: Workload, sides: list[Side], args, lakes: BucketLakes | None = None
) -> dict[str, list[dict]]:
    landing = prepare_landing(work, wl, args.format)
    fpb = args.files_per_batch or wl.files_per_batch
    if wl.is_small_run:
        _prepare_history(work, wl, landing, sides, args.format, args.shuffle_partitions)
    if AGGREGATES[wl.aggregates].own is not None and any(s.what == "command" for s in sides):
        print(f"[{wl.name}] a code pipeline: `panestore run CONF` is not measured", flush=True)
        sides = [s for s in sides if s.what != "command"]
    if wl.has_two_inputs:  # beside each local panestore side, the same events as one input
        sides = [
            twin
            for s in sides
            for twin in (s, replace(s, label=_one_input_label(s.label), one_input=True))
            if not twin.one_input or (s.what != "native" and not s.bucket)
        ]
    results: dict[str, list[dict]] = {s.label: [] for s in sides}
    for i in range(args.repeat):
        for side in sides if i % 2 == 0 else sides[::-1]:
            target, history = _targets(work, wl, side)
            _reset(target, history)
            m = _child(
                side,
                landing / ONE_INPUT if side.one_input else landing,
                target,
                args.format,
                fpb,
                args.shuffle_partitions,
                history,
                lakes,
                "ctr-one" if side.one_input else wl.aggregates,
            )
            results[side.label].append(m)
            print(f"[{wl.name}] run {i + 1}: {side.label} {_summary(m)}", flush=True)
    raw = work / wl.name / "results.json"
    raw.write_text(json.dumps(results, indent=1))
    print(f"[{wl.name}] measurements as JSON: {raw}")
    report(wl, results)
    return results


# -- the report -----------------------------------------------------------------------------


BATCH_PHASES = (
    ("listing files (latestOffset)", ("latestOffset", "getOffset")),
    ("planning (queryPlanning)", ("queryPlanning",)),
    ("getting the batch (getBatch)", ("getBatch",)),
    ("running it, sink included (addBatch)", ("addBatch",)),
    ("checkpoint (walCommit, commitOffsets)", ("walCommit", "commitOffsets")),
)
"""Spark's progress ``durationMs`` entries shown per batch (of its ``triggerExecution``)."""


def _batch_rows(batches: list[dict]) -> list[tuple[str, float | None]]:
    """Rows of the breakdown for a run's batches: each batch (a long run's middle data batches
    summed), Spark's phases of it, and the sink's Delta commits."""
    rows: list[tuple[str, float | None]] = []
    last = len(batches) - 1
    groups: list[tuple[str, list[dict]]] = []
    for i, b in enumerate(batches):
        kind = (f"{b['rows']:,} rows" if b["rows"] else "no data") + (
            ", the trailing no-data batch" if i == last and not b["rows"] else ""
        )
        if 0 < i < last - 1 and len(batches) > 4:
            if i == 1:
                groups.append((f"batches 1-{last - 2} (data, summed)", []))
            groups[-1][1].append(b)
        else:
            groups.append((f"batch {i} ({kind})", [b]))
    for label, bs in groups:
        name = label.split(" (")[0]
        if not all(b["durations_ms"] for b in bs):  # (not reported by an older checkout)
            rows.append((label, None))
            continue

        def ms(*names: str, bs=bs) -> float:
            return sum(b["durations_ms"].get(n, 0) for b in bs for n in names) / 1000

        total = ms("triggerExecution")
        rows.append((label, total))
        for phase, names in BATCH_PHASES:
            rows.append((f"    {name}: {phase}", ms(*names)))
        commits = [b["commit_s"] for b in bs if b["commit_s"] is not None]
        rows.append((f"      {name}: of which Delta commits", sum(commits) if commits else None))
        rest = total - sum(ms(*names) for _, names in BATCH_PHASES)
        rows.append((f"    {name}: the rest of the trigger", rest))
    return rows


def breakdown(m: dict) -> list[tuple[str, float | None]]:
    """Where the time of one measurement went, as (label, seconds) rows."""
    phases = m.get("phases") or {}
    in_batches = sum(b["durations_ms"].get("triggerExecution", 0) for b in m["batches"]) / 1000
    rows: list[tuple[str, float | None]] = [
        ("JVM and session start (not in the run's time)", m["session_s"]),
        ("run (timed)", m["seconds"]),
        ("  prepare: lock, state layout, tables, checks", phases.get("prepare")),
        ("  build the query (DataFrames)", phases.get("build")),
        (
            "  query start and stop, outside batches",
            phases["query"] - in_batches if "query" in phases else None,
        ),
    ]
    rows += [("  " + label, secs) for label, secs in _batch_rows(m["batches"])]
    accounted = sum(phases.get(p, 0.0) for p in ("prepare", "build", "query"))
    rows.append(("  the rest (reports, ticks)", m["seconds"] - accounted if phases else None))
    return rows


def _cpu_line(side: str, cpus: list[dict[str, float]]) -> str:
    """``CPU <side>: ...``: the medians over its measurements of :attr:`TreeUse.cpu`."""
    if not cpus:
        return f"CPU {side}: not measured"
    m = {k: statistics.median(c.get(k, 0.0) for c in cpus) for k in cpus[0]}
    return (
        f"CPU {side}: {m['total']:.1f} s (driver Python {m['driver']:.1f}, JVM {m['jvm']:.1f}: "
        f"JIT compilers {m['JIT compilers']:.1f}, task threads {m['task threads']:.1f}; "
        f"Python workers {m['workers']:.1f}), medians"
    )


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def report(wl: Workload, results: dict[str, list[dict]]) -> None:
    processes = {s: ms for s, ms in results.items() if "run_s" in ms[0]}
    results = {s: ms for s, ms in results.items() if s not in processes}
    labels = list(results)
    events = wl.events
    medians = {s: statistics.median(m["seconds"] for m in ms) for s, ms in results.items()}
    with_jvm = {
        s: statistics.median(m["seconds"] + m["session_s"] for m in ms) for s, ms in results.items()
    }
    print(
        f"\n== {wl.name}: {events:,} events"
        + (f" into a lake holding {wl.history_keys:,} keys" if wl.is_small_run else "")
        + f", medians of {len(next(iter(results.values())))} =="
    )
    for s in labels:
        print(
            f"{s:>22}: {medians[s]:7.2f}s = {events / medians[s]:>10,.0f} events/s   "
            f"(with JVM and session start {with_jvm[s]:.2f}s)"
        )
    if "native" in results:
        for s in labels:
            if s != "native":
                print(
                    f"ratio {s} / native: throughput {medians['native'] / medians[s]:.2f}, "
                    f"time {medians[s] / medians['native']:.2f}x (with JVM start: time "
                    f"{with_jvm[s] / with_jvm['native']:.2f}x)"
                )
    for s in labels:
        if s.endswith(BUCKET_SUFFIX) and s[: -len(BUCKET_SUFFIX)] in results:
            local = s[: -len(BUCKET_SUFFIX)]
            print(
                f"ratio {s} / {local}: time {medians[s] / medians[local]:.2f}x "
                f"(with JVM start: time {with_jvm[s] / with_jvm[local]:.2f}x)"
            )
    if processes:
        print(
            "as a process: `panestore run CONF` (a scheduled run, its fold included) from its "
            "start to its end, what a scheduler waits for:"
        )
    for s, ms in processes.items():
        total = statistics.median(m["seconds"] for m in ms)
        run, fold = _median([m["run_s"] for m in ms]), _median([m["fold_s"] for m in ms])
        session = _median([m.get("run_session_s") for m in ms])
        rest = total - (run or 0.0) - (fold or 0.0)
        print(
            f"{s:>22}: {total:7.2f}s: its run {_secs(run)} (JVM and session start in it: "
            f"{_secs(session)}), its fold {_secs(fold)}, the rest {rest:.1f}s (interpreter and "
            f"imports, checks{'' if session else ', JVM and session start'}, the JVM's exit); "
            f"peak {max(_peak(m, 'total') for m in ms):,.0f} MiB PSS"
        )
    _whole_processes(wl, {**results, **processes})
    peaks = {
        s: {
            measure: {k: max(_peak(m, k, measure) for m in results[s]) for k in PeakMemory.PARTS}
            for measure in PeakMemory.MEASURES
        }
        for s in labels
    }
    for s in labels:
        pss, rss = peaks[s]["pss"], peaks[s]["rss"]
        ratio = ""
        if s != "native" and "native" in peaks:
            ratio = f", {pss['total'] / peaks['native']['pss']['total']:.2f}x native's"
        print(
            f"peak memory {s}: {pss['total']:,.0f} MiB PSS{ratio} (driver Python "
            f"{pss['driver']:,.0f}, JVM {pss['jvm']:,.0f}, Python workers {pss['workers']:,.0f}); "
            f"RSS summed {rss['total']:,.0f} MiB (Python workers {rss['workers']:,.0f})"
        )
    for s, ms in {**results, **processes}.items():
        print(_cpu_line(s, [m["cpu"] for m in ms if "cpu" in m]))
    tables = {s: [breakdown(m) for m in ms] for s, ms in results.items()}
    order: list[str] = []
    for rows in (r for ts in tables.values() for r in ts):
        order += [label for label, _ in rows if label not in order]
    print(
        f"\nwhere the time goes (seconds, median per row)\n{'':<58}"
        + "".join(f"{s:>22}" for s in labels)
    )
    for label in order:
        cells = []
        for s in labels:
            v = _median([dict(rows).get(label) for rows in tables[s]])
            cells.append(f"{'-' if v is None else f'{v:.2f}':>22}")
        print(f"{label:<58}" + "".join(cells))
    counted = [s for s in labels if all("requests" in m for m in results[s])]
    if counted:
        print(
            f"\nstore requests during the run (median per row)\n{'':<58}"
            + "".join(f"{s:>22}" for s in counted)
        )
        for kind in (*KINDS, "total"):
            cells = [
                f"{statistics.median(_total(m['requests'], kind) for m in results[s]):>22,.0f}"
                for s in counted
            ]
            print(f"{kind:<58}" + "".join(cells))
    print(flush=True)


def _whole_processes(wl: Workload, results: dict[str, list[dict]]) -> None:
    """Each side's whole process (its child from its start to its end: the interpreter and
    imports, the JVM's and session's start, the run, for a command its checks and fold, the
    JVM's exit; median), as a multiple of native's; for the two-inputs workload each two-input
    side's time as a multiple of its one-input side's (the same events as one input)."""
    if not all("process_s" in m for ms in results.values() for m in ms):
        return  # (measurements of an older benchmark)
    whole = {s: statistics.median(m["process_s"] for m in ms) for s, ms in results.items()}
    native = whole.get("native")
    print("whole process, from the child's start to its end (median):")
    for s, secs in whole.items():
        versus = "" if native is None or s == "native" else f" = {secs / native:.2f}x native's"
        print(f"{s:>36}: {secs:7.2f}s{versus}")
    if not wl.has_two_inputs:
        return
    runs = {s: statistics.median(m["seconds"] for m in ms) for s, ms in results.items()}
    for s in results:
        one = _one_input_label(s)
        if one in results:
            print(
                f"ratio two inputs / one input of the same {wl.events:,} events: {s}: run "
                f"{runs[s] / runs[one]:.2f}x, whole process {whole[s] / whole[one]:.2f}x"
            )


def _total(counts: dict[str, int], kind: str) -> int:
    """``counts[kind]``; ``total``: the sum over :data:`KINDS`."""
    return sum(counts[k] for k in KINDS) if kind == "total" else counts[kind]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--workload",
        action="append",
        choices=(*WORKLOADS, "all"),
        help="what to measure (repeatable; default 1m)",
    )
    ap.add_argument("--format", choices=("jsonl", "parquet", "delta"), default="jsonl")
    ap.add_argument("--files-per-batch", type=int, help="maxFilesPerTrigger (default 100)")
    ap.add_argument("--shuffle-partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each (median shown)")
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument(
        "--no-process",
        action="store_true",
        help="do not also time `panestore run` as a process from its start to its end",
    )
    ap.add_argument(
        "--compare-code",
        metavar="DIR",
        action="append",
        default=[],
        help="also measure panestore of this checkout (before a change; repeatable)",
    )
    ap.add_argument(
        "--lake-in-bucket",
        action="store_true",
        help="also measure panestore with its lake in a bucket of an S3 server started here "
        "(1m and 10m)",
    )
    ap.add_argument("--keep", help="work directory to use and keep (landing files are reused)")
    ap.add_argument("--measure", choices=("panestore", "native"), help=argparse.SUPPRESS)
    ap.add_argument("--landing", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--lake-uri", help=argparse.SUPPRESS)
    ap.add_argument("--marks", help=argparse.SUPPRESS)
    ap.add_argument("--aggregates", choices=tuple(AGGREGATES), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.measure:  # a child: one measurement, printed as JSON
        got = measure_once(
            args.measure,
            Path(args.landing),
            Path(args.target),
            args.format,
            args.files_per_batch,
            args.shuffle_partitions,
            args.lake_uri,
            args.marks,
            args.aggregates,
        )
        print(json.dumps(got))
        return
    names = args.workload or ["1m"]
    if "all" in names:  # every workload the format serves (two-inputs: JSON lines only)
        names = [n for n, w in WORKLOADS.items() if args.format == "jsonl" or not w.has_two_inputs]
    names = list(dict.fromkeys(names))
    small = [n for n in names if WORKLOADS[n].is_small_run]
    if args.lake_in_bucket and small:
        ap.error(
            f"--lake-in-bucket measures workloads 1m and 10m only, not {', '.join(small)}: each "
            "measurement of a small run starts from a copy of a lake's history, which is not "
            "copied into a bucket (choose --workload 1m or 10m)"
        )
    two = [n for n in names if WORKLOADS[n].has_two_inputs]
    if two and (args.format != "jsonl" or args.lake_in_bucket):
        ap.error(
            f"{', '.join(two)} lands JSON lines on a local lake only: drop --format "
            f"{args.format} or --lake-in-bucket, or choose another --workload"
        )
    sides = [Side("panestore", "panestore")]
    if args.lake_in_bucket:
        sides.append(Side("panestore", "panestore" + BUCKET_SUFFIX, bucket=True))
    for code in (str(Path(c).resolve()) for c in args.compare_code):
        sides.append(Side("panestore", f"panestore@{Path(code).name}", code))
    if not args.no_process:
        sides += [
            Side("command", f"{side.label}{PROCESS_SUFFIX}", side.code)
            for side in sides
            if side.what == "panestore" and not side.bucket
        ]
    if not args.no_native:
        sides.append(Side("native", "native"))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="panestore-bench-"))
    for code in {ROOT, *(Path(side.code) for side in sides if side.code)}:
        compile_checkout(code)
    # every measured JVM starts with Spark's classes archived (jobs/startup/class_archive.py)
    subprocess.run([sys.executable, "-m", "jobs.startup.session"], cwd=ROOT, check=True)
    with contextlib.ExitStack() as scope:
        lakes = None
        if args.lake_in_bucket:
            server = scope.enter_context(S3Server(work / "s3-server.log"))
            print(f"S3 server (moto) at {server.endpoint}, its request log {server.log}")
            lakes = BucketLakes(server)
        for name in names:
            run_workload(work, WORKLOADS[name], sides, args, lakes)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
