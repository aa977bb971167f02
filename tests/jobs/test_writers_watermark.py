"""jobs.driver.writers_watermark: the writers' watermark, folded from marks and the files the job
took."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs.driver.watermark_marks import Mark
from jobs.driver.writers_watermark import Advance, WritersState, fold

S = 1_000_000
MIN = 60 * S
T0 = 1_717_232_400 * S  # 2024-06-01T09:00:00Z
IDLE = 5 * MIN


@dataclass
class Job:
    """Drives :func:`fold` like the job does: files land, batches take them, writers note."""

    now: int = T0
    state: WritersState = field(default_factory=WritersState)
    on_disk: set[str] = field(default_factory=set)
    earliest_of: dict[str, int | None] = field(default_factory=dict)  # a file's data
    marks: dict[str, list[Mark]] = field(default_factory=dict)
    reads: list[list[str]] = field(default_factory=list)
    batch: int = -1

    def land(self, name: str, earliest: int | None = None) -> None:
        self.on_disk.add(name)
        self.earliest_of[name] = earliest

    def note(self, writer: str, time_us: int, *files: str, noted_at: int | None = None) -> None:
        ms = self.marks.setdefault(writer, [])
        ms.append(Mark(writer, len(ms), time_us, files, self.now if noted_at is None else noted_at))

    def fold(self, *taken: str) -> Advance:
        """One computation after a batch took ``taken`` (landed at the current time)."""
        self.batch += 1

        def earliest(names):
            self.reads.append(names)
            return {n: self.earliest_of[n] for n in names}

        adv = fold(
            self.state,
            taken={f: self.now // 1000 for f in taken},
            scanned_batch=self.batch,
            marks=self.marks,
            landed=self.on_disk.__contains__,
            now=self.now,
            idle_timeout_us=IDLE,
            earliest=earliest,
        )
        self.state = adv.state
        return adv

    @property
    def watermark(self) -> int | None:
        ms = self.state.recorded_ms
        return None if ms is None else ms * 1000


def test_the_watermark_is_the_minimum_of_the_writers_noted_times():
    job = Job()
    job.land("a0")
    job.land("b0")
    job.note("a", T0 + 10 * MIN, "a0")
    job.note("b", T0 + 4 * MIN, "b0")
    adv = job.fold("a0", "b0")
    assert job.watermark == T0 + 4 * MIN and adv.watermark_ms == (T0 + 4 * MIN) // 1000
    assert "held by writer b" in adv.line()
    job.note("b", T0 + 12 * MIN)
    job.fold()
    assert job.watermark == T0 + 10 * MIN  # now a holds it
    assert job.reads == [], "files named by marks are never read back"


def test_a_mark_applies_only_once_the_job_took_every_file_it_names():
    job = Job()
    job.land("a0")
    job.land("a1")
    job.note("a", T0 + MIN, "a0")
    job.note("a", T0 + 2 * MIN, "a1")  # a1 is landed but no batch took it yet
    job.fold("a0")
    assert job.watermark == T0 + MIN
    job.note("a", T0 + 3 * MIN)  # a later mark waits for the earlier one
    adv = job.fold()
    assert job.watermark == T0 + MIN and adv.watermark_ms is None
    job.fold("a1")
    assert job.watermark == T0 + 3 * MIN


def test_the_watermark_never_moves_back():
    job = Job()
    job.note("a", T0 + 10 * MIN)
    job.fold()
    assert job.watermark == T0 + 10 * MIN
    job.note("b", T0 + 2 * MIN)  # a new writer far behind
    adv = job.fold()
    assert job.watermark == T0 + 10 * MIN and adv.watermark_ms is None
    job.note("a", T0 + 11 * MIN)
    job.note("a", T0 + 1 * MIN)  # a writer's time never decreases either
    job.fold()
    assert job.state.writers["a"].time_us == T0 + 11 * MIN


def test_an_idle_writer_stops_holding_the_watermark_after_the_timeout():
    job = Job()
    job.note("a", T0 + 10 * MIN)
    job.note("b", T0 + 3 * MIN)
    job.fold()
    assert job.watermark == T0 + 3 * MIN
    job.now += IDLE  # b noted exactly idle_timeout ago: still live
    job.note("a", T0 + 20 * MIN)
    job.fold()
    assert job.watermark == T0 + 3 * MIN
    job.now += 1
    adv = job.fold()
    assert job.watermark == T0 + 20 * MIN and adv.idle == ["b"]
    # b comes back: it holds again from its new time, the watermark does not go back
    job.note("b", T0 + 15 * MIN)
    adv = job.fold()
    assert job.watermark == T0 + 20 * MIN and adv.idle == [] and adv.watermark_ms is None
    job.note("b", T0 + 30 * MIN)
    job.note("a", T0 + 25 * MIN)
    job.fold()
    assert job.watermark == T0 + 25 * MIN


def test_a_pending_mark_keeps_its_writer_live():
    job = Job()
    job.note("a", T0 + 10 * MIN)
    job.note("b", T0 + 3 * MIN)
    job.fold()
    job.land("b1")
    job.now += IDLE + 1
    job.note("a", T0 + 20 * MIN)
    job.note("b", T0 + 8 * MIN, "b1")  # b1 not taken yet: the mark waits, b is live
    job.fold()
    assert job.watermark == T0 + 3 * MIN
    job.fold("b1")
    assert job.watermark == T0 + 8 * MIN


def test_with_every_writer_idle_the_watermark_stays():
    job = Job()
    job.note("a", T0 + 10 * MIN)
    job.fold()
    job.now += IDLE + 1
    adv = job.fold()
    assert job.watermark == T0 + 10 * MIN and adv.holders == [] and adv.idle == ["a"]
    assert "held by nothing" in adv.line() and "stays at" in adv.line()


def test_a_file_no_mark_names_holds_the_watermark_at_its_own_data_until_noted():
    job = Job()
    job.land("a0")
    job.note("a", T0 + 10 * MIN, "a0")
    job.land("x0", earliest=T0 + 4 * MIN)  # its writer has not noted yet
    job.fold("a0", "x0")
    assert job.watermark == T0 + 4 * MIN and job.reads == [["x0"]]
    job.note("a", T0 + 12 * MIN)
    job.fold()
    assert job.watermark == T0 + 4 * MIN and job.reads == [["x0"]], "read back once"
    job.note("x", T0 + 11 * MIN, "x0")  # its writer notes: x0 is claimed
    job.fold()
    assert job.watermark == T0 + 11 * MIN


def test_a_file_no_mark_names_stops_holding_after_the_timeout():
    job = Job()
    job.note("a", T0 + 10 * MIN)
    job.land("x0", earliest=T0 + 4 * MIN)
    job.land("empty")  # no valid record: holds nothing
    job.fold("x0", "empty")
    assert job.watermark == T0 + 4 * MIN
    job.now += IDLE + 1
    job.note("a", T0 + 20 * MIN)
    job.fold()
    assert job.watermark == T0 + 20 * MIN


def test_a_file_named_by_a_waiting_first_mark_still_holds_on_its_own():
    job = Job()
    job.note("a", T0 + 10 * MIN)
    job.land("b0", earliest=T0 + 2 * MIN)
    job.land("b1", earliest=T0 + 5 * MIN)
    job.note("b", T0 + 6 * MIN, "b0", "b1")  # b1 not taken: b has no time yet
    job.fold("b0")
    assert job.watermark == T0 + 2 * MIN  # b0 holds for its writer
    job.fold("b1")
    assert job.watermark == T0 + 6 * MIN


def test_writer_mistakes_are_reported_not_waited_for_forever():
    job = Job()
    job.land("a0")
    job.note("a", T0 + MIN, "a0")
    job.fold("a0")
    job.note("a", T0 + 2 * MIN, "a0", "never-landed")
    adv = job.fold()
    assert job.watermark == T0 + 2 * MIN
    assert any("named already" in w for w in adv.warnings)
    assert any("never-landed" in w and "ignored" in w for w in adv.warnings)
    # a gap in a writer's marks (deleted or unreadable): its later marks wait
    job.marks["a"].append(Mark("a", 5, T0 + 9 * MIN, (), job.now))
    adv = job.fold()
    assert job.watermark == T0 + 2 * MIN and "mark 2 is missing" in adv.warnings[0]


def test_the_state_survives_its_file_and_the_fold_leaves_its_input_alone():
    job = Job()
    job.land("a0")
    job.land("x0", earliest=T0)
    job.note("a", T0 + MIN, "a0")
    before = WritersState()
    adv = fold(
        before,
        taken={"a0": T0 // 1000, "x0": T0 // 1000},
        scanned_batch=3,
        marks=job.marks,
        landed=job.on_disk.__contains__,
        now=T0,
        idle_timeout_us=IDLE,
        earliest=lambda names: dict.fromkeys(names, T0),
    )
    assert before == WritersState()
    assert WritersState.from_json(adv.state.to_json()) == adv.state
    assert adv.state.scanned_batch == 3 and adv.state.files["x0"].earliest_us == T0
    with pytest.raises(ValueError, match="format"):
        WritersState.from_json('{"format": 7}')


def test_files_gone_from_the_landing_directory_are_forgotten_once_they_cannot_matter():
    job = Job()
    job.land("a0")
    job.note("a", T0 + MIN, "a0")
    job.fold("a0")
    assert "a0" in job.state.files  # claimed, still landed: kept to spot a second naming
    job.on_disk.discard("a0")
    job.fold()
    assert "a0" not in job.state.files


def test_the_files_a_batch_took_are_read_from_the_checkpoint(tmp_path):
    import json

    from jobs.config.aggregates import Aggregate
    from jobs.config.pipeline import Pipeline
    from jobs.config.source import Source
    from jobs.driver.writers_watermark import newly_taken
    from panes import FixedWindows
    from panes.combiners import count

    landing = tmp_path / "landing"
    p = Pipeline(
        name="p",
        lake=str(tmp_path / "lake"),
        keys=("k",),
        event_time="ts",
        window=FixedWindows(60_000_000),
        aggregates=(Aggregate("n", count()),),
        source=Source(str(landing), (("k", "string"), ("ts", "timestamp"))),
    )
    ckpt = tmp_path / "lake" / "_checkpoint"
    for source, entries in (
        # Spark reads `_` names holding `=` (partition folders): they are data here too
        (
            0,
            [
                f"{landing.as_uri()}/a%20b.jsonl",
                f"{landing.as_uri()}/s/c",
                f"{landing.as_uri()}/_year=2024/d.jsonl",
            ],
        ),
        (1, [(tmp_path / "lake" / "_control" / "w-0.json").as_uri()]),
    ):
        (ckpt / "sources" / str(source)).mkdir(parents=True)
        body = [json.dumps({"path": e, "timestamp": 7, "batchId": 0}) for e in entries]
        (ckpt / "sources" / str(source) / "0").write_text("\n".join(["v1", *body]))
    (ckpt / "offsets").mkdir()
    (ckpt / "offsets" / "0").write_text(
        'v1\n{"batchTimestampMs": 5}\n{"logOffset": 0}\n{"logOffset": 0}'
    )
    assert newly_taken(p, -1) == ({"a b.jsonl": 7, "s/c": 7, "_year=2024/d.jsonl": 7}, 0)
    assert newly_taken(p, 0) == ({}, 0)


def test_the_job_records_an_advance_as_a_control_row_then_its_state(tmp_path):
    import json

    from jobs.config.aggregates import Aggregate
    from jobs.config.pipeline import Pipeline
    from jobs.config.source import Source
    from jobs.config.watermark import Watermark
    from jobs.driver.watermark_marks import LandingWriter, marks_dir
    from jobs.driver.writers_watermark import load_state, record_writers_watermark, state_path
    from panes import FixedWindows
    from panes.combiners import count

    landing = tmp_path / "landing"
    p = Pipeline(
        name="p",
        lake=str(tmp_path / "lake"),
        keys=("k",),
        event_time="ts",
        window=FixedWindows(60_000_000),
        aggregates=(Aggregate("n", count()),),
        watermark=Watermark("writer_noted", idle_timeout=5 * 60_000_000),
        source=Source(str(landing), (("k", "string"), ("ts", "timestamp"))),
    )
    a = LandingWriter(landing, "a")
    a.land("a0.jsonl", ["{}"])
    a.note(T0 + MIN, noted_at_us=T0)
    ckpt = tmp_path / "lake" / "_checkpoint"
    (ckpt / "sources" / "0").mkdir(parents=True)
    entry = {"path": (landing / "a0.jsonl").as_uri(), "timestamp": T0 // 1000, "batchId": 0}
    (ckpt / "sources" / "0" / "0").write_text("v1\n" + json.dumps(entry))
    (ckpt / "offsets").mkdir()
    (ckpt / "offsets" / "0").write_text('v1\n{"batchTimestampMs": 5}\n{"logOffset": 0}')
    control = tmp_path / "lake" / "_control"

    def rows():
        return sorted(json.loads(f.read_text())["ts"] for f in control.glob("*.json"))

    no_spark = None  # every taken file is named by a mark: nothing is read back
    adv = record_writers_watermark(no_spark, p, now=T0)
    assert adv.watermark_ms == (T0 + MIN) // 1000
    assert rows() == ["2024-06-01T09:01:00.000+00:00"]
    assert load_state(p).scanned_batch == 0 and load_state(p).recorded_ms == adv.watermark_ms
    assert record_writers_watermark(no_spark, p, now=T0).watermark_ms is None
    assert len(rows()) == 1, "no new row when the watermark did not move"
    # killed after the control row, before the state: the same value again, harmless
    Path(state_path(p)).unlink()
    record_writers_watermark(no_spark, p, now=T0)
    assert rows() == ["2024-06-01T09:01:00.000+00:00"] * 2
    bad = marks_dir(landing) / "a" / "000000000001.json"
    bad.write_text("{")
    adv = record_writers_watermark(no_spark, p, now=T0)
    assert (
        adv.warnings
        and "unreadable mark ignored" in adv.warnings[0]
        and str(bad) in adv.warnings[0]
    )
