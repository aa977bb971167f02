"""A run's row in the lake's run history (:mod:`sinks.run_history`), and a killed run's.

:func:`recording` wraps a run once its checks have passed (under the run lock): it notes the run
in ``<checkpoint>/_run.json`` as it starts, brings the note up to date after each batch the run
reports, and, as the run ends, appends the run's row to the ``runs`` table and removes the note.
The row says how the run ended: ``succeeded``; ``stopped`` (a signal stopped it, or Ctrl-C);
``failed``, with the error that ended it on one line. A run killed at any moment leaves its note
behind: the next run (or ``panestore status``, which only reads it) finds it, and the next run
appends the killed run's row from it (``killed``, its figures up to its last reported batch)
before its own; a row already in the table is not appended again, so a note left by a kill
between the append and the note's removal adds nothing.

Recording never fails a run: an error writing the note or the row is reported as a warning
line and the run's outcome stands.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jobs.driver.checkpoint import committed_clock
from sinks.object_store import one_line
from sinks.run_history import FAILED, KILLED, STOPPED, SUCCEEDED, RunRecord, append_run

if TYPE_CHECKING:  # pragma: no cover
    from jobs.config.pipeline import Pipeline
    from jobs.driver.batch_sink import BatchStats


class RunResult(Protocol):
    """What a run reports as it goes (:class:`jobs.driver.runs.RunResult`): its batches, each
    with its ``batch_id`` and ``stats``; the signal that stopped it."""

    @property
    def batches(self) -> Sequence[_Batch]: ...

    @property
    def stopped_by(self) -> str: ...

    def total(self, what: str) -> int: ...


class _Batch(Protocol):
    @property
    def batch_id(self) -> int: ...

    @property
    def stats(self) -> BatchStats | None: ...


NOTE = "_run.json"
"""The running (or killed) run's note, in the pipeline's ``<checkpoint>`` directory."""


def _now_us() -> int:
    return time.time_ns() // 1000


def note_path(pipeline: Pipeline) -> Path:
    return pipeline.run_path / NOTE


def read_note(pipeline: Pipeline) -> RunRecord | None:
    """The note a running or killed run left (None: none, or unreadable: a kill while writing
    it leaves only its temporary file)."""
    try:
        data = json.loads(note_path(pipeline).read_text())
        return RunRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_note(pipeline: Pipeline, record: RunRecord) -> None:
    path = note_path(pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{NOTE}.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(record)))
    os.replace(tmp, path)  # whole or not at all


def _watermark_us(pipeline: Pipeline) -> int | None:
    try:
        clock = committed_clock(pipeline.checkpoint_path)
    except Exception:  # a damaged checkpoint: the run's checks say so, not its record
        return None
    if clock is None or clock.watermark_ms is None or clock.watermark_ms <= 0:
        return None
    return clock.watermark_ms * 1000


@dataclass
class RunRecording:
    """The record of the run in progress (see the module doc); ``versions`` gives the tables'
    versions at its end (set by the run once its sink exists). ``counted``: the batches whose
    panes, late and rejected records an earlier row already counts (the killed run's before
    it): a replay of one of them adds none of these figures again."""

    pipeline: Pipeline
    record: RunRecord
    warn: Callable[[str], Any]
    versions: Callable[[], dict[str, int | None]] | None = None
    counted: frozenset[int] = frozenset()
    committed: dict[int, BatchStats] = field(default_factory=dict)

    def batch_committed(self, stats: BatchStats) -> None:
        """Note a batch's figures as soon as its Delta commits are done, before Spark's commit
        entry: a kill after them leaves them in the note (the killed run's row counts them)."""
        self.committed[stats.batch_id] = stats
        self._note(None)

    def progress(self, result: RunResult) -> None:
        """Bring the note up to date with the batches ``result`` holds (after each batch)."""
        self._note(result)

    def _note(self, result: RunResult | None) -> None:
        self.record = _figures(self.record, result, self.committed, self.counted, _now_us())
        self._safely("note the run's progress", lambda: _write_note(self.pipeline, self.record))

    def end(self, result: RunResult, outcome: str, error: str | None) -> None:
        """Append the run's row (its figures, how it ended) and remove its note."""
        record = _figures(self.record, result, self.committed, self.counted, _now_us())
        record = replace(
            record,
            outcome=outcome,
            error=error,
            watermark_after_us=_watermark_us(self.pipeline),
        )
        if self.versions is not None:
            versions = self._safely("read the tables' versions", self.versions) or {}
            record = replace(record, **{f"{t}_version": v for t, v in versions.items()})
        self.record = record
        if self._safely("record the run in the runs table", lambda: _append(self.pipeline, record)):
            with contextlib.suppress(OSError):
                note_path(self.pipeline).unlink()

    def _safely(self, what: str, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except Exception as e:  # never the run's failure
            self.warn(f"WARNING could not {what}: {one_line(e, limit=300)}")
            return None


def _append(pipeline: Pipeline, record: RunRecord) -> bool:
    from jobs.config.sink_spec import view_spec

    append_run(view_spec(pipeline), record, check_recorded=False)
    return True


def _figures(
    record: RunRecord,
    result: RunResult | None,
    committed: dict[int, BatchStats],
    counted: frozenset[int],
    now_us: int,
) -> RunRecord:
    """``record`` with the figures of the run's batches, seen alive at ``now_us``.

    Each batch is counted once over the run history: its panes, late and rejected records in
    the row of the run whose sink first got through its Delta commits (``committed``, noted
    before Spark's commit entry) unless an earlier row has them (``counted``: a replay after a
    kill); its records in the row of the run Spark reported it to (``result``: a batch is
    reported once, after Spark's commit entry: a replayed batch was never reported before)."""
    reported = [] if result is None else list(result.batches)
    stats = {b.batch_id: b.stats for b in reported if b.stats is not None}
    stats.update(committed)
    mine = [s for b, s in stats.items() if b not in counted]
    timings: dict[str, int] = {}
    for s in mine:
        for timing, n in s.by_timing.items():
            timings[timing] = timings.get(timing, 0) + n
    ids = sorted({*stats, *(b.batch_id for b in reported)})
    return replace(
        record,
        ended_us=now_us,
        batches=len(ids),
        replayed=sum(1 for s in stats.values() if not s.committed),
        first_batch_id=ids[0] if ids else None,
        last_batch_id=ids[-1] if ids else None,
        records=record.records if result is None else result.total("rows"),
        panes=sum(s.panes for s in mine),
        early=timings.get("EARLY", 0),
        on_time=timings.get("ON_TIME", 0),
        late_panes=timings.get("LATE", 0),
        retractions=sum(s.retractions for s in mine),
        late=sum(s.late for s in mine),
        rejected=sum(s.rejected for s in mine),
    )


def _batches_of(record: RunRecord | None) -> frozenset[int]:
    """The batch ids a run's row counts (a run's batches are consecutive)."""
    if record is None or record.first_batch_id is None or record.last_batch_id is None:
        return frozenset()
    return frozenset(range(record.first_batch_id, record.last_batch_id + 1))


def record_killed(pipeline: Pipeline, warn: Callable[[str], Any]) -> RunRecord | None:
    """Append the row of the run whose note is left behind (killed: the caller holds the run
    lock, so no run is alive to own it) and remove the note; the record, or None when there
    was no note."""
    from jobs.config.sink_spec import view_spec

    left = read_note(pipeline)
    path = note_path(pipeline)
    if left is None:
        with contextlib.suppress(OSError):
            path.unlink()  # nothing readable: a kill while the note was first written
        return None
    killed = replace(
        left,
        outcome=KILLED,
        error="the process ended without recording its end (killed, or its machine stopped)",
    )
    try:
        append_run(view_spec(pipeline), killed)
    except Exception as e:
        warn(f"WARNING could not record the killed run {left.run_id}: {one_line(e, limit=300)}")
        return None
    with contextlib.suppress(OSError):
        path.unlink()
    return killed


@contextlib.contextmanager
def recording(
    pipeline: Pipeline, result: RunResult, mode: str, warn: Callable[[str], Any]
) -> Iterator[RunRecording]:
    """Record the run whose ``result`` the body fills (see the module doc): its outcome is
    ``failed`` when the body raises (the error on one line; re-raised), ``stopped`` on Ctrl-C or
    when ``result.stopped_by`` says a signal stopped it, else ``succeeded``."""
    killed = record_killed(pipeline, warn)
    started = _now_us()
    rec = RunRecording(
        pipeline,
        RunRecord(
            run_id=uuid.uuid4().hex,
            pipeline=pipeline.name,
            started_us=started,
            ended_us=started,
            outcome=KILLED,  # what the note says if the run never ends it
            mode=mode,
            host=socket.gethostname(),
            pid=os.getpid(),
            watermark_before_us=_watermark_us(pipeline),
        ),
        warn,
        counted=_batches_of(killed),
    )
    rec._safely("note the run's start", lambda: _write_note(pipeline, rec.record))
    try:
        yield rec
    except KeyboardInterrupt:
        rec.end(result, STOPPED, "interrupted (Ctrl-C)")
        raise
    except BaseException as e:
        rec.end(result, FAILED, one_line(e, limit=2000) or type(e).__name__)
        raise
    if result.stopped_by:
        rec.end(result, STOPPED, f"stopped by {result.stopped_by}")
    else:
        rec.end(result, SUCCEEDED, None)
