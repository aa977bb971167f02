"""A run's row in the lake's run history (:mod:`sinks.lake.run_history`), and a killed run's.

:func:`recording` wraps a run once its checks have passed (under the run lock): it notes the run
in ``<checkpoint>/_run.json`` as it starts, brings the note up to date after each batch (in the
batch sink, once the batch's Delta commits are done and before Spark's commit entry of it:
:meth:`RunRecording.batch_done`), and, as the run ends, appends the run's row to the ``runs``
table and removes the note.
The row says how the run ended: ``succeeded``; ``stopped`` (a signal stopped it, or Ctrl-C);
``failed``, with the error that ended it on one line. A run killed at any moment leaves its note
behind: the next run (or ``panestore status``, which only reads it) finds it, and the next run
appends the killed run's row from it (``killed``, its figures up to its last noted batch)
before its own; a row already in the table is not appended again, so a note left by a kill
between the append and the note's removal adds nothing.

Each batch is counted in one row (:func:`counted`): the figures of a batch (its input records,
its rows of ``panes``, ``late`` and ``rejected``) go to the first run that notes it; a run that
replays a batch an earlier row counts (its id at or below the highest ``last_batch_id`` the
table holds: read when the run first meets a batch that a table held already; a batch no table
held is in no row) counts it in ``batches`` and ``replayed`` only. A kill between a
batch's Delta commits and its note leaves the batch in no row: the run that replays it counts
it, reading what the tables that already held it hold of it (``BatchStats.held``). So, over
all rows, ``records`` sums to the records of the committed batches and ``panes``, ``late`` and
``rejected`` to the rows of those tables, whenever runs are killed.

Recording never fails a run: an error writing the note or the row is reported as a warning
line and the run's outcome stands.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jobs.checkpoint.input_clocks import watermark_after_ms
from jobs.checkpoint.logs import committed_clock
from sinks.lake import (
    FAILED,
    KILLED,
    STOPPED,
    SUCCEEDED,
    RunRecord,
    append_run,
    last_batch_recorded,
    one_line,
)

if TYPE_CHECKING:  # pragma: no cover
    from jobs.config.pipeline import Pipeline
    from jobs.driver.batch_sink import BatchStats


class RunResult(Protocol):
    """What a run says of itself as it ends (:class:`jobs.driver.runs.RunResult`): the signal
    that stopped it."""

    @property
    def stopped_by(self) -> str: ...


NOTE = "_run.json"
"""The running (or killed) run's note, in the pipeline's ``<checkpoint>`` directory."""


def _now_us() -> int:
    return time.time_ns() // 1000


def note_path(pipeline: Pipeline) -> Path:
    """The note's local path (a local checkpoint's; the run reads and writes the note through
    :attr:`jobs.config.pipeline.Pipeline.run_files`, on any filesystem)."""
    return pipeline.run_path / NOTE


def read_note(pipeline: Pipeline) -> RunRecord | None:
    """The note a running or killed run left (None: none, or unreadable: a kill while writing
    it leaves only its temporary file)."""
    try:
        data = json.loads(pipeline.run_files.read_text(NOTE))
        return RunRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_note(pipeline: Pipeline, record: RunRecord) -> None:
    pipeline.run_files.replace(NOTE, json.dumps(asdict(record)))  # whole or not at all


def _watermark_us(pipeline: Pipeline) -> int | None:
    """The watermark after the last committed batch (µs; None: none yet): Spark's, or of
    several inputs the one the run keeps (:mod:`jobs.checkpoint.input_clocks`)."""
    try:
        clock = committed_clock(pipeline.run_files.sub("_checkpoint"))
        ms = None if clock is None else clock.watermark_ms
        if pipeline.several_inputs:
            ms = watermark_after_ms(pipeline.run_files, None if clock is None else clock.batch_id)
    except Exception:  # a damaged checkpoint: the run's checks say so, not its record
        return None
    if ms is None or ms <= 0:
        return None
    return ms * 1000


@dataclass
class RunRecording:
    """The record of the run in progress (see the module doc); ``versions`` gives the tables'
    versions at its end (set by the run once its sink exists)."""

    pipeline: Pipeline
    record: RunRecord
    warn: Callable[[str], Any]
    versions: Callable[[], dict[str, int | None]] | None = None

    def batch_done(self, stats: BatchStats) -> None:
        """Count the batch the sink has just committed, or found committed (:func:`counted`),
        and bring the note up to date: the batch sink calls it before Spark's commit entry of
        the batch (its ``on_batch``). A batch no table held before is in no row yet."""
        earlier = self.counted_through if stats.held_by else None
        self.record = counted(self.record, stats, earlier, _now_us())
        self._safely("note the run's progress", lambda: _write_note(self.pipeline, self.record))

    @functools.cached_property
    def counted_through(self) -> int | None:
        """The highest batch id an earlier row counts (None: none, or the runs table could not
        be read: a warning says so): read once, when the run first meets a batch that a table
        held already."""
        from jobs.config.sink_spec import view_spec

        return self._safely(
            "read the batches the run history counts",
            lambda: last_batch_recorded(view_spec(self.pipeline)),
        )

    def end(self, outcome: str, error: str | None) -> None:
        """Append the run's row (its figures, how it ended) and remove its note."""
        record = replace(
            self.record,
            ended_us=_now_us(),
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
                self.pipeline.run_files.remove(NOTE)

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


def counted(
    record: RunRecord, stats: BatchStats, counted_through: int | None, now_us: int
) -> RunRecord:
    """``record`` with the batch of ``stats`` counted, seen alive at ``now_us``: in ``batches``
    always, in ``replayed`` when its tables all held it already, and its figures
    (:meth:`~jobs.driver.batch_sink.BatchStats.figures`) unless an earlier row counts it (its
    id at or below ``counted_through``)."""
    figures = record.figures
    if counted_through is None or stats.batch_id > counted_through:
        figures += stats.figures()
    first = record.first_batch_id
    last = record.last_batch_id
    return replace(
        record,
        ended_us=now_us,
        batches=record.batches + 1,
        replayed=record.replayed + (0 if stats.committed else 1),
        first_batch_id=stats.batch_id if first is None else min(first, stats.batch_id),
        last_batch_id=stats.batch_id if last is None else max(last, stats.batch_id),
        **asdict(figures),
    )


def record_killed(pipeline: Pipeline, warn: Callable[[str], Any]) -> RunRecord | None:
    """Append the row of the run whose note is left behind (killed: the caller holds the run
    lock, so no run is alive to own it) and remove the note; the record, or None when there
    was no note."""
    from jobs.config.sink_spec import view_spec

    left = read_note(pipeline)
    files = pipeline.run_files
    if left is None:
        with contextlib.suppress(OSError):
            files.remove(NOTE)  # nothing readable: a kill while the note was first written
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
        files.remove(NOTE)
    return killed


@contextlib.contextmanager
def recording(
    pipeline: Pipeline, result: RunResult, mode: str, warn: Callable[[str], Any]
) -> Iterator[RunRecording]:
    """Record the run whose ``result`` the body fills (see the module doc): its outcome is
    ``failed`` when the body raises (the error on one line; re-raised), ``stopped`` on Ctrl-C or
    when ``result.stopped_by`` says a signal stopped it, else ``succeeded``."""
    record_killed(pipeline, warn)
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
    )
    rec._safely("note the run's start", lambda: _write_note(pipeline, rec.record))
    try:
        yield rec
    except KeyboardInterrupt:
        rec.end(STOPPED, "interrupted (Ctrl-C)")
        raise
    except BaseException as e:
        rec.end(FAILED, one_line(e, limit=2000) or type(e).__name__)
        raise
    if result.stopped_by:
        rec.end(STOPPED, f"stopped by {result.stopped_by}")
    else:
        rec.end(SUCCEEDED, None)
