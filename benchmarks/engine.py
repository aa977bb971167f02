"""Engine benchmark: the pure panes engine on the standard workload, and Beam's driver on the same.

    ./dev bench-engine [--events N] [--repeat R] [--beam-events N] [--no-beam]

Workload (``benchmarks/workload.py``): 1,000,000 events, 1,000 keys, one hour of event time,
~10% out of order by up to 5 minutes, bundles of 10,000. Pipeline: 1-minute fixed windows,
``AfterWatermark(early=AfterCount(100), late=AfterCount(1))``, accumulating sum. Per bundle:
advance processing time, add the bundle, advance the watermark (firing what is due).

It prints the median of ``--repeat`` runs (one process, one core) in events/s, and the same for
Apache Beam Python's ``GeneralTriggerDriver`` on the same bundles, measured in the same
invocation, with the ratio. Beam runs in its own virtual environment (``.beam-venv``, created
on first use with ``pip install apache-beam``; or set ``PANESTORE_BEAM_PYTHON``) and is never
a dependency of panestore. Beam's driver keeps every window forever and is slow, so it is
measured on a prefix of the workload (``--beam-events``); events/s are comparable.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workload import make_bundles, prefix  # noqa: E402
from panes import (  # noqa: E402
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    FixedWindows,
    Simulator,
    Windowing,
    combiners,
)

BEAM_VERSION = "2.77.0"


def windowing() -> Windowing:
    return Windowing(
        FixedWindows(60_000_000),
        trigger=AfterWatermark(early=AfterCount(100), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
    )


def run_once(bundles) -> tuple[float, int, int]:
    """CPU seconds of this process for one run (on a shared machine, CPU time is what one
    core spent; wall time also counts the other tenants), panes, dropped."""
    sim = Simulator(windowing(), combiners.sum())
    start = time.process_time()
    for elements, watermark, processing_time in bundles:
        sim.advance_processing_time(processing_time)
        sim.add_elements(elements)
        sim.advance_watermark(watermark)
    return time.process_time() - start, len(sim.panes), len(sim.dropped)


def beam_python() -> str | None:
    configured = os.environ.get("PANESTORE_BEAM_PYTHON")
    if configured:
        return configured
    venv = ROOT / ".beam-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        print(
            f"creating {venv} with apache-beam=={BEAM_VERSION} (first run only)...", file=sys.stderr
        )
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"apache-beam=={BEAM_VERSION}"],
            check=True,
        )
    return str(python)


def run_beam(events: int, repeat: int) -> dict | None:
    python = beam_python()
    result = subprocess.run(
        [python, str(HERE / "beam_engine.py"), "--events", str(events), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        print("Beam benchmark failed:\n" + result.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--beam-events", type=int, default=200_000)
    parser.add_argument("--no-beam", action="store_true")
    args = parser.parse_args(argv)

    bundles = make_bundles()
    if args.events < 1_000_000:
        bundles = prefix(bundles, args.events)
    n = sum(len(b[0]) for b in bundles)
    runs = []
    for _ in range(args.repeat):
        gc.collect()
        seconds, panes, dropped = run_once(bundles)
        runs.append(seconds)
    median = statistics.median(runs)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"panes engine: {n:,} events, {panes:,} panes, {dropped:,} dropped")
    print(
        f"  CPU s per run: {', '.join(f'{r:.2f}' for r in runs)}; median {median:.2f} s = "
        f"{n / median:,.0f} events/s; peak RSS {peak_mib:,.0f} MiB (incl. the workload)"
    )

    if args.no_beam:
        return
    # Same prefix for both engines, so the ratio compares like with like.
    ours_prefix = prefix(bundles, args.beam_events)
    prefix_runs = []
    for _ in range(args.repeat):
        gc.collect()
        prefix_runs.append(run_once(ours_prefix)[0])
    ours_rate = args.beam_events / statistics.median(prefix_runs)
    beam = run_beam(args.beam_events, args.repeat)
    if beam is None:
        return
    print(
        f"on the first {args.beam_events:,} events: panes {ours_rate:,.0f} events/s, "
        f"{beam['engine']} {beam['events_per_s']:,.0f} events/s "
        f"({beam['panes']:,} panes); ratio {ours_rate / beam['events_per_s']:.1f}x"
    )


if __name__ == "__main__":
    main()
