"""Another materializer holds the lake's materializer lock: ``panestore materialize`` exits 3
(busy, as a run of a busy lake does) and writes nothing; ``panestore run``, whose batches are
committed, says which, that the fold was skipped and who holds the lock, and exits 0. No Spark:
the run's Spark session and query are stood in for, its batch is appended with the sinks API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import EXIT_BUSY, main
from jobs.config.load import load_pipeline
from jobs.driver.batch_sink import BatchSink, BatchStats
from panes import Simulator
from sinks.lake.tables import open_pane_log, open_view
from tests.jobs.test_changes_cli import MIN, demo_lake

ROOT = Path(__file__).resolve().parents[2]
HOLD = """\
import sys
from jobs.config.load import load_pipeline
from jobs.config.sink_spec import view_spec
from sinks.lake.lock import materializer_lock
with materializer_lock(view_spec(load_pipeline(sys.argv[1]))):
    print("held", flush=True)
    sys.stdin.read()
"""


def hold_materializer_lock(conf: str) -> subprocess.Popen:
    """Another process holding the lake's materializer lock until its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, conf],
        cwd=ROOT,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


def append_batch(conf: str, batch_id: int) -> None:
    """Commit a batch of d3's plays to the pane log, as a run's batch does."""
    pipeline = load_pipeline(conf)
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())
    panes = sim.add_elements([(("d3", "DE"), {"seconds": 5.0}, 200 * MIN)] * 5)
    assert panes
    BatchSink(pipeline).pane_log.append(batch_id, panes)


@pytest.mark.heavy
def test_materialize_while_another_materializer_runs_exits_busy(tmp_path, capsys):
    conf, spec = demo_lake(tmp_path)
    append_batch(conf, 3)
    view_version = open_view(spec).version()
    holder = hold_materializer_lock(conf)
    try:
        capsys.readouterr()
        assert main(["materialize", conf]) == EXIT_BUSY == 3
        err = capsys.readouterr().err
    finally:
        release(holder)
    assert err.count("\n") == 1 and f"another materializer is running (pid {holder.pid}" in err
    assert open_view(spec).version() == view_version
    assert main(["materialize", conf]) == 0
    assert open_view(spec).version() == view_version + 1


@pytest.mark.heavy
def test_a_run_whose_fold_finds_the_materializer_busy_says_what_it_committed(
    tmp_path, capsys, monkeypatch
):
    import jobs.driver.runs
    from jobs.driver.runs import BatchReport, RunResult, fold_view

    conf, spec = demo_lake(tmp_path)
    pane_log_version = open_pane_log(spec).version()
    view_version = open_view(spec).version()

    def run(pipeline, **kw) -> RunResult:  # batches 3 and 4 commit; 4 has no panes
        append_batch(conf, 3)
        result = RunResult(
            [
                BatchReport(3, 5, None, BatchStats(3, panes=1, committed=True)),
                BatchReport(4, 0, None, BatchStats(4, committed=True)),
            ]
        )
        assert kw["fold"], "the run folds as its last step"
        fold_view(pipeline, result, lambda line: print(line, file=sys.stderr))
        return result

    monkeypatch.setattr(jobs.driver.runs, "run", run)
    holder = hold_materializer_lock(conf)
    try:
        capsys.readouterr()
        assert main(["run", conf, "-v"]) == 0  # -v: stderr as it is
        err = capsys.readouterr().err
    finally:
        release(holder)
    said = err.splitlines()[-1]
    assert said.startswith(
        "run committed batches 3..4; the fold was skipped: another "
        f"materializer is running (pid {holder.pid} on "
    )
    assert said.endswith("; the next `panestore materialize` folds them")
    assert "Nothing was written" not in err
    assert open_view(spec).version() == view_version  # not folded, committed
    assert open_pane_log(spec).version() == pane_log_version + 1

    assert main(["materialize", conf]) == 0
    assert f"folded pane-log versions {pane_log_version + 1}..{pane_log_version + 1}" in (
        capsys.readouterr().out
    )
