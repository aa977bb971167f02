"""The scenario format: one data-only description of a semantic transcript, for every engine.

A scenario is a table of a TOML file in this directory (``[[scenario]]``)::

    [[scenario]]
    name = "after_count_fires_once"          # unique over all files
    about = "what the scenario pins"          # optional, one or two sentences
    window = "FixedWindows(10us)"             # panestore's window-function text form
    trigger = "AfterCount(2)"                 # panestore's trigger text form
    accumulation = "DISCARDING"               # | ACCUMULATING | ACCUMULATING_AND_RETRACTING
    allowed_lateness = "100us"                # a duration (panes.parse_duration)
    timestamp_combiner = "END_OF_WINDOW"      # | EARLIEST | LATEST
    on_time_behavior = "FIRE_ALWAYS"          # | FIRE_IF_NON_EMPTY
    closing_behavior = "FIRE_IF_NON_EMPTY"    # | FIRE_ALWAYS
    combiner = "to_list()"                    # panestore's aggregate text form (one column)
    steps = [
      {bundle = [1]},
      {bundle = [2], panes = ["k [0,10) [1,2] @9 EARLY 0/-1 last"]},
      {bundle = [3], dropped = ["k 3 @3 closed [0,10)"]},
      {watermark = 20},
      {processing_time = 5_000_000},
    ]

Every field but ``name``, ``window`` and ``steps`` is optional; the defaults are
:data:`DEFAULTS` (those of ``panes.Windowing``, and ``to_list()``). Times are integer
microseconds (TOML allows ``1_000_000``); the simulator starts with the watermark at the
beginning of time and processing time 0.

Each step is exactly one action, with what the engine emits in that step:

* ``bundle``: one bundle of elements; an element is ``t`` (key ``"k"``, value ``t``, event
  time ``t``), ``[key, t]`` (value ``t``) or ``[key, value, t]``. Triggers are evaluated once
  per window after the whole bundle.
* ``watermark``: the watermark moves forward to this time.
* ``processing_time``: processing time moves forward to this time.
* ``panes``: the panes the step emits, in the order the simulator emits them (the Beam and
  Spark runners compare them in any order), each written by :func:`pane_text`:
  ``key [start,end) value @timestamp TIMING index/nonspeculative_index``, then ``last`` for a
  final pane and ``supersedes [s,e),...`` for a merged window's replacement panes; ``-`` before
  the window marks a retraction; the global window is ``GLOBAL`` and its end
  ``END_OF_GLOBAL_WINDOW``; list values are shown sorted; numbers with ``_`` separators.
* ``dropped``: the elements the step drops, in the simulator's order, each written by
  :func:`dropped_text`: ``key value @timestamp reason [start,end)`` (reason ``expired``,
  ``closed`` or ``no window``; the window when there is one).

Beam conformance scenarios (``beam_conformance.toml``) may declare ``beam_differences``: the
numbered differences from Beam Python (``tests/conformance/test_beam_conformance.py``) that
really show in the scenario, each with a one-line reason.

This module imports nothing but the standard library: the Beam generator reads it under its own
virtual environment. The runners: ``tests/scenarios/on_simulator.py`` (``panes.Simulator``),
``tests/conformance/beam_generate.py`` (Apache Beam) and ``tests/scenarios/on_spark.py`` (the
Spark job).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DATA_DIR = Path(__file__).resolve().parent
BEAM_FILE = DATA_DIR / "beam_conformance.toml"

DEFAULT_KEY = "k"
ACTIONS = ("bundle", "watermark", "processing_time")
DEFAULTS: Mapping[str, Any] = {
    "trigger": "DefaultTrigger()",
    "accumulation": "DISCARDING",
    "allowed_lateness": "0s",
    "timestamp_combiner": "END_OF_WINDOW",
    "on_time_behavior": "FIRE_ALWAYS",
    "closing_behavior": "FIRE_IF_NON_EMPTY",
    "combiner": "to_list()",
    "about": "",
    "origin": None,
    "beam_differences": {},
}
REQUIRED = ("name", "window", "steps")
GLOBAL = "GLOBAL"
END_OF_GLOBAL_WINDOW = "END_OF_GLOBAL_WINDOW"
# Fields that decide what Beam emits: echoed into beam_expected.json to tell when it is stale.
BEAM_FIELDS = ("window", "trigger", "accumulation", "timestamp_combiner", "allowed_lateness")

Element = tuple[str, Any, int]
"""(key, value, event time in µs)."""


@dataclass(frozen=True)
class Step:
    """One action (``bundle``, ``watermark`` or ``processing_time``) and what it emits."""

    action: str
    elements: tuple[Element, ...] = ()
    time: int | None = None
    panes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    def inputs(self) -> dict[str, Any]:
        """The action alone, as data (what a runner needs; what Beam's output echoes)."""
        if self.action == "bundle":
            return {"bundle": [list(e) for e in self.elements]}
        return {self.action: self.time}


@dataclass(frozen=True)
class Scenario:
    """One transcript: the windowing in text forms, and its steps. See the module doc."""

    name: str
    window: str
    steps: tuple[Step, ...]
    trigger: str
    accumulation: str
    allowed_lateness: str
    timestamp_combiner: str
    on_time_behavior: str
    closing_behavior: str
    combiner: str
    about: str
    origin: str | None
    beam_differences: Mapping[int, str]

    def beam_inputs(self) -> dict[str, Any]:
        """What decides Beam's output: the Beam fields and every step's action."""
        echo: dict[str, Any] = {f: getattr(self, f) for f in BEAM_FIELDS}
        echo["steps"] = [s.inputs() for s in self.steps]
        return echo

    @property
    def uses_processing_time(self) -> bool:
        return "ProcessingTime" in self.trigger or any(
            s.action == "processing_time" for s in self.steps
        )


def element(item: Any) -> Element:
    """``t``, ``[key, t]`` or ``[key, value, t]`` -> ``(key, value, t)``."""
    if isinstance(item, int):
        return (DEFAULT_KEY, item, item)
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return (str(item[0]), item[1], int(item[1]))
    if isinstance(item, (list, tuple)) and len(item) == 3:
        return (str(item[0]), item[1], int(item[2]))
    raise ValueError(f"not an element: {item!r} (expected t, [key, t] or [key, value, t])")


def step(table: Mapping[str, Any]) -> Step:
    actions = [a for a in ACTIONS if a in table]
    unknown = set(table) - {*ACTIONS, "panes", "dropped"}
    if len(actions) != 1 or unknown:
        raise ValueError(f"a step is exactly one of {ACTIONS} with panes/dropped: {dict(table)}")
    (action,) = actions
    panes = tuple(table.get("panes", ()))
    dropped = tuple(table.get("dropped", ()))
    for text in panes:
        parse_pane(text)
    for text in dropped:
        dropped_reason(text)
    if action == "bundle":
        return Step(action, tuple(element(e) for e in table[action]), None, panes, dropped)
    return Step(action, (), int(table[action]), panes, dropped)


def scenario(table: Mapping[str, Any]) -> Scenario:
    missing = [f for f in REQUIRED if f not in table]
    unknown = set(table) - {*REQUIRED, *DEFAULTS}
    if missing or unknown:
        raise ValueError(f"scenario {table.get('name')!r}: missing {missing}, unknown {unknown}")
    fields = {**DEFAULTS, **table}
    fields["steps"] = tuple(step(s) for s in table["steps"])
    fields["beam_differences"] = {int(k): v for k, v in fields["beam_differences"].items()}
    return Scenario(**fields)


def load(path: Path) -> list[Scenario]:
    """The scenarios of one TOML file, in file order."""
    with path.open("rb") as f:
        return [scenario(t) for t in tomllib.load(f)["scenario"]]


def load_all(paths: Iterable[Path] | None = None) -> dict[str, Scenario]:
    """Every scenario of ``paths`` (default: every ``*.toml`` here) by name; names are unique."""
    found: dict[str, Scenario] = {}
    for path in sorted(DATA_DIR.glob("*.toml")) if paths is None else paths:
        for sc in load(path):
            if sc.name in found:
                raise ValueError(f"scenario name {sc.name!r} used twice ({path.name})")
            found[sc.name] = sc
    return found


# -- the text of panes and dropped elements -----------------------------------------------------


def _number(n: Any) -> str:
    return f"{n:_}" if isinstance(n, int) and not isinstance(n, bool) else str(n)


def value_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_number(v) for v in sorted(value)) + "]"
    return _number(value)


def window_text(window: tuple[int, int] | None) -> str:
    """``[start,end)``; ``None`` is the global window."""
    return GLOBAL if window is None else f"[{_number(window[0])},{_number(window[1])})"


def pane_text(
    key: str,
    window: tuple[int, int] | None,
    value: Any,
    timestamp: int | None,
    timing: str,
    index: int,
    nonspeculative_index: int,
    *,
    is_last: bool,
    is_retraction: bool = False,
    supersedes: Sequence[tuple[int, int]] = (),
) -> str:
    """A pane as scenarios write it (see the module doc); ``window=None`` is the global window,
    ``timestamp=None`` its end."""
    stamp = END_OF_GLOBAL_WINDOW if timestamp is None else _number(timestamp)
    text = (
        f"{key} {'-' if is_retraction else ''}{window_text(window)} {value_text(value)} "
        f"@{stamp} {timing} {index}/{nonspeculative_index}"
    )
    if is_last:
        text += " last"
    if supersedes and not is_retraction:
        text += " supersedes " + ",".join(window_text(w) for w in supersedes)
    return text


def dropped_text(key: str, value: Any, timestamp: int, reason: str, window: str | None) -> str:
    """A dropped element as scenarios write it; ``reason`` is cut at its first ``:``, ``window``
    is the text of the element's window (:func:`window_text`), if it has one."""
    text = f"{key} {value_text(value)} @{_number(timestamp)} {reason.split(':')[0]}"
    return text if window is None else f"{text} {window}"


_DROPPED = re.compile(
    r"(?P<key>\S+) (?P<value>\S+) @(?P<timestamp>-?[\d_]+) (?P<reason>expired|closed|no window)"
    r"(?: (?P<window>\S+))?"
)


def dropped_reason(text: str) -> str:
    """The reason of a dropped element's text (``expired``, ``closed``, ``no window``); raises
    on bad text."""
    m = _DROPPED.fullmatch(text)
    if m is None:
        raise ValueError(f"not a dropped element: {text!r} (see tests/scenarios/format.py)")
    return m["reason"]


_PANE = re.compile(
    r"(?P<key>\S+) (?P<retraction>-?)(?:\[(?P<start>-?[\d_]+),(?P<end>-?[\d_]+)\)|GLOBAL) "
    r"(?P<value>\S+) @(?P<timestamp>-?[\d_]+|END_OF_GLOBAL_WINDOW) (?P<timing>EARLY|ON_TIME|LATE) "
    r"(?P<index>\d+)/(?P<nonspeculative_index>-?\d+)(?P<last> last)?(?: supersedes (?P<sup>\S+))?"
)


def parse_pane(text: str) -> dict[str, Any]:
    """The fields of a pane's text (window ``None`` for the global window); raises on bad text."""
    m = _PANE.fullmatch(text)
    if m is None:
        raise ValueError(f"not a pane: {text!r} (see tests/scenarios/format.py)")
    start, end = m["start"], m["end"]
    return {
        "key": m["key"],
        "window": None if start is None else (int(start), int(end)),
        "value": m["value"],
        "timestamp": m["timestamp"],
        "timing": m["timing"],
        "index": int(m["index"]),
        "nonspeculative_index": int(m["nonspeculative_index"]),
        "is_last": m["last"] is not None,
        "is_retraction": m["retraction"] == "-",
        "supersedes": m["sup"] or "",
    }


def without_supersedes(text: str) -> str:
    """A pane's text without what it supersedes (an engine that does not report it)."""
    return text.split(" supersedes ")[0]
