"""Test lakes: random simulator runs written to a pane log through ``sinks.lake.pane_log``."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterProcessingTime,
    AfterWatermark,
    FixedWindows,
    GlobalWindows,
    Repeatedly,
    Sessions,
    Simulator,
    SlidingWindows,
    Windowing,
    combiners,
)
from panes.fold import batch, fold
from panes.pane import Pane
from sinks.fold.materializer import Materializer
from sinks.lake.pane_log import PaneLog, PaneLogLayout
from sinks.lake.records import LateLog
from sinks.lake.spec import ViewSpec
from sinks.lake.tables import open_view, plain_table, table_identity

S = 1_000_000
MODES = list(AccumulationMode)


def window_fns():
    return [FixedWindows(10 * S), SlidingWindows(20 * S, 10 * S), Sessions(10 * S), GlobalWindows()]


@dataclass
class Run:
    spec: ViewSpec
    layout: PaneLogLayout
    windowing: Windowing
    steps: list[list[Pane]]  # panes of each simulator step
    elements: list[tuple[Any, Any, int]]
    dropped: list
    panes: list[Pane] = field(default_factory=list)
    live: set[tuple] = field(default_factory=set)  # (key tuple, (start, end)) the engine holds
    sim: Simulator | None = None

    def expected(self) -> dict:
        return view_of_fold(self.spec, fold(self.panes, self.spec.mode, self.spec.combine_fn))

    def expected_batch(self) -> dict:
        b = batch(self.elements, self.windowing.window_fn, self.spec.combine_fn, self.dropped)
        return view_of_fold(self.spec, b)


def view_of_fold(spec: ViewSpec, folded: dict) -> dict:
    return {(spec.key_of(k), (w.start, w.end)): spec.values_of(v) for (k, w), v in folded.items()}


def view_dict(spec: ViewSpec, table: pa.Table | None = None, version: int | None = None) -> dict:
    if table is None:
        table = open_view(spec, version=version).to_pyarrow_table()
    out = {}
    for r in table.to_pylist():
        at = (tuple(r[k] for k in spec.keys), (r["window_start_us"], r["window_end_us"]))
        assert at not in out, f"duplicate view row {at}"
        out[at] = {n: r[n] for n in spec.value_names}
    return out


def random_run(
    seed: int,
    lake: str,
    mode: AccumulationMode | None = None,
    window_fn=None,
    multi: bool | None = None,
    name: str = "p",
    aggregates: dict[str, tuple[Any, pa.DataType]] | None = None,
    drain: bool = True,
    key_values: str = "abc",
    per_step: int = 6,
) -> Run:
    """A random simulator run. ``aggregates``: {column: (combiner, Arrow type)} instead of the
    default sum (or, ``multi``, count/sum/min/max). ``drain``: end with the watermark at the end
    of time (every window closed); else the run stops where its last step left it. ``key_values``:
    the keys the elements are drawn from (one character each); ``per_step``: the most elements a
    step adds."""
    rng = random.Random(seed)
    mode = mode or rng.choice(MODES)
    window_fn = window_fn or rng.choice(window_fns())
    multi = rng.random() < 0.5 if multi is None else multi
    if isinstance(window_fn, GlobalWindows):
        trigger = Repeatedly(AfterCount(rng.randint(1, 3)))
    else:
        trigger = rng.choice(
            [
                AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
                AfterWatermark(early=AfterProcessingTime(5 * S), late=AfterCount(1)),
                Repeatedly(AfterCount(rng.randint(1, 3))),
            ]
        )
    windowing = Windowing(
        window_fn,
        trigger=trigger,
        accumulation_mode=mode,
        allowed_lateness=rng.choice([0, 10 * S, 60 * S]),
    )
    if aggregates is not None:
        combine_fn = combiners.aggregates(**{n: fn for n, (fn, _) in aggregates.items()})
        aggs = tuple(combine_fn.fns.items())
        layout = PaneLogLayout(
            key_fields=(("user", pa.string()),),
            value_fields=tuple((n, t) for n, (_, t) in aggregates.items()),
            combine_fn=None if combine_fn.value_is_accumulator else combine_fn,
        )
        keys = ("user",)
    elif multi:
        combine_fn = combiners.aggregates(
            n=combiners.count(), s=combiners.sum(), lo=combiners.min(), hi=combiners.max()
        )
        aggs = tuple(combine_fn.fns.items())
        layout = PaneLogLayout(
            key_fields=(("user", pa.string()),),
            value_fields=tuple((n, pa.int64()) for n, _ in aggs),
        )
        keys = ("user",)
    else:
        combine_fn = combiners.sum()
        aggs = (("value", combine_fn),)
        layout = PaneLogLayout(value_fields=(("value", pa.int64()),))
        keys = ("key",)
    spec = ViewSpec(
        name,
        lake,
        keys,
        aggs,
        window_fn,
        mode,
        combine_fn=combine_fn,
        rules=windowing.rules,
    )
    sim = Simulator(windowing, combine_fn)
    steps: list[list[Pane]] = []
    elements = []
    wm, pt = 0, 0
    for _ in range(rng.randint(4, 12)):
        pt += rng.randint(1, 8) * S
        fired = sim.advance(processing_time=pt)
        bundle = []
        for _ in range(rng.randint(0, per_step)):
            ts = max(0, wm + rng.randint(-30, 40) * S)
            el = (rng.choice(key_values), rng.randint(-5, 20), ts)
            bundle.append(el)
        elements += bundle
        fired += sim.add_elements(bundle)
        if rng.random() < 0.6:
            wm += rng.randint(0, 25) * S
            fired += sim.advance_watermark(wm)
        steps.append(fired)
    if drain:
        steps.append(sim.advance_watermark(END_OF_TIME))
    live = {(spec.key_of(k), (w.start, w.end)) for k, st in sim.states.items() for w in st.windows}
    dropped, panes = list(sim.dropped), list(sim.panes)
    return Run(spec, layout, windowing, steps, elements, dropped, panes, live=live, sim=sim)


def write_batches(run: Run, batches: list[list[Pane]], start: int = 0) -> PaneLog:
    identity = table_identity(run.spec, "panes", "pane log")
    log = PaneLog(run.spec.table_path("panes"), run.spec.name, run.layout, **identity)
    for i, panes in enumerate(batches):
        log.append(start + i, panes)
    return log


def chunked(run: Run, rng: random.Random, shuffle: bool = False) -> list[list[Pane]]:
    """The run's panes as pane-log batches: consecutive steps grouped, or (``shuffle``) cut
    into random chunks committed in a random order."""
    if not shuffle:
        out, cur = [], []
        for step in run.steps:
            cur += step
            if rng.random() < 0.5:
                out.append(cur)
                cur = []
        out.append(cur)
        return out
    panes = list(run.panes)
    cuts = (
        sorted(rng.sample(range(1, max(2, len(panes))), min(len(panes) - 1, rng.randint(1, 6))))
        if len(panes) > 1
        else []
    )
    chunks = [panes[a:b] for a, b in zip([0, *cuts], [*cuts, len(panes)], strict=True)]
    rng.shuffle(chunks)
    return chunks


def materialized_lake(tmp_path: Any, seed: int = 1, **kw: Any) -> Run:
    """A random run written to a lake under ``tmp_path`` (a folder, or a bucket's URI: pane log,
    late table), materialized."""
    run = random_run(seed, str(tmp_path), **kw)
    write_lake(run, chunked(run, random.Random(seed)), run.dropped)
    return run


def write_lake(run: Run, batches: list[list[Pane]], dropped: list, start: int = 0) -> None:
    """``batches`` appended to the run's pane log from batch ``start`` on, ``dropped`` to its
    late table (as batch ``start``), then the view folded."""
    write_batches(run, batches, start)
    late = LateLog(
        run.spec.table_path("late"),
        run.spec.name,
        run.layout,
        storage_options=run.spec.storage_options,
    )
    late.append(start, dropped)
    Materializer(run.spec).run()


def scripted_run(
    lake: str, windowing: Windowing, script: list, sim: Simulator | None = None
) -> Run:
    """A simulator run of ``script`` over keys ``key`` and sums: each item a bundle (a list of
    ``(key, value, timestamp)``) or a watermark to advance to; one step (pane-log batch) each.
    ``sim``: go on with that simulator (its panes and drops so far are left out)."""
    sum_ = combiners.sum()
    sim = sim or Simulator(windowing, sum_)
    spec = ViewSpec(
        "p",
        lake,
        ("key",),
        (("value", sum_),),
        windowing.window_fn,
        windowing.accumulation_mode,
        combine_fn=sum_,
        rules=windowing.rules,
    )
    layout = PaneLogLayout(value_fields=(("value", pa.int64()),))
    dropped_before = len(sim.dropped)
    steps, elements = [], []
    for item in script:
        if isinstance(item, list):
            elements += item
            steps.append(sim.add_elements(item))
        else:
            steps.append(sim.advance_watermark(item))
    live = {(spec.key_of(k), (w.start, w.end)) for k, st in sim.states.items() for w in st.windows}
    panes = [p for step in steps for p in step]
    dropped = sim.dropped[dropped_before:]
    return Run(spec, layout, windowing, steps, elements, dropped, panes, live=live, sim=sim)


def view_rows(spec: ViewSpec, version: int | None = None) -> dict:
    """The whole rows of the view (every column), by (key tuple, (start, end))."""
    table = plain_table(open_view(spec, version=version).to_pyarrow_table())
    return {
        (tuple(r[k] for k in spec.keys), (r["window_start_us"], r["window_end_us"])): r
        for r in table.to_pylist()
    }


def replay_changes(spec: ViewSpec, changes: list[dict], start: dict | None = None) -> dict:
    """``start`` (view rows by (key, window); default: the empty view) with ``changes`` (rows of
    the change feed, in order) applied, checking each row against the state it changes: an
    insert of a new window, a delete or pre-image of exactly the row held, a post-image right
    after its pre-image."""
    rows = dict(start or {})
    pre = None
    for c in changes:
        row = {n: v for n, v in c.items() if not n.startswith("_")}
        at = (tuple(row[k] for k in spec.keys), (row["window_start_us"], row["window_end_us"]))
        kind = c["_change_type"]
        if kind == "insert":
            assert at not in rows, f"insert of a window already in the view: {at}"
            rows[at] = row
        elif kind in ("delete", "update_preimage"):
            assert rows.get(at) == row, f"{kind} of {at} does not match the row held"
            if kind == "delete":
                del rows[at]
            else:
                pre = (at, c["_commit_version"])
        elif kind == "update_postimage":
            assert pre == (at, c["_commit_version"]), f"post-image of {at} without its pre-image"
            rows[at] = row
            pre = None
        else:
            raise AssertionError(f"unknown change type {kind!r}")
    assert pre is None, "a pre-image without its post-image"
    return rows


def assert_same_changes_and_past(spec: ViewSpec, local: ViewSpec) -> None:
    """A lake in a store (``spec``) and a local lake built the same way answer alike: the
    change feed from version 0 (but its commit times) and the view as of version 1 and as of
    the fold of pane-log version 1."""
    import json

    from sinks.presentation import duck

    text, read = duck.changes(spec, 0, fmt="json")
    local_text, local_read = duck.changes(local, 0, fmt="json")
    assert read.line() == local_read.line() and read.table.num_rows > 0
    timeless = [
        [{k: v for k, v in json.loads(r).items() if k != "_commit_timestamp"} for r in t]
        for t in (text.splitlines(), local_text.splitlines())
    ]
    assert timeless[0] == timeless[1]
    for as_of in (1, "folded:1"):
        assert view_dict(spec, duck.current_as_of(spec, as_of)) == view_dict(
            local, duck.current_as_of(local, as_of)
        )
