"""Generate ``beam_expected.json``: what Apache Beam Python's trigger driver emits per scenario.

Regenerate (from the repository root) in an isolated Beam environment, e.g. the ``.beam-venv``
that ``./dev bench-engine`` creates, or a new one:

    python3.11 -m venv .beam-venv && .beam-venv/bin/pip install apache-beam==2.77.0
    .beam-venv/bin/python tests/conformance/beam_generate.py

Beam is never a dependency of panestore: this script is run by hand and its output, the JSON
file, is committed. ``test_beam_conformance.py`` reads only the JSON.

The scenarios are those of ``tests/scenarios/beam_conformance.toml``, in the scenario format of
``tests/scenarios/format.py`` (standard library only, so it loads in the Beam environment): the
window function, trigger and allowed lateness in panestore's text forms, and steps (bundles of
``(key, value, event time)``, watermark and processing-time moves). Only the ``to_list()``
combiner is supported: each pane records its sorted values.

How Beam is driven (as a black box, the way Beam's own driver transcript tests drive it): one
``GeneralTriggerDriver`` per scenario with a test clock for processing time, one
``InMemoryUnmergedState`` per key. Each ``input`` step is one bundle per key passed to
``process_elements`` with the current watermark as both input and output watermark. After every
step all due timers are fired through ``process_timer``, repeatedly until none are due:
watermark timers due at the current watermark, processing-time timers due at the current
processing time. Processing times are whole seconds because Beam's test clock and its
AfterProcessingTime timers use float seconds.

Per emitted pane the JSON records the window, sorted values, output timestamp, pane info and
``n_new``, the number of elements in the pane that no earlier pane of the same window (or of a
window merged into it) contained; the conformance test needs it for difference 1 (empty panes).
Per step it also records ``dropped``: how many (element, window) pairs Beam ignored because the
window was expired (watermark > window end + allowed lateness) when the bundle arrived.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import apache_beam
from apache_beam.runners.direct.clock import TestClock
from apache_beam.transforms import trigger as bt
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import (
    FixedWindows,
    GlobalWindow,
    GlobalWindows,
    Sessions,
    SlidingWindows,
    TimestampCombiner,
    WindowFn,
)
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Duration, Timestamp
from apache_beam.utils.windowed_value import PaneInfoTiming, WindowedValue

HERE = Path(__file__).resolve().parent
OUT = HERE / "beam_expected.json"
FORMAT = HERE.parent / "scenarios" / "format.py"
S = 1_000_000


def load_scenarios():
    """The Beam conformance scenarios (``tests.scenarios.format.Scenario``), loaded by path: this
    script runs outside the project's environment."""
    spec = importlib.util.spec_from_file_location("_scenario_format", FORMAT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(mod)
    return mod.load(mod.BEAM_FILE)


# ---- trigger and window-function text -> Beam objects ---------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<dur>\d+(?:us|ms|s|m|h)\b)"
    r"|(?P<int>\d+)|(?P<punct>[(),=]))"
)
_UNIT_US = {"us": 1, "ms": 1_000, "s": S, "m": 60 * S, "h": 3600 * S}


class _Duration(int):
    """A parsed duration literal, in microseconds."""


def _tokenize(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse trigger at {text[pos:]!r}")
        pos = m.end()
        if m.group("name"):
            out.append(("name", m.group("name")))
        elif m.group("dur"):
            num, unit = re.fullmatch(r"(\d+)(us|ms|s|m|h)", m.group("dur")).groups()
            out.append(("value", _Duration(int(num) * _UNIT_US[unit])))
        elif m.group("int"):
            out.append(("value", int(m.group("int"))))
        else:
            out.append(("punct", m.group("punct")))
    return out


def _seconds(us):
    if us % S:
        raise ValueError(f"processing-time delays must be whole seconds, got {us} us")
    return us // S


def _build_window_fn(name, args, kwargs):
    def micros(i, key):
        return Duration(micros=int(args[i] if i < len(args) else kwargs[key]))

    def offset(i):
        return Timestamp(micros=int(args[i] if i < len(args) else kwargs.get("offset", 0)))

    if name == "FixedWindows":
        return FixedWindows(micros(0, "size"), offset(1))
    if name == "SlidingWindows":
        return SlidingWindows(micros(0, "size"), micros(1, "period"), offset(2))
    if name == "Sessions":
        return Sessions(micros(0, "gap"))
    if name == "GlobalWindows":
        return GlobalWindows()
    raise ValueError(f"unknown window function {name}")


def _build_trigger(name, args, kwargs):
    if name == "AfterWatermark":
        return bt.AfterWatermark(early=kwargs.get("early"), late=kwargs.get("late"))
    if name == "AfterCount":
        (n,) = args or [kwargs["count"]]
        return bt.AfterCount(int(n))
    if name == "AfterProcessingTime":
        (d,) = args or [kwargs["delay"]]
        return bt.AfterProcessingTime(_seconds(int(d)))
    if name == "Repeatedly":
        (sub,) = args
        return bt.Repeatedly(sub)
    if name in ("AfterEach", "AfterAny", "AfterAll", "OrFinally"):
        return getattr(bt, name)(*args)
    if name == "Always":
        return bt.Always()
    if name == "Never":
        return bt._Never()
    if name in ("DefaultTrigger", "Default"):
        return bt.DefaultTrigger()
    raise ValueError(f"unknown trigger {name}")


def parse_trigger(text):
    return _parse(text, _build_trigger)


def parse_window_fn(text):
    return _parse(text, _build_window_fn)


def parse_duration(text):
    """A duration's text (``10s``, ``0s``) -> microseconds."""
    ((kind, value),) = _tokenize(text)
    if kind != "value":
        raise ValueError(f"not a duration: {text!r}")
    return int(value)


def _parse(text, build):
    """``Name(arg, ..., key=arg)`` expressions, nested, built bottom-up by ``build``."""
    toks = _tokenize(text)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else (None, None)

    def take(kind, val=None):
        nonlocal pos
        k, v = peek()
        if k != kind or (val is not None and v != val):
            raise ValueError(f"expected {val or kind} in {text!r}, got {v!r}")
        pos += 1
        return v

    def expr():
        k, _ = peek()
        if k == "value":
            return take("value")
        name = take("name")
        args, kwargs = [], {}
        if peek() == ("punct", "("):
            take("punct", "(")
            while peek() != ("punct", ")"):
                if peek()[0] == "name" and pos + 1 < len(toks) and toks[pos + 1] == ("punct", "="):
                    kw = take("name")
                    take("punct", "=")
                    kwargs[kw] = expr()
                else:
                    args.append(expr())
                if peek() == ("punct", ","):
                    take("punct", ",")
            take("punct", ")")
        return build(name, args, kwargs)

    result = expr()
    if pos != len(toks):
        raise ValueError(f"trailing input in {text!r}")
    return result


# ---- running a scenario ----------------------------------------------------------------------


_COMBINERS = {
    "END_OF_WINDOW": TimestampCombiner.OUTPUT_AT_EOW,
    "EARLIEST": TimestampCombiner.OUTPUT_AT_EARLIEST,
    "LATEST": TimestampCombiner.OUTPUT_AT_LATEST,
}
_TIMING = {
    PaneInfoTiming.EARLY: "EARLY",
    PaneInfoTiming.ON_TIME: "ON_TIME",
    PaneInfoTiming.LATE: "LATE",
}


def run_scenario(sc):
    if sc.combiner != "to_list()":
        raise ValueError(f"{sc.name}: only the to_list() combiner runs on Beam")
    wfn = parse_window_fn(sc.window)
    lateness = Duration(micros=parse_duration(sc.allowed_lateness))
    windowing = Windowing(
        wfn,
        parse_trigger(sc.trigger),
        getattr(bt.AccumulationMode, sc.accumulation),
        _COMBINERS[sc.timestamp_combiner],
        lateness,
    )
    clock = TestClock(Timestamp(micros=0))
    driver = bt.GeneralTriggerDriver(windowing, clock)
    states = {}  # key -> InMemoryUnmergedState, in first-seen order
    watermark = MIN_TIMESTAMP
    processing_us = 0
    uid = 0
    # Element ids already emitted, per lineage: per (key, window) for non-merging window
    # functions (an element of a sliding window belongs to several windows), per key for
    # sessions (an element belongs to exactly one, possibly merged, window at a time).
    emitted = defaultdict(set)
    merging = isinstance(wfn, Sessions)
    global_max = GlobalWindow().max_timestamp()

    def record(key, wv, sink):
        (window,) = wv.windows
        values = list(wv.value)
        lineage = key if merging else (key, window)
        ids = {u for _, u in values}
        n_new = len(ids - emitted[lineage])
        emitted[lineage] |= ids
        pi = wv.pane_info
        is_global = isinstance(window, GlobalWindow)
        ts = wv.timestamp if isinstance(wv.timestamp, Timestamp) else Timestamp.of(wv.timestamp)
        sink.append(
            {
                "key": key,
                "window": "GLOBAL" if is_global else [window.start.micros, window.end.micros],
                "values": sorted(v for v, _ in values),
                "timestamp": "END_OF_GLOBAL_WINDOW"
                if is_global and ts == global_max
                else ts.micros,
                "index": pi.index,
                "nonspeculative_index": pi.nonspeculative_index,
                "timing": _TIMING[pi.timing],
                "is_first": bool(pi.is_first),
                "is_last": bool(pi.is_last),
                "n_new": n_new,
            }
        )

    def fire_timers(sink):
        for key, state in states.items():
            while True:
                due, _ = state.get_timers(
                    clear=True, watermark=watermark, processing_time=processing_us / S
                )
                if not due:
                    break
                for window_id, (name, domain, ts, _tag) in due:
                    for wv in driver.process_timer(window_id, name, domain, ts, state, watermark):
                        record(key, wv, sink)

    steps = []
    for step in sc.steps:
        panes, dropped = [], 0
        if step.action == "bundle":
            by_key = defaultdict(list)
            for key, value, ts_us in step.elements:
                ts = Timestamp(micros=ts_us)
                windows = wfn.assign(WindowFn.AssignContext(ts, value))
                dropped += sum(1 for w in windows if watermark > w.end + lateness)
                by_key[key].append(WindowedValue((value, uid), ts, windows))
                uid += 1
            for key, bundle in by_key.items():
                state = states.setdefault(key, bt.InMemoryUnmergedState())
                for wv in driver.process_elements(state, bundle, watermark, watermark):
                    record(key, wv, panes)
        elif step.action == "watermark":
            new = Timestamp(micros=step.time)
            if new < watermark:
                raise ValueError(f"{sc.name}: watermark moves backwards")
            watermark = new
        elif step.action == "processing_time":
            new = step.time
            if new % S or new < processing_us:
                raise ValueError(f"{sc.name}: processing time must be whole seconds, monotone")
            clock.advance_time(Duration(micros=new - processing_us))
            processing_us = new
        else:
            raise ValueError(f"unknown step {step}")
        fire_timers(panes)
        panes.sort(
            key=lambda p: (p["key"], p["window"] if p["window"] != "GLOBAL" else [0, 0], p["index"])
        )
        steps.append({"step": step.inputs(), "panes": panes, "dropped": dropped})
    return steps


def main():
    out = []
    for sc in load_scenarios():
        out.append({"name": sc.name, "scenario": sc.beam_inputs(), "steps": run_scenario(sc)})
    doc = {
        "generated_by": "tests/conformance/beam_generate.py",
        "beam_version": apache_beam.__version__,
        "scenarios": out,
    }
    OUT.write_text(json.dumps(doc, sort_keys=True, indent=1) + "\n")
    n_panes = sum(len(s["panes"]) for sc in out for s in sc["steps"])
    print(f"wrote {OUT} ({len(out)} scenarios, {n_panes} Beam panes)", file=sys.stderr)


if __name__ == "__main__":
    main()
