"""``panestore report`` and ``panestore plot --skew`` over a lake written with the sinks API (no
Spark): the demo pipeline after two rounds (not drained: windows still open), and runs recorded
with :func:`sinks.lake.run_history.append_run`."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import BatchSink
from jobs.inspection.status import LakeStatus
from panes import Simulator
from sinks.fold.materializer import Materializer
from sinks.lake.run_history import FAILED, SUCCEEDED, RunRecord, append_run
from sinks.presentation.report import open_windows, render_report
from tests.jobs.test_changes_cli import demo_conf
from tests.report_dom import read_page

MIN = 60_000_000
T0 = 1_780_000_000_000_000  # processing time of the first run (2026)
ERROR = "ValueError: <b>boom</b> & the batch 7 of 'x'"


@dataclass
class OpenLake:
    conf: str
    spec: object
    sim: Simulator


def open_lake(tmp_path: Path, rounds=None) -> OpenLake:
    """The demo configuration on a lake under ``tmp_path`` after ``rounds`` (default: two; d1's
    sessions merge in the second, d2 gets a late play); the watermark stays far from the end of
    time, so the sessions are still open (2 h of allowed lateness)."""
    conf = demo_conf(tmp_path)
    pipeline = load_pipeline(conf)
    spec = view_spec(pipeline)
    sink = BatchSink(pipeline)
    sink.create_tables()
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())
    rounds = rounds or [
        ([("d1", 0), ("d1", 40 * MIN), ("d2", 5 * MIN)], 40 * MIN),
        ([("d1", 20 * MIN), ("d2", 5 * MIN), ("d2", 6 * MIN)], 80 * MIN),
    ]
    for batch, (plays, watermark) in enumerate(rounds):
        panes = sim.add_elements([((d, "DE"), {"seconds": 10.0}, t) for d, t in plays])
        panes += sim.advance_watermark(watermark)
        sink.pane_log.append(batch, panes)
    Materializer(spec).run()
    return OpenLake(str(conf), spec, sim)


def record_runs(spec, outcomes=(SUCCEEDED, SUCCEEDED, FAILED)) -> list[RunRecord]:
    """One run an hour, each a minute long, the watermark after run ``i`` at ``60 + 10 i``
    minutes of event time (the demo's elements are of 1970: the lake replays old data, and its
    sessions stay open); the last one failed with :data:`ERROR`."""
    runs = []
    for i, outcome in enumerate(outcomes):
        start = T0 + i * 60 * MIN
        runs.append(
            RunRecord(
                run_id=f"run-{i}",
                pipeline="ad_views",
                started_us=start,
                ended_us=start + MIN,
                outcome=outcome,
                error=ERROR if outcome == FAILED else None,
                batches=2,
                records=10 * (i + 1),
                panes=3,
                early=1,
                on_time=2,
                late=i,
                rejected=1 if i == 1 else 0,
                watermark_before_us=(50 + 10 * i) * MIN if i else None,
                watermark_after_us=(60 + 10 * i) * MIN,
            )
        )
        assert append_run(spec, runs[-1])
    return runs


@pytest.mark.heavy
def test_open_windows_are_the_engines_live_windows_that_fired(tmp_path):
    lake = open_lake(tmp_path)
    fired: dict[tuple, int] = {}
    for p in lake.sim.panes:
        if not p.is_retraction:
            at = (p.key, p.window)
            fired[at] = fired.get(at, 0) + 1
    live = {
        (key, w)
        for key, state in lake.sim.states.items()
        for w in state.windows
        if (key, w) in fired
    }
    found = open_windows(lake.spec, limit=100)
    got = {(w.key, (w.window_start_us, w.window_end_us)) for w in found}
    # d1's first session was merged into a larger one: superseded, not open
    assert got == {(k, (w.start, w.end)) for k, w in live} and len(got) == 2
    assert [w.panes for w in found] == sorted((fired[at] for at in live), reverse=True)
    assert [w.panes for w in open_windows(lake.spec, limit=1)] == [max(w.panes for w in found)]


@pytest.mark.heavy
def test_windows_the_engine_let_go_are_not_open(tmp_path):
    """Sessions whose lateness ran out have no last pane (they expired without firing again)
    but are not open; one opened later is. The watermark that let them go is in the runs table
    (no pane was emitted at it)."""
    rounds = [
        ([("d1", 0), ("d2", 5 * MIN)], 40 * MIN),
        ([("d3", 300 * MIN)] * 5, 240 * MIN),  # five plays: an early pane
    ]
    lake = open_lake(tmp_path, rounds)
    assert {w.key for w in open_windows(lake.spec)} == {("d1", "DE"), ("d2", "DE"), ("d3", "DE")}
    run = RunRecord(
        run_id="r", pipeline="ad_views", started_us=T0, ended_us=T0 + MIN, outcome=SUCCEEDED,
        watermark_after_us=240 * MIN,
    )  # fmt: skip
    append_run(lake.spec, run)
    assert [w.key for w in open_windows(lake.spec)] == [("d3", "DE")]
    assert {w.key for w in open_windows(lake.spec, watermark_us=40 * MIN)} == {
        ("d1", "DE"), ("d2", "DE"), ("d3", "DE")
    }  # fmt: skip


@pytest.mark.heavy
def test_the_report_shows_status_runs_pictures_and_open_windows(tmp_path, capsys):
    lake = open_lake(tmp_path)
    record_runs(lake.spec)
    out = tmp_path / "report"
    assert main(["report", lake.conf, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "index.html")
    text = (out / "index.html").read_text()
    page = read_page(text)
    assert page.text["state"] == "failed"  # the last run failed
    assert page.text["last-run-outcome"] == "failed"
    assert page.text["last-run-error"] == ERROR  # shown as it was, escaped in the markup
    assert "<b>boom" not in text and "&lt;b&gt;boom&lt;/b&gt; &amp; the batch" in text
    assert page.text["run-count"] == "3"
    assert page.rows["runs"] == 1 + 3  # the header and a row per run
    assert page.rows["open-windows-table"] == 1 + 2
    assert "d1" in page.text["open-windows"] and "d2" in page.text["open-windows"]
    for name in ("skew-plot", "panes-plot", "dropped-plot"):
        src = page.images[name]["src"]
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        assert int(page.images[name]["width"]) > 500
    # the status as `panestore status` reads it, every field of it
    status = load_status(lake.conf)
    # (the last run in its own block, its outcome and error above its other fields)
    assert set(LakeStatus.__dataclass_fields__) - {"last_run"} <= set(page.fields)
    assert status.last_run is not None and status.last_run.run_id in page.text["last-run-fields"]
    assert page.fields["pipeline"] == status.pipeline == "ad_views"
    assert "version" in page.fields and "files" in page.fields  # the tables, nested
    # nothing from a network: no script, no link, every image inline
    assert "script" not in page.tags and "link" not in page.tags
    assert "http://" not in text and "https://" not in text and "url(" not in text


def load_status(conf: str) -> LakeStatus:
    from jobs.inspection.status import lake_status

    return lake_status(load_pipeline(conf))


def test_the_report_of_a_lake_never_run(tmp_path, capsys):
    conf = demo_conf(tmp_path)
    assert main(["report", str(conf), "--out", str(tmp_path / "r")]) == 0
    page = read_page((tmp_path / "r" / "index.html").read_text())
    assert page.text["state"] == "never run"
    assert page.text["run-count"] == "0" and "no runs recorded yet" in page.text["last-run"]
    assert not page.images and "no open windows" in page.text["open-windows"]


@dataclass(frozen=True)
class _Figures:
    windows: int
    oldest: str | None


@dataclass(frozen=True)
class _Run:
    run_id: str
    outcome: str
    error: str | None


@dataclass(frozen=True)
class _LaterStatus:
    """A status with fields the report's code does not name: they are shown all the same."""

    state: str
    state_figures: _Figures
    recent: dict[str, str]
    last_run: _Run | None


def test_the_status_is_rendered_from_its_fields(tmp_path):
    lake = open_lake(tmp_path)
    status = _LaterStatus("lagging", _Figures(7, None), {"outcome": "<x>"}, None)
    text = render_report(lake.spec, [], status)
    page = read_page(text)
    assert page.text["state"] == "lagging"
    assert page.fields["windows"] == "7" and page.fields["oldest"] == "—"
    assert page.fields["outcome"] == "<x>" and "&lt;x&gt;" in text
    assert "no runs recorded yet" in page.text["last-run"]


@pytest.mark.heavy
def test_the_last_run_is_the_statuss_when_it_has_one(tmp_path):
    """The status knows a run killed since the runs table's last row (from the run's note)."""
    lake = open_lake(tmp_path)
    runs = record_runs(lake.spec, (SUCCEEDED,))
    status = _LaterStatus("failed", _Figures(0, None), {}, _Run("k1", "killed", "<killed>"))
    page = read_page(render_report(lake.spec, runs, status))
    assert page.text["last-run-outcome"] == "killed"
    assert page.text["last-run-error"] == "<killed>" and "k1" in page.text["last-run-fields"]
    page = read_page(render_report(lake.spec, runs, None))
    assert page.text["last-run-outcome"] == "succeeded" and "last-run-error" not in page.text


@pytest.mark.heavy
def test_the_runs_table_lists_the_last_runs_newest_first(tmp_path):
    lake = open_lake(tmp_path)
    runs = record_runs(lake.spec, (SUCCEEDED,) * 5)
    page = read_page(render_report(lake.spec, runs, None, last=2))
    assert page.text["run-count"] == "5" and page.rows["runs"] == 1 + 2
    assert page.text["runs"].index("run-4") < page.text["runs"].index("run-3")
    assert "run-2" not in page.text["runs"]


@pytest.mark.heavy
def test_plot_skew_writes_the_picture_of_the_lakes_runs(tmp_path, capsys):
    lake = open_lake(tmp_path)
    record_runs(lake.spec)
    out = tmp_path / "skew.png"
    assert main(["plot", lake.conf, "--skew", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.heavy
def test_the_report_names_the_largest_windows_of_the_operators_state(tmp_path, monkeypatch):
    """When the lake has state (a run committed a batch), its largest open windows are the
    state's as status reads them: by the elements they hold, windows that never fired
    included."""
    from jobs.executor.state_summary import OpenWindow, StateSummary
    from jobs.inspection import state_summary

    lake = open_lake(tmp_path)
    largest = (OpenWindow("<d9>,DE", 0, 30 * MIN, 41, 0), OpenWindow("d1,DE", 0, 70 * MIN, 3, 2))
    summary = StateSummary(7, 2, 2, 3, 1, 0, largest[1], largest)
    monkeypatch.setattr(state_summary, "summarize_state", lambda pipeline: summary)
    assert main(["report", lake.conf, "--out", str(tmp_path / "r")]) == 0
    text = (tmp_path / "r" / "index.html").read_text()
    page = read_page(text)
    assert page.rows["open-windows-table"] == 1 + 2
    shown = page.text["open-windows-table"]
    assert shown.index("<d9>,DE") < shown.index("d1,DE") and "&lt;d9&gt;" in text
    assert "41" in shown and "1970-01-01T00:30:00.000Z" in shown  # elements, the window's end
    assert "From the operator's state" in page.text["open-windows"]
    # without state (no committed batch), the pane log's: d1's merged session and d2's
    monkeypatch.setattr(state_summary, "summarize_state", lambda pipeline: None)
    assert main(["report", lake.conf, "--out", str(tmp_path / "r2")]) == 0
    page = read_page((tmp_path / "r2" / "index.html").read_text())
    assert page.rows["open-windows-table"] == 1 + 2
    assert "d2" in page.text["open-windows-table"] and "<d9>" not in page.text["open-windows"]
