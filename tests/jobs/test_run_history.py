"""The lake's run history: a run's row as it ends (succeeded, failed, stopped), a killed run's
row written by the next run from the note it left, once, what ``status`` says of each, and each
batch counted in exactly one row wherever a kill falls (the runs are driven through
:func:`jobs.driver.run_record.recording` as ``run`` drives it, their batches committed with the
sinks API as the batch sink commits them, without Spark; ``tests/spark/test_kill_safety.py``
kills real ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import BatchStats
from jobs.driver.run_record import note_path, read_note, record_killed, recording
from jobs.driver.runs import RunResult
from sinks.run_history import read_runs
from tests.jobs.test_status import new_lake, status_json
from tests.lock_holder import lock_held


def batch(batch_id: int, records: int, *, committed: bool = True) -> BatchStats:
    return BatchStats(
        batch_id,
        panes=3,
        by_timing={"EARLY": 1, "ON_TIME": 2},
        retractions=0,
        late=1,
        rejected=2,
        committed=committed,
        records=records,
    )


def test_a_run_that_ends_well_is_one_row_with_its_figures(tmp_path, capsys):
    conf = new_lake(tmp_path)
    pipeline = load_pipeline(conf)
    said: list[str] = []
    with recording(pipeline, RunResult(), "scheduled", said.append) as rec:
        assert read_note(pipeline) is not None  # noted as it starts
        rec.batch_done(batch(0, 100, committed=False))
        rec.batch_done(batch(1, 50))
        assert read_note(pipeline) == rec.record  # the note is brought up to date
    (row,) = read_runs(view_spec(pipeline))
    assert row.outcome == "succeeded" and row.error is None and said == []
    assert (row.batches, row.replayed, row.first_batch_id, row.last_batch_id) == (2, 1, 0, 1)
    assert (row.records, row.panes, row.early, row.on_time, row.late_panes) == (150, 6, 2, 4, 0)
    assert (row.late, row.rejected) == (2, 4)
    assert row.seconds is not None and row.seconds >= 0 and row.mode == "scheduled"
    assert not note_path(pipeline).exists()
    assert main(["query", conf, "SELECT outcome, records FROM runs"]) == 0
    assert "succeeded" in capsys.readouterr().out


def test_a_failed_run_is_recorded_with_its_error_on_one_line_and_still_raises(tmp_path, capsys):
    conf = new_lake(tmp_path)
    pipeline = load_pipeline(conf)
    with pytest.raises(RuntimeError), recording(pipeline, RunResult(), "scheduled", print) as rec:
        rec.batch_done(batch(0, 10))
        raise RuntimeError("input file x could not be read\n  at line 2")
    (row,) = read_runs(view_spec(pipeline))
    assert row.outcome == "failed" and row.records == 10
    assert row.error == "input file x could not be read; at line 2"
    capsys.readouterr()
    code, data = status_json(conf, capsys)
    assert code == 1 and data["state"] == "failed"
    assert data["last_run"]["outcome"] == "failed"
    assert data["last_run"]["error"].startswith("input file x could not be read")
    assert main(["status", conf]) == 1
    assert "failed (started" in capsys.readouterr().out


def test_a_stopped_run_says_which_signal(tmp_path):
    pipeline = load_pipeline(new_lake(tmp_path))
    result = RunResult()
    with recording(pipeline, result, "follow", print):
        result.stopped_by = "SIGTERM"
    (row,) = read_runs(view_spec(pipeline))
    assert (row.outcome, row.error, row.mode) == ("stopped", "stopped by SIGTERM", "follow")


def test_a_killed_run_shows_in_status_and_is_recorded_once_by_the_next_run(tmp_path, capsys):
    conf = new_lake(tmp_path)
    pipeline = load_pipeline(conf)
    spec = view_spec(pipeline)
    cm = recording(pipeline, RunResult(), "scheduled", print)
    rec = cm.__enter__()  # the process dies inside the run: the recording never ends
    rec.batch_done(batch(0, 70))
    with lock_held(pipeline.lake_location, "run"):  # while its lock lives, it is running
        code, data = status_json(conf, capsys)
        assert code == 0 and data["running"]["outcome"] == "running"
        assert data["running"]["records"] == 70 and data["last_run"] is None
    code, data = status_json(conf, capsys)  # the lock is free: the run was killed
    assert code == 1 and data["state"] == "failed" and data["running"] is None
    assert data["last_run"]["outcome"] == "killed" and data["last_run"]["records"] == 70
    assert read_runs(spec) == []  # status writes nothing

    with recording(pipeline, RunResult(), "scheduled", print) as second_run:
        second_run.batch_done(batch(1, 5))
    first, second = read_runs(spec)
    assert (first.outcome, first.records, first.last_batch_id) == ("killed", 70, 0)
    assert "killed" in (first.error or "")
    assert (second.outcome, second.records) == ("succeeded", 5)
    assert first.run_id == rec.record.run_id != second.run_id
    code, data = status_json(conf, capsys)
    assert code == 0 and data["last_run"]["outcome"] == "succeeded"
    assert data["last_24h"]["runs"] == 2 and data["last_24h"]["failed"] == 1


def test_a_note_left_after_the_row_was_written_adds_no_second_row(tmp_path):
    """Killed between the append of its row and the removal of its note: the next run finds
    the note of a run the table already holds."""
    pipeline = load_pipeline(new_lake(tmp_path))
    with recording(pipeline, RunResult(), "scheduled", print) as rec:
        rec.batch_done(batch(0, 8))
    note_path(pipeline).write_text(json.dumps({**rec.record.__dict__, "outcome": "killed"}))
    record_killed(pipeline, print)
    (row,) = read_runs(view_spec(pipeline))
    assert row.outcome == "succeeded" and not note_path(pipeline).exists()


def test_recording_never_fails_a_run(tmp_path):
    """The runs table cannot be written (a file stands where it goes): the run's outcome
    stands, a warning says what could not be recorded, and the note stays for the next run."""
    pipeline = load_pipeline(new_lake(tmp_path))
    Path(pipeline.lake_location).mkdir(parents=True)
    (Path(pipeline.lake_location) / "runs").write_text("not a table")
    said: list[str] = []
    with recording(pipeline, RunResult(), "scheduled", said.append):
        pass
    assert len(said) == 1 and said[0].startswith("WARNING could not record the run")
    assert note_path(pipeline).exists()


def test_reading_the_last_run_and_a_days_runs_turns_only_those_into_records(tmp_path):
    from sinks.run_history import RunRecord, append_run

    spec = view_spec(load_pipeline(new_lake(tmp_path)))
    for i in (3, 1, 4, 2):  # appended out of order: read back by start
        append_run(spec, RunRecord(f"r{i}", "p", i * 10, i * 10 + 5, "succeeded"))
    assert [r.run_id for r in read_runs(spec)] == ["r1", "r2", "r3", "r4"]
    assert [r.run_id for r in read_runs(spec, last=1)] == ["r4"]
    assert [r.run_id for r in read_runs(spec, last=1, since_us=20)] == ["r2", "r3", "r4"]
    assert [r.run_id for r in read_runs(spec, since_us=45)] == []
    assert [r.started_us for r in read_runs(spec, last=2)] == [30, 40]
