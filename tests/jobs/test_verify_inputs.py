"""``panestore verify`` over a pipeline of several inputs (#50): the batch check's elements read
from every input (:func:`jobs.inspection.source_elements.load_source_elements`), each with its own
event-time column and duplicates, named in ``input``, null in the columns it lacks; the batch
over them equal to the per-window answers computed here in plain Python from the records
written (JSON lines with JSON lines, with a Delta table, with a pane log's final windows)."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from jobs.config.aggregates import Aggregate  # noqa: E402
from jobs.config.inputs import Input  # noqa: E402
from jobs.config.pipeline import Pipeline  # noqa: E402
from jobs.config.sink_spec import view_spec  # noqa: E402
from jobs.config.source import Source  # noqa: E402
from jobs.config.watermark import Watermark  # noqa: E402
from jobs.inspection.source_elements import (  # noqa: E402
    load_source_elements,
    source_elements_are,
)
from panes import FixedWindows, parse_aggregate  # noqa: E402
from sinks.lake import LakeError  # noqa: E402
from sinks.verification.batch_check import batch_view, duplicates_left_out  # noqa: E402

HOUR = 3_600_000_000
T0 = 1_767_225_600_000_000  # 2026-01-01 00:00 UTC, µs
AGGREGATES = {
    "impressions": "count() filter (input = 'impressions')",
    "clicks": "count() filter (input = 'clicks')",
    "cost": "sum(cost)",
    "elements": "count()",
}
IMPRESSIONS = (("campaign", "string"), ("ts", "timestamp"), ("id", "string"))
CLICKS = (("campaign", "string"), ("click_ts", "long"), ("id", "string"), ("cost", "double"))


def pipeline(tmp_path: Path, clicks: Source, *, dedup: bool = True) -> Pipeline:
    """Impressions (ISO event times) and clicks (epoch seconds, its own event-time column, a
    cost) meeting by campaign in hourly windows; each input deduplicated by its own ``id``."""
    impressions = Input(
        "impressions",
        Source(str(tmp_path / "imp"), IMPRESSIONS, create_path=True),
        event_time="ts",
        watermark=Watermark(delay="1m"),
        dedup=("id",) if dedup else (),
    )
    clicks_input = Input("clicks", clicks, event_time="click_ts", dedup=("id",) if dedup else ())
    return Pipeline.with_inputs(
        (impressions, clicks_input),
        ("campaign",),
        name="ctr",
        lake=str(tmp_path / "lake"),
        window=FixedWindows(HOUR),
        aggregates=tuple(Aggregate(n, parse_aggregate(t)) for n, t in AGGREGATES.items()),
    )


def records(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Impressions and clicks over three campaigns and four hours, with copies: an exact copy, a
    copy of a later event time (in another hour: the earlier one counts), and ids that the two
    inputs share (no copies of each other: an id is its input's). Times in µs (``t``)."""
    rnd = random.Random(seed)
    campaigns = ["a", "b", "c"]

    def some(n: int, prefix: str) -> list[dict[str, Any]]:
        out = []
        for i in range(n):
            t = T0 + rnd.randrange(4 * HOUR // 1_000_000) * 1_000_000  # whole seconds
            out.append({"campaign": rnd.choice(campaigns), "t": t, "id": f"{prefix}{i}"})
        return out

    imps = some(60, "x")
    clicks = some(30, "x")  # the same ids as impressions x0..x29: not copies of them
    for c in clicks:
        c["cost"] = rnd.randrange(1, 40) * 0.25  # exact in a double: sums in any order agree
    clicks[3]["cost"] = None  # a click without a cost: counted, not summed
    for rows in (imps, clicks):
        rows.append(dict(rows[0]))  # an exact copy
        rows.append({**rows[1], "t": rows[1]["t"] + 2 * HOUR})  # a later copy: the first counts
        rnd.shuffle(rows)
    return imps, clicks


def expected(imps: list[dict], clicks: list[dict], dedup: bool = True) -> dict:
    """The per-window answers, from the records alone: per input, the earliest copy of each
    (campaign, id) when deduplicated; counts per input, the clicks' cost summed (0 where a
    window has no cost: nulls are skipped, and a sum of none is 0, docs/aggregates.md)."""

    def kept(rows: list[dict]) -> list[dict]:
        if not dedup:
            return rows
        first: dict[tuple, dict] = {}
        for r in sorted(rows, key=lambda r: r["t"]):
            first.setdefault((r["campaign"], r["id"]), r)
        return list(first.values())

    out: dict[tuple, dict[str, Any]] = defaultdict(
        lambda: {"impressions": 0, "clicks": 0, "cost": 0.0, "elements": 0}
    )
    for name, rows in (("impressions", imps), ("clicks", clicks)):
        for r in kept(rows):
            start = r["t"] - (r["t"] - T0) % HOUR
            w = out[(r["campaign"],), (start, start + HOUR)]
            w[name] += 1
            w["elements"] += 1
            if r.get("cost") is not None:
                w["cost"] += r["cost"]
    return dict(out)


def iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_impressions(tmp_path: Path, imps: list[dict]) -> None:
    half = len(imps) // 2
    for name, part in (("1.jsonl", imps[:half]), ("2.jsonl", imps[half:])):
        write_jsonl(
            tmp_path / "imp" / name,
            [{"campaign": r["campaign"], "ts": iso(r["t"]), "id": r["id"]} for r in part],
        )


def click_lines(clicks: list[dict]) -> list[dict]:
    return [
        {
            "campaign": r["campaign"],
            "click_ts": r["t"] // 1_000_000,
            "id": r["id"],
            "cost": r["cost"],
        }
        for r in clicks
    ]


def jsonl_clicks(tmp_path: Path) -> Source:
    return Source(str(tmp_path / "clk"), CLICKS, epoch_unit="s", create_path=True)


def batch(p: Pipeline) -> dict:
    view, _ = batch_view(view_spec(p), load_source_elements(p))
    return view


@pytest.mark.heavy
@pytest.mark.parametrize("seed", [1, 2])
def test_two_jsonl_inputs_batch_equals_the_records_counted_by_hand(tmp_path, seed):
    imps, clicks = records(seed)
    write_impressions(tmp_path, imps)
    lines = click_lines(clicks)
    lines.append({"click_ts": lines[0]["click_ts"], "id": "y", "cost": 1.0})  # no key: rejected
    lines.append({"campaign": "a", "click_ts": "soon", "id": "z", "cost": 1.0})  # no time
    write_jsonl(tmp_path / "clk" / "1.jsonl", lines)
    p = pipeline(tmp_path, jsonl_clicks(tmp_path))
    elements = load_source_elements(p)
    # each element its own input's event time, its input's name; cost null in impressions
    by_input = defaultdict(list)
    for r in elements.to_pylist():
        by_input[r["input"]].append(r)
    assert sorted(r["ts_us"] for r in by_input["impressions"]) == sorted(r["t"] for r in imps)
    assert sorted(r["ts_us"] for r in by_input["clicks"]) == sorted(r["t"] for r in clicks)
    assert all(r["cost"] is None for r in by_input["impressions"])
    assert elements.schema.field("cost").type == pa.float64()
    # two copies per input left out, none across inputs (their ids x0..x29 are shared)
    assert duplicates_left_out(view_spec(p), elements, None) == 4
    assert batch(p) == expected(imps, clicks)


@pytest.mark.heavy
def test_without_dedup_every_copy_counts(tmp_path):
    imps, clicks = records(3)
    write_impressions(tmp_path, imps)
    write_jsonl(tmp_path / "clk" / "1.jsonl", click_lines(clicks))
    p = pipeline(tmp_path, jsonl_clicks(tmp_path), dedup=False)
    elements = load_source_elements(p)
    assert elements.num_rows == len(imps) + len(clicks)
    assert duplicates_left_out(view_spec(p), elements, None) is None
    assert batch(p) == expected(imps, clicks, dedup=False)
    assert batch(p) != expected(imps, clicks)  # (the copies make a difference)


@pytest.mark.heavy
def test_jsonl_and_a_delta_table_batch_equals_the_records_counted_by_hand(tmp_path):
    from deltalake import write_deltalake

    imps, clicks = records(4)
    write_impressions(tmp_path, imps)
    table = tmp_path / "clicks_table"
    schema = pa.schema(
        [("campaign", pa.string()), ("click_ts", pa.int64()), ("id", pa.string()),
         ("cost", pa.float64())]
    )  # fmt: skip
    half = len(clicks) // 2
    for part in (clicks[:half], clicks[half:]):  # two commits: both are read
        write_deltalake(str(table), pa.Table.from_pylist(click_lines(part), schema), mode="append")
    source = Source(str(table), CLICKS, format="delta", epoch_unit="s")
    p = pipeline(tmp_path, source)
    elements = load_source_elements(p)
    assert sorted(elements.column("input").to_pylist()) == sorted(
        ["clicks"] * len(clicks) + ["impressions"] * len(imps)
    )
    assert batch(p) == expected(imps, clicks)
    assert source_elements_are(p) == (
        "the inputs' records (impressions: accepted raw events; clicks: accepted raw events)"
    )


@pytest.mark.heavy
def test_a_dataframe_inputs_events_are_given_by_name(tmp_path):
    """A DataFrame input's records are given to the batch check by the input's name (a batch
    DataFrame's ``toArrow()``); the other inputs' are read from their sources. Without them, or
    given as one table for all, or under a name that is no input's: refused in one line."""
    imps, clicks = records(5)
    write_impressions(tmp_path, imps)
    p = pipeline(tmp_path, Source("", CLICKS, format="dataframe", epoch_unit="s"))
    schema = pa.schema(
        [("campaign", pa.string()), ("click_ts", pa.int64()), ("id", pa.string()),
         ("cost", pa.float64())]
    )  # fmt: skip
    given = pa.Table.from_pylist(click_lines(clicks), schema)
    view, _ = batch_view(view_spec(p), load_source_elements(p, {"clicks": given}))
    assert view == expected(imps, clicks)
    refusals = [
        (None, "input 'clicks' is a DataFrame: give the batch check a batch DataFrame of its "
         "events (jobs.api.verify(pipeline, events={'clicks': ...}))"),
        (given, "the pipeline reads several inputs (impressions, clicks): give the batch check "
         "each input's events by name (events={name: table}), not one table"),
        ({"clicks": given, "views": given},
         "events of no input 'views': the inputs are ['impressions', 'clicks']"),
    ]  # fmt: skip
    for events, message in refusals:
        with pytest.raises(LakeError) as e:
            load_source_elements(p, events)
        assert str(e.value) == message


@pytest.mark.heavy
def test_a_pane_log_and_jsonl_batch_equals_the_upstreams_last_panes_and_the_records(tmp_path):
    """A pane-log input's elements are its upstream's final windows (each its last pane's value
    and output timestamp); beside them a JSON-lines input of the same columns."""
    from jobs.config.source import Upstream
    from jobs.reading.pane_log.upstream import pane_log_columns
    from panes import AccumulationMode
    from sinks.fold.materializer import Materializer
    from tests.sinks.lakes import S, chunked, random_run, write_batches

    run = random_run(
        7,
        str(tmp_path / "up"),
        AccumulationMode.ACCUMULATING,
        FixedWindows(10 * S),
        False,
        per_step=12,
    )
    write_batches(run, chunked(run, random.Random(7)))
    Materializer(run.spec).run()
    log = run.spec.table_path("panes")
    columns = (("key", "string"), ("value", "long"))
    totals = Input(
        "totals",
        Source(log, columns, format="pane_log", upstream=Upstream(log, pane_log_columns(log))),
    )
    rnd = random.Random(8)
    events = [
        {"key": rnd.choice("abcd"), "ms": rnd.randrange(200_000), "value": rnd.randrange(-3, 9)}
        for _ in range(40)
    ]
    write_jsonl(tmp_path / "ev" / "1.jsonl", events)
    events_input = Input(
        "events",
        Source(str(tmp_path / "ev"), (*columns, ("ms", "long"))),
        event_time="ms",
    )
    aggregates = {
        "total": "sum(value)",
        "windows": "count() filter (input = 'totals')",
        "events": "count() filter (input = 'events')",
    }
    p = Pipeline.with_inputs(
        (totals, events_input),
        ("key",),
        name="down",
        lake=str(tmp_path / "down"),
        window=FixedWindows(30 * S),
        aggregates=tuple(Aggregate(n, parse_aggregate(t)) for n, t in aggregates.items()),
    )
    last = {}  # the upstream's final windows: each (key, window)'s last pane
    for pane in run.panes:
        last[pane.key, pane.window] = pane
    want: dict[tuple, dict[str, Any]] = defaultdict(lambda: {"total": 0, "windows": 0, "events": 0})
    rows = [("windows", pn.key, pn.value, pn.timestamp) for pn in last.values()]
    rows += [("events", e["key"], e["value"], e["ms"] * 1000) for e in events]
    for name, key, value, ts in rows:
        start = ts - ts % (30 * S)
        w = want[(key,), (start, start + 30 * S)]
        w["total"] += value
        w[name] += 1
    assert len(last) > 8
    assert batch(p) == dict(want)
    assert any(w["windows"] and w["events"] for w in want.values())  # the inputs meet
    assert source_elements_are(p) == (
        "the inputs' records (totals: the final windows of p (its current view); "
        "events: accepted raw events)"
    )


def simulated_lake(p: Pipeline, imps: list[dict], clicks: list[dict]) -> None:
    """``p``'s lake as a run over the records leaves it (without Spark): the model's simulator
    over each input's records, a copy of an id given once (the earliest: what the job keeps),
    drained; its panes appended to the pane log and folded into the view."""
    from jobs.driver.plan import layout
    from panes import END_OF_TIME, Inputs, Simulator, combiners
    from sinks.fold.materializer import Materializer
    from sinks.lake.pane_log import PaneLog
    from sinks.lake.tables import table_identity

    aggregates = {n: parse_aggregate(t) for n, t in AGGREGATES.items()}
    sim = Simulator(
        p.windowing(), combiners.aggregates(**aggregates), inputs=Inputs(["impressions", "clicks"])
    )
    for name, rows in (("impressions", imps), ("clicks", clicks)):
        first: dict[tuple, dict] = {}
        for r in sorted(rows, key=lambda r: r["t"]):
            first.setdefault((r["campaign"], r["id"]), r)
        values = [{"cost": r.get("cost")} for r in first.values()]  # null in impressions
        sim.add_elements(
            [(r["campaign"], v, r["t"]) for r, v in zip(first.values(), values, strict=True)],
            input=name,
        )
    for name in ("impressions", "clicks"):
        sim.advance_watermark(END_OF_TIME, input=name)
    spec = view_spec(p)
    identity = table_identity(spec, "panes", "pane log")
    PaneLog(spec.table_path("panes"), spec.name, layout(p), **identity).append(0, sim.panes)
    Materializer(spec).run()


@pytest.mark.heavy
def test_verify_compares_the_view_with_the_batch_over_both_inputs(tmp_path, capsys):
    """``panestore verify``'s comparison: a view that is the model's run over the records passes;
    a view that lost one click (a run that dropped it silently) is a difference."""
    from jobs import api
    from jobs.cli.commands import main

    imps, clicks = records(6)
    write_impressions(tmp_path, imps)
    write_jsonl(tmp_path / "clk" / "1.jsonl", click_lines(clicks))
    p = pipeline(tmp_path, jsonl_clicks(tmp_path))
    simulated_lake(p, imps, clicks)
    report = api.verify(p)
    assert report.ok, str(report)
    assert "view = batch over the inputs' records" in str(report)
    assert main(["verify", str(api.save(p, tmp_path / "ctr.toml"))]) == 0
    assert "view = batch over the inputs' records" in capsys.readouterr().out

    lost = replace(p, lake=str(tmp_path / "lost"))
    kept = [c for c in clicks if c["id"] != "x7"]
    assert len(kept) == len(clicks) - 1
    simulated_lake(lost, imps, kept)
    report = api.verify(lost)
    assert not report.ok
    batch_line = next(x for x in str(report).splitlines() if x.startswith("view = batch over"))
    assert "1 DIFFERENCES" in batch_line  # the window of click x7, and only it
    assert main(["verify", str(api.save(lost, tmp_path / "lost.toml"))]) == 1
    assert batch_line in capsys.readouterr().out


@pytest.mark.heavy
def test_an_input_that_has_delivered_nothing_yet_has_no_elements(tmp_path):
    """Clicks not landed yet: the impressions are checked alone; a landing directory that is
    not there is refused as for one input."""
    imps, _ = records(9)
    write_impressions(tmp_path, imps)
    p = pipeline(tmp_path, jsonl_clicks(tmp_path))
    (tmp_path / "clk").mkdir()
    assert set(load_source_elements(p).column("input").to_pylist()) == {"impressions"}
    assert batch(p) == expected(imps, [])
    (tmp_path / "clk").rmdir()
    with pytest.raises(LakeError) as e:
        load_source_elements(p)
    assert str(e.value) == f"landing zone {tmp_path / 'clk'} not found"


def test_a_late_element_is_taken_out_of_its_own_inputs_elements(tmp_path):
    """An impression and a click of one campaign at one time, the click late (the late table's
    row names its input in its value): the batch leaves out the click, not the impression."""
    t = T0 + 5_000_000
    write_jsonl(tmp_path / "imp" / "1.jsonl", [{"campaign": "a", "ts": iso(t), "id": "i"}])
    click = {"campaign": "a", "click_ts": t // 1_000_000, "id": "c", "cost": 2.0}
    write_jsonl(tmp_path / "clk" / "1.jsonl", [click])
    p = pipeline(tmp_path, jsonl_clicks(tmp_path))
    spec = view_spec(p)
    value = {"cost": 2.0, "input": "clicks", **{c.flag: True for c in p.conditions}}
    late = pa.Table.from_pylist(
        [
            {
                "campaign": "a",
                "timestamp_us": t,
                "window_start_us": T0,
                "window_end_us": T0 + HOUR,
                "value_json": json.dumps(value),
                "reason": "late",
            }
        ]
    )
    view, _ = batch_view(spec, load_source_elements(p), late)
    assert view == {
        (("a",), (T0, T0 + HOUR)): {"impressions": 1, "clicks": 0, "cost": 0.0, "elements": 1}
    }


def test_one_inputs_events_are_one_table_not_by_name(tmp_path):
    one = Pipeline(
        name="one",
        source=Source(str(tmp_path / "imp"), IMPRESSIONS),
        lake=str(tmp_path / "lake"),
        keys=("campaign",),
        aggregates=(Aggregate("n", parse_aggregate("count()")),),
        window=FixedWindows(HOUR),
        event_time="ts",
    )
    given = pa.table({"campaign": ["a"], "ts": pa.array([T0], pa.timestamp("us", "UTC"))})
    assert load_source_elements(one, given).column("ts_us").to_pylist() == [T0]
    with pytest.raises(LakeError) as e:
        load_source_elements(one, {"source": given})
    assert str(e.value) == (
        "pipeline one reads one input: give its events as one table, not by input name"
    )


@pytest.mark.heavy
def test_history_shows_each_windows_records_by_input(tmp_path, capsys):
    """``panestore history --elements``: after a key's panes, each of its windows' input records
    by input (read as verify reads them), their counts those of the records written (copies
    included: they are records)."""
    from jobs import api
    from jobs.cli.commands import main

    imps, clicks = records(6)
    write_impressions(tmp_path, imps)
    write_jsonl(tmp_path / "clk" / "1.jsonl", click_lines(clicks))
    p = pipeline(tmp_path, jsonl_clicks(tmp_path))
    simulated_lake(p, imps, clicks)
    conf = api.save(p, tmp_path / "ctr.toml")
    assert main(["history", str(conf), "--key", "a", "--elements"]) == 0
    out = capsys.readouterr().out
    said = {}
    for line in out.split("\n\n")[-1].splitlines()[2:]:
        if line.startswith("["):
            window, rest = line.split(")", 1)
            name, count = rest.split()[:2]
            said[(window + ")", name)] = int(count)
    want: dict = {}
    for name, rows in (("impressions", imps), ("clicks", clicks)):
        for r in rows:
            if r["campaign"] == "a":
                start = T0 + (r["t"] - T0) // HOUR * HOUR
                window = f"[{_text(start)}, {_text(start + HOUR)})"
                want[(window, name)] = want.get((window, name), 0) + 1
    # the windows of the key's panes (a window only a duplicate reached has none)
    windows = {w for w, _ in said}
    assert len(windows) >= 3
    assert said == {k: n for k, n in want.items() if k[0] in windows}


def _text(us: int) -> str:
    from sinks.presentation.duck import _us_text

    return _us_text(us)
