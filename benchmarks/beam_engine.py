"""The Beam side of the engine benchmark: Apache Beam Python's trigger driver on the workload.

Runs only in a Python environment with Apache Beam (never panestore's own venv):

    .beam-venv/bin/python benchmarks/beam_engine.py [--events N] [--repeat R]

(the ``.beam-venv`` that ``./dev bench-engine`` creates, or a new one: ``python3.11 -m venv
.beam-venv && .beam-venv/bin/pip install apache-beam==2.77.0``).
panestore's benchmark invokes it through ``subprocess`` and reads one JSON object from stdout:
``{"events", "seconds", "events_per_s", "panes", ...}``; ``seconds`` is the median of the runs.

What is timed: Beam's ``GeneralTriggerDriver`` (one ``InMemoryUnmergedState`` per key, a test
clock for processing time) processing the bundles of ``workload.py`` with FixedWindows(60 s),
AfterWatermark(early=AfterCount(100), late=AfterCount(1)), ACCUMULATING, following the protocol
in ``workload.py``: per bundle, set the processing time, process the bundle's elements per key
at the current watermark, then advance the watermark and fire every due watermark timer. Only
this loop is timed; generating the workload is not.

``--events N`` measures the first N events of the standard 1,000,000-event workload (a prefix:
the same events, bundles and watermarks, cut after N events); ``events_per_s`` is what compares
across engines. Beam Python's driver is pure Python and keeps every window's state forever (it
has no garbage collection), so it slows down as it goes: on a 2-core CI-class machine (Beam
2.77, Python 3.11) 50,000 events ran at about 10,600 events/s, the full 1,000,000 at about
7,400 events/s (135 s timed, 54,000 panes; 4-5 minutes wall clock with workload generation and
input preparation). When that is too slow, measure a prefix (e.g. ``--events 200000``) and
compare events/s, keeping in mind that a prefix flatters Beam (less accumulated state).
Note that the workload has about 17 events per key and window, so AfterCount(100) early panes
never fire: the panes are the on-time ones.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from apache_beam.runners.direct.clock import TestClock
from apache_beam.transforms import trigger as bt
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import FixedWindows, TimestampCombiner, WindowFn
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Duration, Timestamp
from apache_beam.utils.windowed_value import WindowedValue

HERE = Path(__file__).resolve().parent


def _load_workload():
    spec = importlib.util.spec_from_file_location("_panestore_workload", HERE / "workload.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prepare(bundles, window_fn):
    """Beam inputs per bundle: ({key: [WindowedValue]}, watermark, processing_time_us).

    Done before timing: building WindowedValues and assigning windows is the runner's job,
    not the trigger driver's (panestore's engine gets plain tuples as well).
    """
    prepared = []
    for elements, watermark, processing_time in bundles:
        by_key = defaultdict(list)
        for key, value, ts_us in elements:
            ts = Timestamp(micros=ts_us)
            windows = window_fn.assign(WindowFn.AssignContext(ts, value))
            by_key[key].append(WindowedValue(value, ts, windows))
        prepared.append((dict(by_key), Timestamp(micros=watermark), processing_time))
    return prepared


def run_once(prepared):
    window_fn = FixedWindows(60)
    windowing = Windowing(
        window_fn,
        bt.AfterWatermark(early=bt.AfterCount(100), late=bt.AfterCount(1)),
        bt.AccumulationMode.ACCUMULATING,
        TimestampCombiner.OUTPUT_AT_EOW,
        Duration(0),
    )
    clock = TestClock(Timestamp(micros=0))
    driver = bt.GeneralTriggerDriver(windowing, clock)
    states = {}
    watermark = MIN_TIMESTAMP
    processing_us = 0
    panes = 0
    start = time.process_time()
    for by_key, next_watermark, processing_time in prepared:
        if processing_time > processing_us:
            clock.advance_time(Duration(micros=processing_time - processing_us))
            processing_us = processing_time
        for key, values in by_key.items():
            state = states.get(key)
            if state is None:
                state = states[key] = bt.InMemoryUnmergedState()
            for _ in driver.process_elements(state, values, watermark, watermark):
                panes += 1
        watermark = next_watermark
        for state in states.values():
            while True:
                due = state.get_and_clear_timers(watermark)
                if not due:
                    break
                for window, (name, domain, ts, _tag) in due:
                    for _ in driver.process_timer(window, name, domain, ts, state, watermark):
                        panes += 1
    return time.process_time() - start, panes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    workload = _load_workload()
    bundles = workload.make_bundles(seed=args.seed)
    if args.events < sum(len(b[0]) for b in bundles):
        bundles = workload.prefix(bundles, args.events)
    n = sum(len(b[0]) for b in bundles)
    t0 = time.process_time()
    prepared = _prepare(bundles, FixedWindows(60))
    prepare_seconds = time.process_time() - t0

    runs, panes = [], None
    for _ in range(max(1, args.repeat)):
        gc.collect()
        seconds, panes = run_once(prepared)
        runs.append(seconds)
    seconds = statistics.median(runs)
    import apache_beam

    json.dump(
        {
            "engine": f"apache-beam {apache_beam.__version__} GeneralTriggerDriver",
            "events": n,
            "bundles": len(bundles),
            "seconds": seconds,
            "runs": runs,
            "events_per_s": n / seconds if seconds else None,
            "panes": panes,
            "prefix_of": 1_000_000 if n < 1_000_000 else None,
            "prepare_seconds": prepare_seconds,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
