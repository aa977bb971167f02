"""``watermark.policy = "writer_noted"`` through the job: writers' marks move the watermark.

Two writers land JSON-lines files in one landing directory: ``a`` is up to date, ``b`` lags a few
minutes behind (a gateway that forwards late). Each notes its progress after landing
(:class:`jobs.driver.watermark_marks.LandingWriter`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.driver.watermark_marks import LandingWriter
from tests.spark.support import T0, iso, norm_pane, replay

pytestmark = pytest.mark.spark

S = 1_000_000
CONF = """\
name = "noted"
lake = "{lake}"
keys = ["device_id"]
event_time = "ts"
window = "FixedWindows(1m)"
state_buckets = 4

[source]
path = "{landing}"
max_files_per_trigger = 1
schema = {{ device_id = "string", ts = "timestamp", seconds = "double" }}

[watermark]
{watermark}

[aggregates]
plays = "count()"
"""
NOTED = 'policy = "writer_noted"\nidle_timeout = "{idle}"'
HEURISTIC = 'policy = "bounded_out_of_orderness"\ndelay = "10s"'


def views(device: str, seconds: range) -> list[str]:
    return [json.dumps({"device_id": device, "ts": iso(s), "seconds": 1.0}) for s in seconds]


class Landing:
    """The landing directory, its writers and a clock for the files' modification times (Spark
    reads files in that order)."""

    def __init__(self, root, watermark: str) -> None:
        self.root = root
        self.path = root / "landing"
        self.path.mkdir(parents=True)
        self.writers: dict[str, LandingWriter] = {}
        self.noted_at = lambda: None  # the writers' clock (None: the wall clock)
        self.mtime = time.time() - 1000
        self.conf = root / "p.toml"
        self.conf.write_text(
            CONF.format(lake=root / "lake", landing=self.path, watermark=watermark)
        )

    def land(self, writer: str, name: str, lines: list[str]) -> None:
        w = self.writers.setdefault(writer, LandingWriter(self.path, writer))
        path = w.land(name, lines)
        self.mtime += 1
        os.utime(path, (self.mtime, self.mtime))

    def note(self, writer: str, seconds: int) -> None:
        self.writers[writer].note(T0 * S + seconds * S, noted_at_us=self.noted_at())

    def pipeline(self):
        from jobs.config.load import load_pipeline

        return load_pipeline(self.conf)


def late_and_panes(pipeline):
    from deltalake import DeltaTable

    late = DeltaTable(pipeline.table_path("late")).to_pyarrow_table().to_pylist()
    panes = DeltaTable(pipeline.table_path("panes")).to_pyarrow_table().to_pylist()
    return late, panes


def at(seconds: int) -> str:
    """A watermark as a batch report shows it (milliseconds)."""
    return iso(seconds)[:-4] + "Z"


def watermarks(result) -> list[str | None]:
    return [b.watermark for b in result.batches]


def moved_to(result) -> str | None:
    """The watermark after a run's last batch (which fired at it)."""
    return result.batches[-1].watermark_after


def land_two_writers(landing: Landing, part: int) -> None:
    """Part 0: a at 0-5 min, b (lagging) at 0-2.5 min; part 1: a at 5-10, b at 2.5-5 min."""
    a, b = (
        (range(0, 300, 10), range(0, 150, 10))
        if part == 0
        else (range(300, 600, 10), range(150, 300, 10))
    )
    landing.land("a", f"a{part}.jsonl", views("d1", a) + views("d2", a))
    landing.note("a", a.stop)
    landing.land("b", f"b{part}.jsonl", views("d3", b))
    landing.note("b", b.stop)


def test_honest_writers_lose_nothing_where_the_heuristic_drops_the_laggard(spark, tmp_path):
    from jobs.driver.runs import run

    heuristic = Landing(tmp_path / "heuristic", HEURISTIC)
    land_two_writers(heuristic, 0)
    land_two_writers(heuristic, 1)
    run(heuristic.pipeline(), spark=spark, progress=None)  # one file per batch: a's come first
    late, _ = late_and_panes(heuristic.pipeline())
    assert late and {r["device_id"] for r in late} == {"d3"}, "b's views were late"

    noted = Landing(tmp_path / "noted", NOTED.format(idle="1h"))
    pipeline = noted.pipeline()
    results = []
    for part in (0, 1):
        land_two_writers(noted, part)
        results.append(run(pipeline, spark=spark, progress=None))
    late, panes = late_and_panes(pipeline)
    assert late == [], "with the writers' marks nothing is late"
    run0, run1 = results
    # the data batches of a run do not move the watermark; the writers' control row does:
    # min(a at 5 min, b at 2.5 min) after the first run, min(10 min, 5 min) after the second
    assert watermarks(run0) == [None, None, None] and moved_to(run0) == at(150)
    assert watermarks(run1) == [at(150)] * 3 and moved_to(run1) == at(300)
    # every view before the watermark (5 min) is in an on-time pane, counted once
    on_time = sum(p["plays"] for p in panes if p["timing"] == "ON_TIME")
    assert on_time == 2 * 30 + 15 + 15 and max(p["window_end_us"] for p in panes) == (T0 + 300) * S
    assert {p["timing"] for p in panes} == {"ON_TIME"}


def test_an_idle_writer_stops_holding_and_its_late_return_is_recorded(spark, tmp_path, monkeypatch):
    import jobs.driver.writers_watermark
    from jobs.driver.runs import run

    landing = Landing(tmp_path, NOTED.format(idle="5m"))
    clock = [time.time_ns() // 1000]  # the job's processing time, and the writers' clock
    monkeypatch.setattr(jobs.driver.writers_watermark, "now_us", lambda: clock[0])
    landing.noted_at = lambda: clock[0]
    pipeline = landing.pipeline()
    land_two_writers(landing, 0)
    first = run(pipeline, spark=spark, progress=None)
    assert moved_to(first) == at(150)  # b holds it at 2.5 min

    clock[0] += 5 * 60 * S + 1  # b falls silent for more than idle_timeout
    landing.land("a", "a1.jsonl", views("d1", range(300, 600, 10)))
    landing.note("a", 600)
    second = run(pipeline, spark=spark, progress=None)
    assert watermarks(second) == [at(150), at(150)]
    assert moved_to(second) == at(600), "b no longer holds it"

    # b comes back with views of 2.5-5 min: behind the watermark, their windows closed
    landing.land("b", "b1.jsonl", views("d3", range(150, 300, 10)))
    landing.note("b", 300)
    third = run(pipeline, spark=spark, progress=None)
    late, panes = late_and_panes(pipeline)
    assert sorted(r["timestamp_us"] for r in late) == [(T0 + s) * S for s in range(150, 300, 10)]
    assert {r["device_id"] for r in late} == {"d3"}
    assert {r["watermark_us"] for r in late} == {(T0 + 600) * S}
    assert third.total("late") == 15
    assert watermarks(third) == [at(600)], "never moves back"
    assert not any(
        p["device_id"] == "d3" and p["window_start_us"] >= (T0 + 150) * S for p in panes
    ), "nothing of b's return was merged into a pane"


def parse(text: str):
    """A view line as the simulator's element (key, value, event time µs)."""
    from jobs.driver.watermark_marks import parse_time

    r = json.loads(text)
    return r["device_id"], {}, parse_time(r["ts"])


def test_a_replayed_batch_runs_at_the_watermark_it_was_planned_with(spark, tmp_path):
    from jobs.checkpoint.logs import last_batch
    from jobs.driver.plan import layout
    from jobs.driver.runs import run
    from sinks.lake.pane_log import pane_record

    landing = Landing(tmp_path, NOTED.format(idle="1h"))
    pipeline = landing.pipeline()
    land_two_writers(landing, 0)
    run(pipeline, spark=spark, progress=None)  # watermark: 2.5 min
    land_two_writers(landing, 1)
    batch = last_batch(pipeline.checkpoint_path) + 1
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.cli.commands",
            "run",
            str(landing.conf),
            "--no-materialize",
            "--kill-at",
            f"before_commit:{batch}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    planned = (Path(pipeline.checkpoint_path) / "offsets" / str(batch)).read_text()
    assert json.loads(planned.splitlines()[1])["batchWatermarkMs"] == (T0 + 150) * 1000
    landing.note("a", 700)  # the writers move on: a watermark computed now would be 6:40
    landing.note("b", 400)
    rerun = run(pipeline, spark=spark, progress=None)
    assert rerun.batches[0].batch_id == batch and rerun.batches[0].watermark == at(150)
    assert watermarks(rerun) == [at(150)] * 3 and moved_to(rerun) == at(400)
    # the pane log is exactly the simulator's over the batches Spark recorded (their files and
    # watermarks): the killed batch once, at the watermark it was planned with
    expected = [
        dict(pane_record(p, layout(pipeline)), batch_id=b)
        for b, ps, _ in replay(pipeline, parse)
        for p in ps
    ]
    late, panes = late_and_panes(pipeline)
    cols = set(expected[0])
    assert sorted(norm_pane(r, cols) for r in panes) == sorted(norm_pane(r, cols) for r in expected)
    assert len({p["pane_id"] for p in panes}) == len(panes) and late == []


def test_a_file_no_mark_names_is_read_back_for_its_earliest_event_time(spark, tmp_path):
    from jobs.config.aggregates import Aggregate
    from jobs.config.pipeline import Pipeline
    from jobs.config.source import Source
    from jobs.driver.writers_watermark import earliest_event_times
    from panes import FixedWindows
    from panes.combiners import count

    def pipeline(fmt: str, **src) -> Pipeline:
        return Pipeline(
            name="p",
            lake=str(tmp_path / "lake"),
            keys=("k",),
            event_time="ts",
            window=FixedWindows(60_000_000),
            aggregates=(Aggregate("n", count()),),
            source=Source(
                str(tmp_path / fmt), (("k", "string"), ("ts", "timestamp")), format=fmt, **src
            ),
        )

    lines = [
        '{"k": "x", "ts": "' + iso(90) + '"}',
        "not json",
        '{"k": "x", "ts": "never"}',
        '{"k": "x", "ts": 5}',
        '{"k": "y", "ts": "' + iso(30) + '"}',
    ]
    LandingWriter(tmp_path / "jsonl", "w").land("sub/f.jsonl", lines)
    LandingWriter(tmp_path / "jsonl", "w").land("none.jsonl", ["not json"])
    got = earliest_event_times(spark, pipeline("jsonl"), ["sub/f.jsonl", "none.jsonl", "gone"])
    assert got == {"sub/f.jsonl": (T0 + 30) * S, "none.jsonl": None, "gone": None}
    LandingWriter(tmp_path / "csv", "w").land("f.csv", ["k,ts", f"x,{iso(70)}", f"y,{iso(40)}"])
    got = earliest_event_times(spark, pipeline("csv", csv_header=True), ["f.csv"])
    assert got == {"f.csv": (T0 + 40) * S}
