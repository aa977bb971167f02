"""The writers' watermark (``watermark.policy = "writer_noted"``): the minimum of the live
writers' noted times, computed on the driver and recorded as a control row.

Writers note their progress with marks (:mod:`jobs.driver.watermark_marks`). After a query (a
scheduled run) or every trigger interval (``--follow``), :func:`record_writers_watermark` folds what
the job has read since the last time into the lake's ``_writers_watermark.json`` and computes:

* a writer's time: the ``time`` of its latest *applied* mark. A mark is applied once every file
  it names has been taken by a batch (it is in a batch of Spark's offset log) and every earlier
  mark of the writer is applied; a writer's time never decreases.
* the holders: every *live* writer with a time (live: its latest mark, applied or not, was noted
  at most ``watermark.idle_timeout`` ago), and every file the job has taken that no mark has
  claimed yet (or only a mark of a writer that does not hold), landed at most ``idle_timeout``
  ago: such a file holds at its own data, its earliest valid event time (read back with Spark).
* the watermark: the minimum of the holders, floored to the millisecond (Spark's watermark unit),
  and never below the last one recorded. No holder (every writer idle): it stays where it is.

An advance is written as a control row ``writers`` (:func:`jobs.driver.control.write_control`)
*before* the state file, so a kill in between writes at most the same value again. Spark's watermark
is the maximum of the control rows seen, as data rows do not feed it under this policy
(:mod:`jobs.driver.plan`): the row a batch takes moves the watermark of the next batch. Everything a
batch sees is therefore in its offset log (its files, control rows included, its watermark and
timestamp), and a replayed batch runs at the same watermark whatever marks landed since.

Why a mark waits for its files: they were landed before the note, so they may hold records
behind ``time``. The control row carrying a mark's time is written after the batches that took
those files were planned, so it is taken by a later batch, and moves the watermark of the batch
after that: the files were judged against an earlier watermark.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.checkpoint.logs import OFFSETS, batch_input, local_path
from jobs.config.event_time import MAX_EVENT_TIME_US, MIN_EVENT_TIME_US, spark_event_time
from jobs.config.inputs import Input
from jobs.config.pipeline import Pipeline
from jobs.driver.control import write_control
from jobs.driver.watermark_marks import (
    Mark,
    MarkError,
    format_us,
    mark_seqs,
    now_us,
    read_mark,
    writer_names,
)
from jobs.reading.files.paths import is_hidden, spark_path
from jobs.sources.files.landing import read_schema_ddl, spark_schema_ddl

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

STATE_FILE = "_writers_watermark.json"
STATE_FORMAT = 1
CONTROL_KIND = "writers"
MAX_WATERMARK_MS = MAX_EVENT_TIME_US // 1000  # below the drain sentinel


@dataclass
class WriterProgress:
    applied_seq: int = -1
    time_us: int | None = None  # of the latest applied mark (None: none applied yet)
    noted_at_us: int | None = None  # the latest noted_at of its marks seen, applied or not


@dataclass
class TakenFile:
    """A data file a batch took: its modification time, its earliest valid event time (once
    read: ``read``), and whether an applied mark names it (``claimed``)."""

    modified_ms: int
    earliest_us: int | None = None
    read: bool = False
    claimed: bool = False


@dataclass
class WritersState:
    """What the job knows about its writers (the lake's ``_writers_watermark.json``)."""

    scanned_batch: int = -1  # offset-log batches up to here are folded in
    recorded_ms: int | None = None  # the last watermark written as a control row
    writers: dict[str, WriterProgress] = field(default_factory=dict)
    files: dict[str, TakenFile] = field(default_factory=dict)  # landing-relative name ->

    def to_json(self) -> str:
        return json.dumps({"format": STATE_FORMAT, **asdict(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WritersState:
        data = json.loads(text)
        if data.pop("format", None) != STATE_FORMAT:
            raise ValueError(f"not a writers' watermark state of format {STATE_FORMAT}")
        return cls(
            scanned_batch=data["scanned_batch"],
            recorded_ms=data["recorded_ms"],
            writers={w: WriterProgress(**p) for w, p in data["writers"].items()},
            files={f: TakenFile(**t) for f, t in data["files"].items()},
        )


@dataclass(frozen=True)
class Holder:
    what: str  # "writer NAME" or "file NAME"
    time_us: int


@dataclass
class Advance:
    """The outcome of one fold: the new state, what holds the watermark, the idle writers, the
    watermark to record (None: it did not move) and warnings about the marks."""

    state: WritersState
    holders: list[Holder]
    idle: list[str]
    watermark_ms: int | None
    warnings: list[str]
    of_input: str | None = None  # one input of several (None: the pipeline's one input)

    def line(self) -> str:
        """One progress line: the watermark and what holds it."""
        wm = self.state.recorded_ms
        at = "none yet" if wm is None else format_us(wm * 1000)
        held = min(self.holders, key=lambda h: h.time_us).what if self.holders else "nothing"
        idle = f"; idle: {', '.join(self.idle)}" if self.idle else ""
        moved = "moves to" if self.watermark_ms is not None else "stays at"
        of = "" if self.of_input is None else f" of input {self.of_input}"
        return f"writers' watermark{of} {moved} {at} (held by {held}{idle})"


# -- the fold (pure) --------------------------------------------------------------------------


def _apply_marks(
    st: WritersState,
    marks: Mapping[str, Sequence[Mark]],
    landed: Callable[[str], bool],
    warnings: list[str],
) -> dict[str, str]:
    """Apply each writer's marks in order while their files are taken; returns the files named
    by marks still waiting (file -> writer)."""
    waiting: dict[str, str] = {}
    for writer, ms in sorted(marks.items()):
        w = st.writers.setdefault(writer, WriterProgress())
        ms = sorted((m for m in ms if m.seq > w.applied_seq), key=lambda m: m.seq)
        for m in ms:
            w.noted_at_us = max(m.noted_at_us, w.noted_at_us or m.noted_at_us)
        blocked = False
        for m in ms:
            if not blocked and m.seq != w.applied_seq + 1:
                gap = f"mark {w.applied_seq + 1} is missing or unreadable (found {m.seq})"
                warnings.append(f"writer {writer}: {gap}: its later marks wait for it")
                blocked = True
            if not blocked:
                pending = [f for f in m.files if f not in st.files and landed(f)]
                blocked = bool(pending)
            if blocked:
                waiting.update((f, writer) for f in m.files)
                continue
            for f in m.files:
                taken = st.files.get(f)
                named = f"writer {writer}: mark {m.seq} names {f}, which"
                if taken is None:
                    warnings.append(
                        f"{named} is neither in the landing directory nor read by the job: ignored"
                    )
                elif taken.claimed:
                    warnings.append(f"{named} an earlier mark named already")
                else:
                    taken.claimed = True
            w.applied_seq = m.seq
            w.time_us = m.time_us if w.time_us is None else max(w.time_us, m.time_us)
    return waiting


def fold(
    state: WritersState,
    *,
    taken: Mapping[str, int],
    scanned_batch: int,
    marks: Mapping[str, Sequence[Mark]],
    landed: Callable[[str], bool],
    now: int,
    idle_timeout_us: int,
    earliest: Callable[[list[str]], Mapping[str, int | None]],
) -> Advance:
    """Fold newly ``taken`` files (name -> modification ms, up to offset-log batch
    ``scanned_batch``) and the writers' unapplied ``marks`` into ``state`` at time ``now`` (µs).

    ``landed(name)``: the file is in the landing directory; ``earliest(names)``: their earliest
    valid event times (None: no valid record), asked only for files that hold on their own.
    ``state`` is not modified. See the module doc for the rules.
    """
    st = copy.deepcopy(state)
    for name, modified_ms in taken.items():
        st.files.setdefault(name, TakenFile(modified_ms))
    st.scanned_batch = max(st.scanned_batch, scanned_batch)
    warnings: list[str] = []
    waiting = _apply_marks(st, marks, landed, warnings)

    holders, idle, holding = [], [], set()
    for writer, w in sorted(st.writers.items()):
        if w.noted_at_us is not None and now - w.noted_at_us > idle_timeout_us:
            idle.append(writer)
        elif w.time_us is not None:
            holders.append(Holder(f"writer {writer}", w.time_us))
            holding.add(writer)
    own = [
        f
        for f, t in sorted(st.files.items())
        if not t.claimed
        and waiting.get(f) not in holding
        and now - t.modified_ms * 1000 <= idle_timeout_us
    ]
    unread = [f for f in own if not st.files[f].read]
    if unread:
        for f, us in earliest(unread).items():
            st.files[f].earliest_us, st.files[f].read = us, True
    holders += [Holder(f"file {f}", us) for f in own if (us := st.files[f].earliest_us) is not None]
    # forget files gone from the landing directory that cannot matter any more
    for f in [f for f, t in st.files.items() if f not in own and f not in waiting]:
        if not landed(f):
            del st.files[f]

    moved = None
    if holders:
        ms = min(min(h.time_us for h in holders) // 1000, MAX_WATERMARK_MS)
        if ms > 0 and (st.recorded_ms is None or ms > st.recorded_ms):
            moved = st.recorded_ms = ms
    return Advance(st, holders, idle, moved, warnings)


# -- the job's side (IO) ----------------------------------------------------------------------


def state_file(one: Input | None = None) -> str:
    """The name of the writers' state in the run's directory: the pipeline's, or that of input
    ``one`` of several."""
    return STATE_FILE if one is None else STATE_FILE.replace(".json", f".{one.name}.json")


def state_path(pipeline: Pipeline, one: Input | None = None) -> str:
    """Where the writers' state is (a local path or a URI, beside the checkpoint)."""
    return pipeline.run_files.uri(state_file(one))


def load_state(pipeline: Pipeline, one: Input | None = None) -> WritersState:
    path = state_path(pipeline, one)
    text = pipeline.run_files.read_if_any(state_file(one))
    if text is None:
        return WritersState()
    try:
        return WritersState.from_json(text)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{path} is damaged ({e}); move it aside and run again: the job "
            "rebuilds it from the checkpoint and the marks"
        ) from None


def save_state(pipeline: Pipeline, state: WritersState, one: Input | None = None) -> None:
    pipeline.run_files.replace(state_file(one), state.to_json())


def newly_taken(pipeline: Pipeline, after_batch: int) -> tuple[dict[str, int], int]:
    """(landing files taken by offset-log batches after ``after_batch`` -> modification ms,
    the last batch read). Control files (and anything hidden or under a ``_`` folder) are left
    out."""
    checkpoint = pipeline.run_files.sub("_checkpoint")
    ids = sorted(int(n) for n in checkpoint.names(OFFSETS) if n.isdigit())
    landing = os.path.abspath(pipeline.source.path)
    taken: dict[str, int] = {}
    last = after_batch
    for b in (i for i in ids if i > after_batch):
        listed = batch_input(checkpoint, b)
        for uri, modified in zip(listed.files, listed.modified_ms, strict=True):
            local = local_path(uri)
            parts = Path(os.path.relpath(local, landing)).parts if local else ("..",)
            hidden = is_hidden(parts[-1]) or any(is_hidden(p, folder=True) for p in parts[:-1])
            if not hidden:  # data, not control rows (../)
                taken["/".join(parts)] = modified
        last = b
    return taken, last


def read_new_marks(
    pipeline: Pipeline, state: WritersState
) -> tuple[dict[str, list[Mark]], list[str]]:
    """Every writer's marks after its last applied one, and a warning per unreadable mark."""
    landing = pipeline.source.path
    marks: dict[str, list[Mark]] = {}
    problems: list[str] = []
    for writer in writer_names(landing):
        applied = state.writers.get(writer, WriterProgress()).applied_seq
        for seq in (s for s in mark_seqs(landing, writer) if s > applied):
            try:
                marks.setdefault(writer, []).append(read_mark(landing, writer, seq))
            except (OSError, MarkError) as e:
                problems.append(f"unreadable mark ignored: {e}")
    return marks, problems


def earliest_event_times(
    spark: SparkSession, pipeline: Pipeline, names: list[str]
) -> dict[str, int | None]:
    """Each file's earliest valid event time in µs (None: none valid, or the file is gone),
    read with Spark by the job's own rules (:func:`jobs.config.event_time.spark_event_time`)."""
    from pyspark.sql import functions as F

    landing = Path(pipeline.source.path).absolute()
    present = {(landing / n).as_uri(): n for n in names if (landing / n).is_file()}
    out: dict[str, int | None] = dict.fromkeys(names)
    if not present:
        return out
    src = pipeline.source
    paths = [spark_path(str(landing / n)) for n in present.values()]  # literal, not globs
    if src.format == "parquet":
        df = spark.read.schema(spark_schema_ddl(pipeline)).parquet(*paths)
    else:
        text = spark.read.text(paths)
        ddl = read_schema_ddl(pipeline)
        if src.format == "jsonl":
            parsed = F.from_json("value", ddl)
        else:
            parsed = F.from_csv("value", ddl, {"sep": src.csv_delimiter, "escape": '"'})
        df = text.select(parsed.alias("_r")).select("_r.*")
    ts, _ = spark_event_time(pipeline.event_time_column, df)
    micros = F.unix_micros(ts)
    rows = (
        df.select(F.input_file_name().alias("f"), micros.alias("us"))
        .where(F.col("us").between(MIN_EVENT_TIME_US, MAX_EVENT_TIME_US))
        .groupBy("f")
        .agg(F.min("us").alias("us"))
        .collect()
    )
    by_path = {Path(local_path(u) or u).resolve(): n for u, n in present.items()}
    for r in rows:
        name = by_path.get(Path(local_path(r["f"]) or r["f"]).resolve())
        if name is not None:
            out[name] = int(r["us"])
    return out


def record_writers_watermark(
    spark: SparkSession, pipeline: Pipeline, now: int | None = None, one: Input | None = None
) -> Advance:
    """Fold what the job took and the new marks into the lake's state; when the watermark
    moved, write it as a ``writers`` control row (then the state). Call it under the run lock,
    between or during queries of a ``writer_noted`` pipeline; ``one``: of that input of a
    pipeline of several (its landing, its marks, its own state; its control row names it)."""
    state = load_state(pipeline, one)
    reader = pipeline if one is None else pipeline.read_as(one)
    taken, last = newly_taken(reader, state.scanned_batch)
    marks, problems = read_new_marks(reader, state)
    landing = Path(reader.source.path)
    watermark = reader.watermark
    adv = fold(
        state,
        taken=taken,
        scanned_batch=last,
        marks=marks,
        landed=lambda f: (landing / f).is_file(),
        now=now_us() if now is None else now,
        idle_timeout_us=watermark.idle_timeout,
        earliest=lambda names: earliest_event_times(spark, reader, names),
    )
    adv.warnings[:0] = problems
    if one is not None:
        adv.of_input = one.name
        adv.warnings[:] = [f"input {one.name}: {w}" for w in adv.warnings]
    if adv.watermark_ms is not None:
        write_control(pipeline, CONTROL_KIND, adv.watermark_ms, None if one is None else one.name)
    save_state(pipeline, adv.state, one)
    return adv


def noted_inputs(pipeline: Pipeline) -> list[Input | None]:
    """The inputs whose writers note their watermark, as :func:`record_writers_watermark` takes
    them: None for a pipeline of one ``writer_noted`` input, else each such input."""
    if not pipeline.several_inputs:
        return [None] if pipeline.writer_noted else []
    return [one for one in pipeline.inputs if one.writer_noted]
