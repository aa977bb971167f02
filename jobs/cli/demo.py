"""The demo: mobile ad views landing in a folder, processed by scheduled runs of conf/demo.toml.

    ./dev demo            (= python -m jobs.cli.demo [--dir demo-data] [--devices 40])

It generates a landing zone under ``--dir`` (default ``./demo-data``, wiped first): devices
watching ads in sessions, events arriving out of order and in files by arrival time, one device
that comes back online more than an hour later (its sessions get LATE panes), one that comes
back after the allowed lateness (its views land in the ``late`` table), and a few malformed lines
(the ``rejected`` table). Then it runs the pipeline after each landing round, as a scheduler
would, drains at the end, and prints what happened.

A second stage, conf/demo_hourly.toml, runs after the first each time: hourly totals per country
read from the sessions' pane log, retractions included (a merged or refined session withdraws
what it added), so its view equals the batch over the final sessions.

A third stage, conf/demo_ctr.toml, reads two inputs: the same ad views as impressions, and clicks
landing as CSV in a folder of their own (one delivered twice: a duplicate by its id), meeting by
ad in hourly windows: the click-through rate per ad and hour, verified against both inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

from jobs.config.load import load_pipeline
from jobs.config.pipeline import Pipeline
from jobs.driver.runs import run
from jobs.startup.quiet import quiet_spark_stderr
from jobs.startup.session import get_session

ROOT = Path(__file__).resolve().parents[2]
START = 1_717_228_800  # 2024-06-01T08:00:00Z (event time of the demo)
ROUND_S = 45 * 60  # each landing round brings ~45 minutes of event time
ROUNDS = 4
ADS = [f"ad-{i:02d}" for i in range(12)]
COUNTRIES = ("de", "es", "fr", "it")


def country_of(device: str) -> str:
    """A device's country (fixed per device)."""
    return COUNTRIES[sum(map(ord, device)) % len(COUNTRIES)]


def iso(t: float) -> str:
    whole = int(t)
    millis = int((t - whole) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


def views(rng: random.Random, devices: int):
    """[(arrival time, device, event time, ad, seconds)] for the whole demo."""
    out = []
    for d in range(devices):
        device = f"phone-{d:03d}"
        t = START + rng.uniform(0, 20 * 60)
        while t < START + ROUNDS * ROUND_S - 10 * 60:
            for _ in range(rng.randint(3, 12)):  # one session: an ad every 1-4 minutes
                delay = rng.uniform(0.5, 20)
                if rng.random() < 0.1:
                    delay += rng.uniform(60, 240)  # spotty network: minutes late
                out.append((t + delay, device, t, rng.choice(ADS), round(rng.uniform(2, 30), 1)))
                t += rng.uniform(60, 240)
            t += rng.uniform(35 * 60, 70 * 60)  # a pause closes the session
    # Back online 75 minutes later: its first two sessions arrive late but within the lateness.
    for i in range(8):
        t = START + 10 * 60 + i * 150
        out.append((START + 3 * ROUND_S - 5 * 60, "tablet-late", t, rng.choice(ADS), 12.0))
    # Offline since early morning, back online hours later, beyond the allowed lateness (2h):
    # these views are dropped, and recorded in the late table.
    for i in range(5):
        t = START - 2 * 3600 + i * 120
        out.append((START + ROUNDS * ROUND_S - 60, "tablet-offline", t, rng.choice(ADS), 9.0))
    return sorted(out)


MALFORMED = [
    '{"device_id": "phone-001", "ts": "2024-06-01T08:1',  # cut off mid-line
    '{"device_id": "phone-002", "ts": "yesterday", "seconds": 3}',
    '{"ad_id": "ad-01", "ts": "2024-06-01T08:30:00Z", "seconds": 4}',
]


def clicks(rng: random.Random, all_views) -> list[tuple[float, str, float, str, float]]:
    """[(arrival time, click id, event time, ad, cost)]: about one view in fifteen is clicked a
    few seconds after it was seen, the click arriving within minutes; the first click is
    delivered again in the last round (a duplicate by its id)."""
    out: list[tuple[float, str, float, str, float]] = []
    for arrival, _, t, ad, _ in all_views:
        if rng.random() < 1 / 15:
            at = t + rng.uniform(2, 40)
            cost = round(rng.uniform(0.05, 0.8), 2)
            out.append((max(arrival, at) + rng.uniform(1, 180), f"c{len(out):05d}", at, ad, cost))
    if out:
        first = out[0]
        out.append((START + ROUNDS * ROUND_S - 30, *first[1:]))
    return sorted(out)


def land_clicks(folder: Path, rnd: int, rows) -> int:
    """Write one round's clicks as one CSV file (ad_id, click_ts, click_id, cost)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{ad},{iso(t)},{cid},{cost}" for _, cid, t, ad, cost in rows]
    if lines:
        tmp = folder / f".clicks-r{rnd}.csv.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, folder / f"clicks-r{rnd}.csv")
    return len(lines)


def land(landing: Path, rnd: int, rows, rng: random.Random) -> int:
    """Write one round's views as a few files (arrival order, shuffled within a file)."""
    landing.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {"device_id": dev, "country": country_of(dev), "ad_id": ad, "ts": iso(t), "seconds": s}
        )
        for _, dev, t, ad, s in rows
    ]
    if rnd == 1:
        lines[len(lines) // 2 : len(lines) // 2] = MALFORMED
    n_files = 3
    size = -(-len(lines) // n_files) if lines else 0
    for i in range(n_files):
        chunk = lines[i * size : (i + 1) * size]
        if not chunk:
            continue
        rng.shuffle(chunk)  # out of order within a file, too
        tmp = landing / f".views-r{rnd}-{i}.jsonl.tmp"  # hidden while written
        tmp.write_text("\n".join(chunk) + "\n")
        os.replace(tmp, landing / f"views-r{rnd}-{i}.jsonl")
    return len(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="demo-data", help="work folder (wiped first)")
    ap.add_argument("--devices", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    work = Path(args.dir).absolute()
    shutil.rmtree(work, ignore_errors=True)
    pipeline = load_pipeline(
        ROOT / "conf" / "demo.toml",
        overrides={"lake": str(work / "lake"), "source": {"path": str(work / "landing")}},
    )
    # the second stage reads the first's pane log: loaded once it exists
    hourly: Pipeline | None = None
    ctr = load_pipeline(
        ROOT / "conf" / "demo_ctr.toml",
        overrides={
            "lake": str(work / "lake-ctr"),
            "inputs": {
                "impressions": {"path": str(work / "landing")},
                "clicks": {"path": str(work / "clicks")},
            },
        },
    )
    out = quiet_spark_stderr()

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    say(pipeline.describe())
    say(f"work folder: {work}")

    started = time.monotonic()
    spark = get_session("panestore-demo", shuffle_partitions=2)
    rng = random.Random(args.seed)
    all_views = views(rng, args.devices)
    all_clicks = clicks(rng, all_views)
    total = 0
    for rnd in range(ROUNDS):
        lo, hi = START + rnd * ROUND_S, START + (rnd + 1) * ROUND_S
        rows = [v for v in all_views if lo <= v[0] < hi or (rnd == ROUNDS - 1 and v[0] >= hi)]
        n = land(work / "landing", rnd, rows, rng)
        total += n
        say(
            f"\n== round {rnd + 1}: {n} lines landed (arrivals {iso(lo)[11:16]}-{iso(hi)[11:16]}"
            f" event time); scheduled run =="
        )
        run(pipeline, spark=spark, progress=out, fold=True)  # as `panestore run` does
        hourly = hourly or load_hourly(work)
        say(f"-- second stage: {hourly.name} --")
        run(hourly, spark=spark, progress=out, fold=True)
        last = rnd == ROUNDS - 1
        got = [c for c in all_clicks if lo <= c[0] < hi or (last and c[0] >= hi)]
        say(f"-- third stage: {ctr.name} ({land_clicks(work / 'clicks', rnd, got)} clicks) --")
        run(ctr, spark=spark, progress=out, fold=True)
    say("\n== final runs with --drain: the watermark goes to the end of time ==")
    assert hourly is not None  # loaded by the first round
    for stage in (pipeline, hourly, ctr):
        run(stage, spark=spark, drain=True, progress=out, fold=True)
    spark.stop()
    report(pipeline, say, total)
    check(pipeline, say)
    report_hourly(hourly, say)
    report_ctr(ctr, say)
    say(f"\ndemo finished in {time.monotonic() - started:.0f}s; tables under {work / 'lake'}")
    return 0


def load_hourly(work: Path) -> Pipeline:
    """The second stage, over the first stage's lake under ``work``."""
    return load_pipeline(
        ROOT / "conf" / "demo_hourly.toml",
        overrides={
            "lake": str(work / "lake-hourly"),
            "source": {"path": str(work / "lake"), "pipeline": "ad_views"},
        },
    )


def report(pipeline, say, total: int) -> None:
    from deltalake import DeltaTable

    panes = DeltaTable(pipeline.table_path("panes")).to_pandas()
    late = DeltaTable(pipeline.table_path("late")).to_pandas()
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pandas()
    say("\n== what happened ==")
    n_batches, n_devices = panes["batch_id"].nunique(), panes["device_id"].nunique()
    say(
        f"{total} input lines; pane log: {len(panes)} rows in {n_batches} batches, "
        f"{n_devices} devices"
    )
    kinds = (
        panes.assign(
            kind=panes["timing"] + panes["is_retraction"].map({True: " retraction", False: ""})
        )
        .groupby("kind")
        .size()
    )
    for kind, n in kinds.items():
        say(f"  {kind:<22} {n}")
    merged = panes[panes["supersedes"].map(len) > 0]
    say(f"  panes superseding merged sessions: {len(merged)}")
    devices = ", ".join(sorted(set(late["device_id"])))
    reason = late["reason"].iloc[0] if len(late) else ""
    say(f"late table: {len(late)} views dropped ({devices}): {reason}")
    say(f"rejected table: {len(rejected)} records")
    for _, r in rejected.iterrows():
        say(f"  {r['reason']}: {r['raw'][:60]}")
    show = panes[panes["device_id"] == "tablet-late"].sort_values(
        ["window_start_us", "batch_id", "pane_index", "is_retraction"],
        ascending=[True, True, True, False],
    )
    say("\npane history of tablet-late (came back online 75 minutes later):")
    say("  batch  session (UTC)   plays  watched  timing   retraction  watermark")
    for _, r in show.iterrows():
        wm = r["watermark_us"]
        wm_s = iso(wm / 1e6)[11:19] if wm < 10**17 else "end of time"
        say(
            f"  {r['batch_id']:>5}  {iso(r['window_start_us'] / 1e6)[11:16]}-"
            f"{iso(r['window_end_us'] / 1e6)[11:16]}     {r['plays']:>5}  {r['watched']:>7.1f}  "
            f"{r['timing']:<8} {'yes' if r['is_retraction'] else '':<11} {wm_s}"
        )


def report_hourly(hourly, say) -> None:
    """The second stage: what it read and wrote, its view, and its verification against the
    batch over the first stage's final sessions."""
    from deltalake import DeltaTable

    from jobs.config.sink_spec import view_spec
    from jobs.inspection.source_elements import load_source_elements, source_elements_are
    from sinks.presentation import connect
    from sinks.verification import verify

    panes = DeltaTable(hourly.table_path("panes")).to_pandas()
    late = DeltaTable(hourly.table_path("late")).to_pandas()
    say(f"\n== second stage: {hourly.name} (hourly totals per country over the sessions) ==")
    say(
        f"pane log: {len(panes)} rows, {int(panes['is_retraction'].sum())} retractions "
        f"(hours that lost or changed sessions); late table: {len(late)} rows"
    )
    spec = view_spec(hourly)
    con = connect(spec)
    try:
        rows = con.sql(
            "SELECT strftime(window_start, '%H:%M') AS hour, country, sessions, plays, "
            "round(watched) FROM current ORDER BY window_start, country"
        ).fetchall()
    finally:
        con.close()
    up = DeltaTable(hourly.source.upstream.pane_log).to_pandas()
    adds, withdrawals = up[~up["is_retraction"]], up[up["is_retraction"]]
    net_plays = adds["plays"].sum() - withdrawals["plays"].sum()
    say(
        f"read {len(up)} session panes: {len(adds)} add (weight +1), {len(withdrawals)} "
        f"withdraw (weight -1); without the withdrawals the totals would count {len(adds)} "
        f"sessions and {adds['plays'].sum()} plays, not {len(adds) - len(withdrawals)} and "
        f"{net_plays}"
    )
    say("  hour   country  sessions  plays  watched")
    for hour, country, sessions, plays, watched in rows:
        say(f"  {hour}  {country:<7}  {sessions:>8}  {plays:>5}  {watched:>7.0f}")
    report = verify(
        spec, elements=load_source_elements(hourly), elements_are=source_elements_are(hourly)
    )
    say("\n== panestore verify (second stage) ==")
    say(str(report))


def report_ctr(ctr, say) -> None:
    """The third stage: the click-through rate of the ads with the most clicks, the duplicate
    click rejected, and the view verified against both inputs' records."""
    from deltalake import DeltaTable

    from jobs.config.sink_spec import view_spec
    from jobs.inspection.source_elements import load_source_elements, source_elements_are
    from sinks.presentation import connect
    from sinks.verification import verify

    spec = view_spec(ctr)
    say(f"\n== third stage: {ctr.name} (impressions and clicks, two inputs, by ad and hour) ==")
    con = connect(spec)
    try:
        totals = con.sql(
            "SELECT sum(impressions), sum(clicks), round(sum(cost), 2) FROM current"
        ).fetchone()
        say(f"  {totals[0]} impressions, {totals[1]} clicks, cost {totals[2]}")
        say("  hour   ad     impressions  clicks  ctr    cost")
        top = con.sql(
            "SELECT strftime(window_start, '%H:%M'), ad_id, impressions, clicks, "
            "round(clicks / impressions, 3), round(cost, 2) FROM current "
            "WHERE impressions > 0 ORDER BY clicks DESC, window_start, ad_id LIMIT 5"
        ).fetchall()
        for hour, ad, shown, clicked, rate, cost in top:
            say(f"  {hour}  {ad}  {shown:>11}  {clicked:>6}  {rate:<5}  {cost}")
    finally:
        con.close()
    rejected = DeltaTable(ctr.table_path("rejected")).to_pandas()
    duplicates = rejected[rejected["reason"].str.startswith("DUPLICATE")]
    say(f"rejected: {len(rejected)} records, {len(duplicates)} of them a click delivered again")
    report = verify(spec, elements=load_source_elements(ctr), elements_are=source_elements_are(ctr))
    say("\n== panestore verify (third stage) ==")
    say(str(report))


def check(pipeline, say) -> None:
    """The current view through DuckDB, and `panestore verify`."""
    from jobs.config.sink_spec import view_spec
    from jobs.inspection.source_elements import load_source_elements
    from sinks.presentation import connect
    from sinks.verification import verify

    spec = view_spec(pipeline)
    say("\n== the current view (DuckDB over the Delta table `current`) ==")
    con = connect(spec)
    try:
        totals = con.sql(
            "SELECT count(*) AS sessions, sum(plays) AS plays, round(sum(watched)) AS watched "
            "FROM current"
        ).fetchone()
        say(f"  {totals[0]} sessions, {totals[1]} plays, {totals[2]:.0f} seconds watched")
        top = con.sql(
            "SELECT device_id, count(*) AS sessions, sum(plays) AS plays FROM current "
            "GROUP BY device_id ORDER BY plays DESC, device_id LIMIT 3"
        ).fetchall()
        for device, sessions, plays in top:
            say(f"  {device:<14} {sessions:>3} sessions {plays:>4} plays")
    finally:
        con.close()
    report = verify(spec, elements=load_source_elements(pipeline))
    say("\n== panestore verify ==")
    say(str(report))


if __name__ == "__main__":
    sys.exit(main())
