"""Requests to the store of small scheduled runs of a lake in a bucket, and what bounds them.

    PYTHONPATH=. .venv/bin/python benchmarks/bucket_requests.py [--runs 30] [--events 1000]
        [--keys 1000] [--checkpoint-interval N] [--fold-in-run] [--azure] [--keep DIR]

Starts an S3 server (moto's, a child process on the loopback address:
``benchmarks/s3_server.py``), then runs a small pipeline on a lake in one of its buckets
(``lake = "s3://lakes/requests"``; ``--azure``: Azurite's blob service and ``lake =
"az://lakes/requests"``, ``benchmarks/azure_server.py``, counted the same way), Spark's
checkpoint and the run's files in a local ``checkpoint`` directory): 1-minute fixed windows,
``sum(value)`` over ``--keys`` keys, the trigger of ``benchmarks/spark_job.py``, a 5-minute
watermark delay. ``--runs`` times, one
landing file of ``--events`` events (``benchmarks/workload.py``: one minute of event time per
file, ~10% of the events out of order by up to 5 minutes) lands, then the pipeline runs as a
scheduler runs it: ``panestore run CONF --no-materialize`` in a child process, then the fold,
``panestore materialize CONF``, in another (``--fold-in-run``: ``panestore run CONF``, the fold
in the run's process, counted with the run). From the sixth run on, each run's watermark closes
one more window. After the last, one more run and fold with no new file.

The requests of each child process are counted from the server's request log, between marks the
benchmark logs before it starts and after it exits: by kind (LIST, GET, HEAD, PUT, POST,
DELETE) and by the lake's prefix they name (``panes/``, ``late/``, ``rejected/``, ``current/``,
``_locks/``; ``other``: the locks' batch deletes, whose keys the log does not show). Printed per
run: those counts for the run and the fold, the pane log's Delta version after them and the Delta
checkpoints written (a PUT of ``_delta_log/<version>.checkpoint.parquet``); then a summary: the
minimum, median and maximum per run, the requests each commit of the tables adds to a run
(delta-rs reads a table's JSON commits since its last Delta checkpoint every time it opens it),
the runs around each checkpoint, and the run without new data.

Each run commits once to ``panes``, ``late`` and ``rejected`` per batch (a batch commits to every
table, empty or not; before state layout format 3 a run also had Spark's trailing no-data batch)
and the fold once to ``current``.
delta-rs writes a Delta checkpoint with the commit of version ``N - 1``, ``2N - 1``... (``N``: the
table property ``delta.checkpointInterval``, which panestore sets to 10 on the tables it creates,
``sinks/lake/lake_format.py``; Delta's default is 100). ``--checkpoint-interval N`` sets that
property on the four tables after the first run and fold (one metadata commit each, not counted) to
see the counts under another interval (100: as before panestore set it). A run and its fold take ~17
s on a quiet two-core machine (a JVM starts for each run), more under load: the default 30 runs take
~9 minutes, ``--runs 120`` ~35. The request counts do not depend on the machine's speed, except the
run lock's renewals (a PUT every 15 s of a run: the count of _locks/ PUTs varies with the run's
length). Figures, not a test.
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.azure_server import AzureServer  # noqa: E402
from benchmarks.s3_server import KINDS, S3Server, by_kind, by_table  # noqa: E402
from benchmarks.spark_job import TRIGGER, write_file  # noqa: E402
from benchmarks.workload import MICROS, iter_bundles  # noqa: E402
from sinks.lake import CHECKPOINT_INTERVAL  # noqa: E402

BUCKET = "lakes"
LAKE_PREFIX = "requests"
LAKE = f"s3://{BUCKET}/{LAKE_PREFIX}"
AZURE_LAKE = f"az://{BUCKET}/{LAKE_PREFIX}"
TABLES = ("panes", "late", "rejected", "current", "_locks")
DELTA_TABLES = ("panes", "late", "rejected", "current")
DEFAULT_CHECKPOINT_INTERVAL = int(CHECKPOINT_INTERVAL)  # what panestore's tables are created with
MINUTE_US = 60 * MICROS


@dataclass
class Counted:
    """The requests one child process (a run or a fold) made, and how long it took."""

    seconds: float
    kinds: dict[str, int]
    tables: dict[str, int]
    checkpoints: list[str]  # Delta checkpoints it wrote, as "table@version"

    @property
    def total(self) -> int:
        return sum(self.kinds.values())


@dataclass
class Run:
    """One scheduled run: the events landed before it, its run and fold (``fold`` is None with
    ``--fold-in-run``), and the tables' Delta versions after them."""

    number: int
    landed: int
    run: Counted
    fold: Counted | None
    versions: dict[str, int]
    checkpoints: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.run.total + (self.fold.total if self.fold else 0)


def pipeline_toml(landing: Path, checkpoint: Path, lake: str = LAKE) -> str:
    """The configuration of the measured pipeline, its lake at ``lake`` (also
    ``benchmarks/long_run.py``'s)."""
    return f"""\
name = "requests"
lake = "{lake}"
checkpoint = "{checkpoint}"
keys = ["key"]
event_time = "ts"
window = "FixedWindows(1m)"
trigger = "{TRIGGER}"
accumulation_mode = "accumulating"

[source]
format = "jsonl"
path = "{landing}"

[source.schema]
key = "string"
ts = "timestamp"
value = "long"

[watermark]
delay = "5m"

[aggregates]
value = "sum(value)"
"""


class Bench:
    """The lake, its landing directory and the server; runs the commands and counts.

    ``server`` None (``benchmarks/long_run.py`` on a local lake, ``lake`` a directory): the
    commands are timed, no request counted."""

    def __init__(self, server: S3Server | None, work: Path, lake: str = LAKE) -> None:
        self.server = server
        self.work = work
        self.lake = lake
        self.landing = work / "landing"
        self.conf = work / "pipeline.toml"
        self.steps = 0
        self.landing.mkdir(parents=True)
        self.conf.write_text(pipeline_toml(self.landing, work / "checkpoint", lake))
        # the children run this checkout's panestore, with the server's AWS environment
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        self.env = {**os.environ, "PYTHONPATH": path}

    def command(self, *args: str) -> Counted:
        """``panestore ARGS CONF`` in a child process (from this checkout, in the work
        directory), its requests counted between two marks."""
        self.steps += 1
        label = f"step{self.steps}"
        argv = [sys.executable, "-m", "jobs.cli.commands", args[0], str(self.conf), *args[1:]]
        if self.server is not None:
            self.server.mark(f"{label}-start")
        t = time.perf_counter()
        proc = subprocess.run(
            argv, capture_output=True, text=True, check=False, env=self.env, cwd=self.work
        )
        seconds = time.perf_counter() - t
        if self.server is not None:
            self.server.mark(f"{label}-end")
        if proc.returncode != 0:
            raise SystemExit(
                f"panestore {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        if self.server is None:
            return Counted(seconds, {}, {}, [])
        requests = self.server.requests_between(f"{label}-start", f"{label}-end")
        checkpoints = [
            f"{r.table(LAKE_PREFIX)}@{int(r.key.rsplit('/', 1)[1].split('.')[0])}"
            for r in requests
            if r.kind == "PUT" and ".checkpoint." in r.key and r.key.endswith(".parquet")
        ]
        return Counted(
            seconds,
            by_kind(requests),
            by_table(requests, LAKE_PREFIX, TABLES),
            checkpoints,
        )

    def versions(self) -> dict[str, int]:
        """The Delta version of each of the lake's tables (read here, outside the marks)."""
        from deltalake import DeltaTable

        return {t: DeltaTable(f"{self.lake}/{t}").version() for t in DELTA_TABLES}

    def set_checkpoint_interval(self, interval: int) -> None:
        """``delta.checkpointInterval`` on every table (one metadata commit each)."""
        from deltalake import DeltaTable

        for t in DELTA_TABLES:
            DeltaTable(f"{self.lake}/{t}").alter.set_table_properties(
                {"delta.checkpointInterval": str(interval)}
            )

    def scheduled_run(self, number: int, elements: list | None, fold_in_run: bool) -> Run:
        """Land ``elements`` (None: nothing), then run and fold."""
        if elements:
            write_file(self.landing / f"part-{number:05d}.jsonl", elements, "jsonl")
        if fold_in_run:
            run, fold = self.command("run"), None
        else:
            run = self.command("run", "--no-materialize")
            fold = self.command("materialize")
        checkpoints = run.checkpoints + (fold.checkpoints if fold else [])
        return Run(number, len(elements or ()), run, fold, self.versions(), checkpoints)


# -- printing -------------------------------------------------------------------------------

HEADER = (
    f"{'run':>4} {'':<5} {'panes v':>7} {'secs':>5} | "
    + " ".join(f"{k:>6}" for k in (*KINDS, "total"))
    + " | "
    + " ".join(f"{t:>8}" for t in (*TABLES, "other"))
)


def _row(number: str, what: str, version: str, c: Counted) -> str:
    kinds = " ".join(f"{c.kinds[k]:>6}" for k in KINDS) + f" {c.total:>6}"
    tables = " ".join(f"{c.tables[t]:>8}" for t in (*TABLES, "other"))
    note = f"  checkpoint written: {', '.join(c.checkpoints)}" if c.checkpoints else ""
    return f"{number:>4} {what:<5} {version:>7} {c.seconds:>5.1f} | {kinds} | {tables}{note}"


def print_run(r: Run, label: str | None = None) -> None:
    number = label or str(r.number)
    print(_row(number, "run", str(r.versions["panes"]), r.run), flush=True)
    if r.fold is not None:
        print(_row("", "fold", "", r.fold), flush=True)


def _spread(values: Sequence[float]) -> str:
    return f"{min(values):>6,.0f} {statistics.median(values):>7,.0f} {max(values):>6,.0f}"


def summary(runs: list[Run], idle: Run, interval: int | None) -> None:
    """Minimum, median and maximum per run; growth with the tables' commits; checkpoints."""
    folds = [r.fold for r in runs if r.fold is not None]
    print(f"\n== {len(runs)} scheduled runs, requests per run: min, median, max ==")
    print(f"{'':<22}{'min':>6} {'median':>7} {'max':>6}")
    print(f"{'run + fold':<22}{_spread([r.total for r in runs])}")
    print(f"{'run':<22}{_spread([r.run.total for r in runs])}")
    for k in KINDS:
        print(f"{'  ' + k:<22}{_spread([r.run.kinds[k] for r in runs])}")
    if folds:
        print(f"{'fold':<22}{_spread([f.total for f in folds])}")
        for k in KINDS:
            print(f"{'  ' + k:<22}{_spread([f.kinds[k] for f in folds])}")
    print(f"{'run seconds':<22}{_spread([r.run.seconds for r in runs])}")

    interval = interval or DEFAULT_CHECKPOINT_INTERVAL
    due = interval - 1  # delta-rs checkpoints the commits of versions interval-1, 2*interval-1...
    first_checkpoint = next((r.number for r in runs if r.checkpoints), None)
    before = [r for r in runs[1:] if first_checkpoint is None or r.number < first_checkpoint]
    print("\n== growth with the tables' commits ==")
    if len(before) >= 2:
        x = [float(r.versions["panes"]) for r in before]
        for what, ys in (
            ("run + fold", [float(r.total) for r in before]),
            ("run", [float(r.run.total) for r in before]),
            ("run GET", [float(r.run.kinds["GET"]) for r in before]),
        ):
            slope, intercept = statistics.linear_regression(x, ys)
            print(
                f"{what}: {slope:+.1f} requests per pane-log version (runs {before[0].number}-"
                f"{before[-1].number}, pane log v{before[0].versions['panes']}-"
                f"v{before[-1].versions['panes']}, no Delta checkpoint yet; least squares); "
                f"at that rate ~{slope * (due - 1) + intercept:,.0f} at v{due - 1}, the last "
                "version before the first checkpoint (extrapolated)"
            )
    else:
        print("(too few runs before the first Delta checkpoint to fit the growth)")
    everyone = [*runs, idle]
    by_number = {r.number: r for r in everyone}
    for r in everyone:
        if not r.checkpoints:
            continue
        around = [by_number[n] for n in (r.number - 1, r.number, r.number + 1) if n in by_number]
        figures = ", ".join(f"run {a.number}: {a.total:,}" for a in around)
        print(
            f"run {r.number} wrote Delta checkpoints {', '.join(r.checkpoints)}; requests per "
            f"run (+ fold) {figures}"
        )
    if first_checkpoint is None:
        reached = max(max(r.versions.values()) for r in everyone)
        if reached < due:
            print(
                f"no Delta checkpoint was written: the tables reached version {reached}, the "
                f"first is due at version {due} (delta.checkpointInterval {interval}); until "
                "then every open of a table reads every commit of it"
            )
        else:
            print(
                f"NO DELTA CHECKPOINT WAS WRITTEN although the tables reached version "
                f"{reached} (delta.checkpointInterval {interval}): every open of a table reads "
                "every commit of it, and the requests per run grow without bound"
            )
    last = runs[-1]
    print(
        f"\nrun without new data (after run {last.number}): {idle.total:,} requests "
        f"(run {idle.run.total:,}"
        + (f", fold {idle.fold.total:,}" if idle.fold else "")
        + f"); run {last.number} with {last.landed:,} new events: {last.total:,}"
    )


def work_directory(ap: argparse.ArgumentParser, keep: str | None, prefix: str) -> Path:
    """The benchmark's work directory: ``--keep``'s (refused if it exists), else a new temporary
    one."""
    if keep:
        work = Path(keep).absolute()
        if work.exists():
            ap.error(f"--keep {work}: exists (a fresh directory is needed)")
        work.mkdir(parents=True)
        return work
    return Path(tempfile.mkdtemp(prefix=prefix))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="scheduled runs with new data (30)")
    ap.add_argument("--events", type=int, default=1_000, help="events landed per run (1,000)")
    ap.add_argument("--keys", type=int, default=1_000, help="keys (1,000)")
    ap.add_argument(
        "--checkpoint-interval",
        type=int,
        help="set delta.checkpointInterval on the tables after the first run (default: the "
        f"tables' own, {DEFAULT_CHECKPOINT_INTERVAL})",
    )
    ap.add_argument(
        "--fold-in-run",
        action="store_true",
        help="run with the fold in the run's process (panestore run's default), counted with it",
    )
    ap.add_argument(
        "--azure",
        action="store_true",
        help="the lake on Azure storage (Azurite, installed from npm: benchmarks/azure_server.py)",
    )
    ap.add_argument("--keep", help="work directory to use and keep (must not exist)")
    args = ap.parse_args()
    if args.runs < 2 or args.events < 1 or args.keys < 1:
        ap.error("--runs >= 2, --events >= 1 and --keys >= 1 are required")

    work = work_directory(ap, args.keep, "panestore-bucket-requests-")
    bundles = iter_bundles(
        args.runs * args.events,
        args.keys,
        bundle_size=args.events,
        span_us=args.runs * MINUTE_US,
    )
    started = time.perf_counter()
    server_class, lake, named = (
        (AzureServer, AZURE_LAKE, "Azure storage (Azurite)")
        if args.azure
        else (S3Server, LAKE, "S3 server (moto)")
    )
    with server_class(work / "server.log") as server:
        server.fresh_bucket(BUCKET)
        bench = Bench(server, work, lake)
        print(
            f"{named} at {server.endpoint}, lake {lake}, work directory {work}\n"
            f"{args.runs} runs of {args.events:,} new events each over {args.keys:,} keys, "
            f"then one without; {'fold in the run' if args.fold_in_run else 'fold apart'}\n"
        )
        print(HEADER, flush=True)
        runs: list[Run] = []
        for number, (elements, _wm, _pt) in enumerate(bundles, start=1):
            runs.append(bench.scheduled_run(number, elements, args.fold_in_run))
            print_run(runs[-1])
            if number == 1 and args.checkpoint_interval:
                bench.set_checkpoint_interval(args.checkpoint_interval)
                print(f"     delta.checkpointInterval = {args.checkpoint_interval} set")
        idle = bench.scheduled_run(args.runs + 1, None, args.fold_in_run)
        print_run(idle, "idle")
    summary(runs, idle, args.checkpoint_interval)
    minutes = (time.perf_counter() - started) / 60
    print(f"\nin {minutes:.1f} min", flush=True)
    if args.keep:
        results = work / "requests.json"
        results.write_text(json.dumps([asdict(r) for r in [*runs, idle]], indent=1))
        print(f"per run as JSON: {results}; the server's request log: {server.log}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
