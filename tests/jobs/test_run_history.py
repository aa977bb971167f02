"""The lake's run history: a run's row as it ends (succeeded, failed, stopped), a killed run's
row written by the next run from the note it left, once, what ``status`` says of each, and each
batch counted in exactly one row wherever a kill falls (the runs are driven through
:func:`jobs.driver.run_record.recording` as ``run`` drives it, their batches committed with the
sinks API as the batch sink commits them, without Spark; ``tests/spark/test_kill_safety.py``
kills real ones)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import KILL_POINTS, TABLE_OF_KIND, BatchSink, BatchStats
from jobs.driver.run_record import RunRecording, note_path, read_note, record_killed, recording
from jobs.driver.runs import RunResult
from jobs.executor.output_tables import KIND_LATE, KIND_PANE, KIND_REJECTED
from panes import Simulator
from sinks.lake.run_history import Figures, read_runs
from tests.jobs.test_changes_cli import MIN
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


@pytest.mark.heavy
def test_reading_the_last_run_and_a_days_runs_turns_only_those_into_records(tmp_path):
    from sinks.lake.run_history import RunRecord, append_run

    spec = view_spec(load_pipeline(new_lake(tmp_path)))
    for i in (3, 1, 4, 2):  # appended out of order: read back by start
        append_run(spec, RunRecord(f"r{i}", "p", i * 10, i * 10 + 5, "succeeded"))
    assert [r.run_id for r in read_runs(spec)] == ["r1", "r2", "r3", "r4"]
    assert [r.run_id for r in read_runs(spec, last=1)] == ["r4"]
    assert [r.run_id for r in read_runs(spec, last=1, since_us=20)] == ["r2", "r3", "r4"]
    assert [r.run_id for r in read_runs(spec, since_us=45)] == []
    assert [r.started_us for r in read_runs(spec, last=2)] == [30, 40]


@dataclass(frozen=True)
class Planned:
    """A batch as Spark's offset log plans it: what each execution of it takes and commits
    (the same on every replay)."""

    batch_id: int
    panes: list
    late: list
    rejected: list[dict]
    records: int


def planned(pipeline) -> list[Planned]:
    """Four batches of the demo pipeline: early, on-time and late panes, retractions, a late
    record and rejected records among them."""
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())

    def plays(key: str, *minutes: int) -> list:
        return [((key, "DE"), {"seconds": 1.0}, m * MIN) for m in minutes]

    def bad(n: int) -> list[dict]:
        return [{"raw": f"x{i}", "source_file": "f", "reason": "malformed"} for i in range(n)]

    early = sim.add_elements(plays("d1", 0, 1, 2, 3, 4))
    on_time = sim.add_elements(plays("d2", 3)) + sim.advance_watermark(60 * MIN)
    late = sim.add_elements(plays("d1", 10)) + sim.advance_watermark(300 * MIN)
    sim.add_elements(plays("d1", 11))  # beyond the allowed lateness: a late record
    assert len(sim.dropped) == 1
    again = sim.add_elements(plays("d3", 400, 401, 402, 403, 404))
    return [
        Planned(0, early, [], bad(1), 6),
        Planned(1, on_time, [], [], 1),
        Planned(2, late, list(sim.dropped), bad(2), 4),
        Planned(3, again, [], [], 5),
    ]


AFTER_SPARK_COMMIT = "after_spark_commit"
"""Killed once Spark's commit entry of the batch is written: the next run does not replay it."""


def execute(sink: BatchSink, rec: RunRecording, batch: Planned, kill: str | None = None) -> bool:
    """Execute ``batch`` as the batch sink does (the tables that hold it skipped, the pane log
    committed first, then the late and rejected tables, then ``on_batch``: the run's note),
    the process killed at ``kill`` (a ``KILL_POINTS`` point, or :data:`AFTER_SPARK_COMMIT`);
    whether Spark's commit entry of the batch was written."""
    b = batch.batch_id
    held = [k for k, appender in sink.appenders.items() if appender.is_committed(b)]
    if kill == "before_commit":
        return False
    done = sink.pane_log.append(b, batch.panes)
    if kill == "between_tables":
        return False
    done |= sink.late_log.append(b, batch.late)
    done |= sink.rejected_log.append(b, batch.rejected)
    own = {k: k not in held for k in (KIND_PANE, KIND_LATE, KIND_REJECTED)}
    panes = batch.panes if own[KIND_PANE] else []
    stats = BatchStats(
        b,
        panes=len(panes),
        by_timing=dict(Counter(p.pane.timing.name for p in panes)),
        retractions=sum(p.is_retraction for p in panes),
        late=len(batch.late) if own[KIND_LATE] else 0,
        rejected=len(batch.rejected) if own[KIND_REJECTED] else 0,
        committed=done,
        records=batch.records,
        held_by=tuple(TABLE_OF_KIND[k] for k in held),
        held=sink.held_figures(b, held),
    )
    if kill == "after_commit":
        return False
    rec.batch_done(stats)
    return kill in (None, AFTER_SPARK_COMMIT)


def run_and_kill(pipeline, plan: list[Planned], kills: list[tuple[str, int]]) -> None:
    """One run per kill (``(point, batch id)``: it dies there, or ends when no batch of it has
    that id) and a last run that ends; each takes the batches from the first one Spark has not
    committed (each run is a new process: a new sink)."""
    first = 0
    for kill in [*kills, None]:
        scope = recording(pipeline, RunResult(), "scheduled", print)
        rec = scope.__enter__()
        sink = BatchSink(pipeline)
        for batch in plan[first:]:
            point = kill[0] if kill is not None and kill[1] == batch.batch_id else None
            if execute(sink, rec, batch, point):
                first = batch.batch_id + 1
            if point is not None:  # the process is dead: its recording never ends
                rec.end = lambda outcome, error: None  # type: ignore[method-assign]
                break
        else:
            scope.__exit__(None, None, None)


def assert_each_batch_counted_once(pipeline, plan: list[Planned]) -> list:
    """Summed over the runs table's rows, the figures are the tables' rows and the planned
    records: the runs, oldest first."""
    runs = read_runs(view_spec(pipeline))
    total = sum((r.figures for r in runs), Figures())
    panes = BatchSink(pipeline).pane_log.read()
    assert total.panes == panes.num_rows
    assert (total.early, total.on_time, total.late_panes) == tuple(
        panes.column("timing").to_pylist().count(t) for t in ("EARLY", "ON_TIME", "LATE")
    )
    assert total.retractions == sum(panes.column("is_retraction").to_pylist())
    assert total.late == BatchSink(pipeline).late_log.read().num_rows == 1
    assert total.rejected == BatchSink(pipeline).rejected_log.read().num_rows == 3
    assert total.records == sum(b.records for b in plan)
    return runs


@pytest.mark.heavy
@pytest.mark.parametrize("point", [*KILL_POINTS, AFTER_SPARK_COMMIT])
def test_a_batch_is_counted_in_one_row_wherever_a_kill_falls(tmp_path, point):
    """Killed in batch 2: before its commits, between the pane log's and the other tables',
    after them (before the note), after the note (before Spark's commit entry), after Spark's
    commit entry. The next run replays it (but after Spark's commit) and counts it unless the
    killed run's row does; ``replayed``: the tables held all of it."""
    pipeline = load_pipeline(new_lake(tmp_path))
    plan = planned(pipeline)
    run_and_kill(pipeline, plan, [(point, 2)])
    killed, last = assert_each_batch_counted_once(pipeline, plan)
    assert (killed.outcome, last.outcome) == ("killed", "succeeded")
    noted = point in ("after_report", AFTER_SPARK_COMMIT)
    assert killed.last_batch_id == (2 if noted else 1)
    replays = point != AFTER_SPARK_COMMIT
    assert (last.first_batch_id, last.batches) == ((2, 2) if replays else (3, 1))
    assert last.replayed == (1 if point in ("after_commit", "after_report") else 0)


CHECK_PANES = "SELECT (SELECT sum(panes) FROM runs) = (SELECT count(*) FROM panes) AS counted"


@pytest.mark.heavy
def test_each_batch_is_counted_in_one_row_through_kills_of_its_replays(tmp_path, capsys):
    """Kills in a row, replays of replays among them: a batch noted by a killed run and
    replayed by runs killed in turn at every point, a batch committed by one run and noted by
    none until a later one, runs that die in their first batch."""
    conf = new_lake(tmp_path)
    pipeline = load_pipeline(conf)
    plan = planned(pipeline)
    kills = [
        ("between_tables", 0),
        ("after_report", 1),
        ("before_commit", 1),
        ("between_tables", 1),
        ("after_commit", 1),
        ("after_report", 1),
        ("after_commit", 2),
        ("after_commit", 2),
        (AFTER_SPARK_COMMIT, 2),
        ("between_tables", 3),
    ]
    run_and_kill(pipeline, plan, kills)
    runs = assert_each_batch_counted_once(pipeline, plan)
    assert [r.outcome for r in runs] == ["killed"] * len(kills) + ["succeeded"]
    assert [r.batches for r in runs] == [0, 2, 0, 0, 0, 1, 1, 0, 1, 0, 1]
    assert [r.replayed for r in runs] == [0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0]
    capsys.readouterr()
    assert main(["query", conf, CHECK_PANES, "--format", "csv"]) == 0  # docs/operations.md's
    assert capsys.readouterr().out.split() == ["counted", "True"]


def test_records_by_input_are_summed_and_a_runs_table_of_before_gains_their_column(tmp_path):
    """A pipeline of several inputs counts each input's records (summed over the batches a
    run counts); a runs table written before that column existed takes the new row (its own
    rows read back with none)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from sinks.lake.run_history import RUNS_SCHEMA

    conf = new_lake(tmp_path)
    pipeline = load_pipeline(conf)
    spec = view_spec(pipeline)
    older = pa.schema([f for f in RUNS_SCHEMA if f.name != "records_by_input"])
    with recording(pipeline, RunResult(), "scheduled", print):
        pass
    (first,) = read_runs(spec)
    path = spec.table_path("runs")
    old = DeltaTable(path).to_pyarrow_table().select(older.names).cast(older)
    write_deltalake(path, old, mode="overwrite", schema_mode="overwrite")
    assert "records_by_input" not in DeltaTable(path).schema().to_arrow().names

    with recording(pipeline, RunResult(), "scheduled", print) as rec:
        by = {"impressions": 70, "clicks": 30}
        rec.batch_done(BatchStats(0, committed=True, records=100, records_by_input=by))
        rec.batch_done(BatchStats(1, committed=True, records=5, records_by_input={"clicks": 5}))
    before, row = read_runs(spec)
    assert before.run_id == first.run_id and before.records_by_input == {}
    assert row.records == 105 and row.records_by_input == {"impressions": 70, "clicks": 35}
    assert (Figures(records_by_input={"a": 1}) + Figures()).records_by_input == {"a": 1}
