"""The lake's run history: a run's row as it ends (succeeded, failed, stopped), a killed run's
row written by the next run from the note it left, once, and what ``status`` says of each
(the runs are driven through :func:`jobs.driver.run_record.recording` as ``run`` drives it,
without Spark; ``tests/spark/test_run_history.py`` runs real ones, killed too)."""

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
from jobs.driver.runs import BatchReport, RunResult
from sinks.run_history import read_runs
from tests.jobs.test_status import new_lake, status_json
from tests.lock_holder import lock_held


def batch(batch_id: int, rows: int, *, committed: bool = True) -> BatchReport:
    stats = BatchStats(
        batch_id,
        panes=3,
        by_timing={"EARLY": 1, "ON_TIME": 2},
        retractions=0,
        late=1,
        rejected=2,
        committed=committed,
    )
    return BatchReport(batch_id, rows, None, stats)


def test_a_run_that_ends_well_is_one_row_with_its_figures(tmp_path, capsys):
    conf = new_lake(tmp_path)
    pipeline = load_pipeline(conf)
    said: list[str] = []
    result = RunResult()
    with recording(pipeline, result, "scheduled", said.append) as rec:
        assert read_note(pipeline) is not None  # noted as it starts
        result.batches += [batch(0, 100, committed=False), batch(1, 50)]
        rec.progress(result)
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
    result = RunResult(batches=[batch(0, 10)])
    with pytest.raises(RuntimeError), recording(pipeline, result, "scheduled", print):
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
    killed = RunResult()
    cm = recording(pipeline, killed, "scheduled", print)
    rec = cm.__enter__()  # the process dies inside the run: the recording never ends
    killed.batches.append(batch(0, 70))
    rec.progress(killed)
    with lock_held(pipeline.lake_location, "run"):  # while its lock lives, it is running
        code, data = status_json(conf, capsys)
        assert code == 0 and data["running"]["outcome"] == "running"
        assert data["running"]["records"] == 70 and data["last_run"] is None
    code, data = status_json(conf, capsys)  # the lock is free: the run was killed
    assert code == 1 and data["state"] == "failed" and data["running"] is None
    assert data["last_run"]["outcome"] == "killed" and data["last_run"]["records"] == 70
    assert read_runs(spec) == []  # status writes nothing

    result = RunResult()
    with recording(pipeline, result, "scheduled", print):
        result.batches.append(batch(1, 5))
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
    result = RunResult(batches=[batch(0, 8)])
    with recording(pipeline, result, "scheduled", print) as rec:
        pass
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


@pytest.mark.parametrize(
    "killed_at",
    [
        "after Spark's commit entry",
        "after the Delta commits",
        "between the tables' commits",
        "before the Delta commits",
    ],
)
def test_a_batch_replayed_after_a_kill_is_counted_in_one_row(tmp_path, killed_at):
    """Run A commits batch 0, then batch 1's Delta commits (all of them, some, or none) and is
    killed before Spark's commit entry; run B replays batch 1 (its tables skip what they hold)
    and commits batch 2. Summed over the rows, every batch's records, panes, late and rejected
    are counted once, wherever the kill fell; B's ``replayed`` is 1 when every table had
    committed batch 1."""
    pipeline = load_pipeline(new_lake(tmp_path))
    a = RunResult([batch(0, 100)])
    killed_run = recording(pipeline, a, "scheduled", print)
    rec = killed_run.__enter__()
    rec.batch_committed(a.batches[0].stats)
    rec.progress(a)
    if killed_at != "before the Delta commits":
        rec.batch_committed(batch(1, 0).stats)  # its sink got through its Delta commits
    # SIGKILL: the context is never left, the note stays behind

    b = RunResult()
    every_table_had_it = killed_at == "after the Delta commits"
    spark_had_it = killed_at == "after Spark's commit entry"
    with recording(pipeline, b, "scheduled", print) as rec:
        if not spark_had_it:  # replayed
            replay = batch(1, 40, committed=not every_table_had_it)
            rec.batch_committed(replay.stats)
            b.batches.append(replay)
            rec.progress(b)
        rec.batch_committed(batch(2, 10).stats)
        b.batches.append(batch(2, 10))
        rec.progress(b)
    rows = read_runs(view_spec(pipeline))
    assert [r.outcome for r in rows] == ["killed", "succeeded"]
    # each batch's input once; the input of a batch Spark committed in the instant before the
    # killed run read its progress is known to no row (docs/operations.md, the runs table)
    assert sum(r.records for r in rows) == (110 if spark_had_it else 150)
    assert sum(r.panes for r in rows) == 9 and sum(r.early for r in rows) == 3
    assert sum(r.late for r in rows) == 3 and sum(r.rejected for r in rows) == 6
    assert rows[1].replayed == (1 if every_table_had_it else 0)
