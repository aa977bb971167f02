"""What a failed ``panestore run`` leaves behind, as a scheduler and an operator see it: an exit
status that is not 0, one line on stderr (Spark's traces only under ``-v``), a ``runs`` row that
is not ``succeeded``, and ``status`` failed (exit 1) with the reason.

Two real runs, each a ``panestore run`` process: one whose own batch fails in a Python worker (a
``decimal(38,2)`` sum its pane-log column cannot hold), one whose batches commit and whose fold,
the run's last step, fails (the view's total of the window cannot be held).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark

CONF = """\
name = "money"
lake = "{root}/lake"
keys = ["k"]
event_time = "ts"
window = "FixedWindows(1m)"
trigger = "AfterWatermark(early=AfterCount({early}), late=AfterCount(1))"
accumulation_mode = "discarding"
allowed_lateness = "0s"

[source]
path = "{root}/landing"
max_files_per_trigger = 1
schema = {{ k = "string", ts = "timestamp", amount = "decimal(38,2)" }}

[watermark]
delay = "0s"

[aggregates]
total = "sum(amount)"
"""

BIG = "9" * 35 + ".99"  # about 1e35; decimal(38,2) holds less than 1e36


def _lake(root, early: int, files: int, lines: int) -> str:
    """``files`` landed files (a batch each) of ``lines`` amounts of about 1e35 in one window."""
    for f in range(files):
        amounts = [
            json.dumps({"k": "a", "ts": iso(f * lines + i), "amount": BIG}) for i in range(lines)
        ]
        put(root / "landing", f"{f}.jsonl", amounts)
    conf = root / "money.toml"
    conf.write_text(CONF.format(root=root, early=early))
    return str(conf)


def _run(conf: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "run", conf, "--drain"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _status(conf: str, capsys) -> tuple[int, dict]:
    from jobs.cli.commands import main

    capsys.readouterr()
    code = main(["status", conf, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_failed_runs_say_so_in_one_line_in_the_run_history_and_in_status(tmp_path, capsys):
    from jobs.config.load import load_pipeline
    from jobs.config.sink_spec import view_spec
    from sinks.lake.run_history import read_runs

    # 1. a pane whose sum its decimal(38,2) column cannot hold: the batch fails in the worker
    conf = _lake(tmp_path / "pane", early=100, files=1, lines=20)
    proc = _run(conf)
    assert proc.returncode == 1, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if not line.startswith("[")]
    assert "Traceback" not in proc.stderr and "\tat " not in proc.stderr, proc.stderr[-3000:]
    assert said[-1].startswith("panestore: run failed: the pane of k='a'")
    assert "beyond the pane log's decimal(38,2) column 'total'" in said[-1]
    assert len(said) <= 4, proc.stderr  # the pipeline's description, then the one line
    (row,) = read_runs(view_spec(load_pipeline(conf)))
    assert row.outcome == "failed" and "beyond the pane log's decimal(38,2)" in row.error
    code, status = _status(conf, capsys)
    assert code == 1 and status["state"] == "failed"
    assert "beyond the pane log's" in status["last_run"]["error"]

    # 2. panes that fit (5 values each: a batch each), a window total that does not: the fold
    # fails
    conf = _lake(tmp_path / "fold", early=5, files=4, lines=5)
    proc = _run(conf)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("panestore: materialize: ") and "Traceback" not in proc.stderr
    pipeline = load_pipeline(conf)
    (row,) = read_runs(view_spec(pipeline))
    assert row.outcome == "failed" and row.error.startswith("materialize: ")
    assert row.panes >= 4  # its batches committed; the view did not take them
    code, status = _status(conf, capsys)
    assert code == 1 and status["state"] == "failed"
    assert status["view_fold_error"] and status["view_versions_behind"] > 0
