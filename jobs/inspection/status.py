"""A lake's status for an operator, read without Spark (``panestore status``).

:func:`lake_status` reads what the lake and the run's checkpoint already record, and nothing
else: Spark's checkpoint logs (JSON files: the offset log, the commit log, the file sources'
logs), a listing of the landing directory, each Delta table's log (delta-rs: its version, its
last commit's time, its files), the view's application transaction (the pane-log version it
folded), the lock files, the lake's run history (the ``runs`` table, :mod:`sinks.lake.run_history`)
and the note of a run in progress or killed (:mod:`jobs.driver.run_record`). It writes nothing
and takes no lock. The result is a
:class:`LakeStatus`; :meth:`LakeStatus.to_json` is its stable schema (``"schema": 1``,
documented in docs/operations.md), :meth:`LakeStatus.lines` its human form.

The operator's state (keys, windows, the oldest and largest open windows) is read from its
files as the last committed batch left them (:mod:`jobs.inspection.state_summary`).

Not reported (the lake does not record it cheaply): the backlog of a ``dataframe`` source (a
``pane_log`` or ``delta`` source's is the versions it has not read). A lock of a lake in an
object store is its lease (:func:`sinks.lake.lock.holder_in_store`: held while its holder renews
it).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from jobs.checkpoint.logs import committed_clock
from sinks.fold import fold_failure
from sinks.lake import (
    FAILED,
    KILLED,
    MAX_TIMESTAMP_US,
    TABLES,
    RunRecord,
    is_object_store,
    read_runs,
    representable_us,
)

if TYPE_CHECKING:  # pragma: no cover
    from jobs.config.pipeline import Pipeline
    from jobs.executor.state_summary import OpenWindow, StateSummary

SCHEMA = 1
"""The version of :meth:`LakeStatus.to_json`'s schema; raised on any incompatible change."""

NOT_REPORTED_ALWAYS: tuple[str, ...] = ()


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO-8601 UTC (None stays None).

    >>> iso_ms(1_717_232_700_000)
    '2024-06-01T09:05:00.000Z'
    """
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass(frozen=True)
class TableStatus:
    """One Delta table of the lake: its latest version, that commit's time, its live files."""

    version: int
    committed_at: str | None
    files: int
    bytes: int


@dataclass(frozen=True)
class Backlog:
    """Landing files the checkpoint's file source has not recorded as read."""

    files: int
    bytes: int
    oldest_modified: str | None


@dataclass(frozen=True)
class InputStatus:
    """One input of a pipeline of several, after the last committed batch: its own watermark
    (its largest event time less its delay; None: it delivered nothing yet), when it last
    delivered data, whether it is idle now (silent for ``idle_timeout``: it no longer holds the
    pipeline's watermark back, :mod:`panes.inputs`) and its landing backlog (None: not a local
    landing directory)."""

    name: str
    watermark: str | None
    last_data_at: str | None
    idle: bool
    backlog: Backlog | None

    def line(self) -> str:
        since = f", last data {self.last_data_at}" if self.last_data_at else ", no data yet"
        idle = " (idle: not holding the watermark back)" if self.idle else ""
        backlog = (
            f"; backlog {self.backlog.files} files, {self.backlog.bytes} bytes"
            if self.backlog is not None
            else ""
        )
        return f"watermark {self.watermark or '-'}{since}{idle}{backlog}"


@dataclass(frozen=True)
class LockStatus:
    """Whether a process holds one of the lake's locks now, and who it says it is."""

    held: bool
    holder: str | None


@dataclass(frozen=True)
class RunStatus:
    """A run as status shows it (a row of the ``runs`` table, or the note of a run in progress
    or killed): times as ISO text; ``outcome`` one of ``running``, ``succeeded``, ``failed``,
    ``stopped``, ``killed``."""

    run_id: str
    outcome: str
    error: str | None
    started: str | None
    ended: str | None
    seconds: float | None
    batches: int
    records: int
    panes: int
    early: int
    on_time: int
    late_panes: int
    retractions: int
    late: int
    rejected: int
    watermark_after: str | None
    records_by_input: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, r: RunRecord, outcome: str | None = None) -> RunStatus:
        return cls(
            run_id=r.run_id,
            outcome=outcome or r.outcome,
            error=r.error,
            started=_iso_us(r.started_us),
            ended=_iso_us(r.ended_us),
            seconds=r.seconds,
            batches=r.batches,
            records=r.records,
            panes=r.panes,
            early=r.early,
            on_time=r.on_time,
            late_panes=r.late_panes,
            retractions=r.retractions,
            late=r.late,
            rejected=r.rejected,
            watermark_after=_iso_us(r.watermark_after_us),
            records_by_input=dict(r.records_by_input),
        )

    def line(self) -> str:
        took = "" if self.seconds is None else f", {self.seconds:.1f}s"
        said = f": {self.error}" if self.error and self.outcome != "succeeded" else ""
        by = ", ".join(f"{n} {k}" for k, n in self.records_by_input.items())
        records = f"{self.records} records" + (f" ({by})" if by else "")
        return (
            f"{self.outcome} (started {self.started}{took}; {self.batches} batches, "
            f"{records}, {self.panes} panes ({self.early} early, {self.on_time} "
            f"on time, {self.late_panes} late), {self.late} late records, {self.rejected} "
            f"rejected){said}"
        )


@dataclass(frozen=True)
class WindowStatus:
    """An open window of the operator's state: its key (as ``--key`` takes it), its bounds, the
    elements added since it last fired, the panes it emitted."""

    key: str
    start: str | None
    end: str | None
    elements: int
    panes: int

    @classmethod
    def of(cls, w: OpenWindow) -> WindowStatus:
        return cls(w.key, _iso_us(w.start_us), _iso_us(w.end_us), w.elements, w.panes)


@dataclass(frozen=True)
class StateStatus:
    """The operator's state after the last committed batch (``batch_id``): the keys holding a
    window, the windows held (``open_windows`` + ``closed_windows``: closed ones wait for the
    allowed lateness), the ids a deduplicated pipeline remembers, the oldest open window and
    the largest; ``complete`` False: the window figures are those of the first keys read (the
    state is larger than status decodes; ``keys`` stays exact)."""

    batch_id: int
    keys: int
    open_windows: int
    closed_windows: int
    dedup_ids: int
    complete: bool
    oldest_open_window: WindowStatus | None
    largest_open_windows: list[WindowStatus]

    @classmethod
    def of(cls, s: StateSummary) -> StateStatus:
        return cls(
            batch_id=s.batch_id,
            keys=s.keys,
            open_windows=s.open,
            closed_windows=s.closed,
            dedup_ids=s.dedup_ids,
            complete=s.complete,
            oldest_open_window=None if s.oldest is None else WindowStatus.of(s.oldest),
            largest_open_windows=[WindowStatus.of(w) for w in s.largest],
        )

    def line(self) -> str:
        sample = "" if self.complete else " (windows of a sample of the keys)"
        oldest = self.oldest_open_window
        since = f"; oldest open window {oldest.start} (key {oldest.key})" if oldest else ""
        ids = f", {self.dedup_ids} ids remembered" if self.dedup_ids else ""
        return (
            f"{self.keys} keys, {self.open_windows} open windows, {self.closed_windows} closed "
            f"awaiting lateness{ids}{sample}{since}"
        )


def _iso_us(us: int | None) -> str | None:
    """µs as ISO text; None stays None, and so does a time beyond Spark's timestamps (the global
    window's bounds)."""
    us = representable_us(us)
    return None if us is None else iso_ms(us // 1000)


@dataclass(frozen=True)
class RecentRuns:
    """The runs that started in the last 24 hours, summed."""

    runs: int
    failed: int  # failed or killed
    records: int
    panes: int
    late: int
    rejected: int


@dataclass(frozen=True)
class LakeStatus:
    """What ``panestore status`` reports (see docs/operations.md for each field).

    ``state``: ``never_run`` (no checkpoint and no pane log), ``ok``, ``failed`` (the last run
    failed or was killed, or the view's last fold failed: ``view_fold_error``) or ``lagging``
    (the watermark is further behind the wall clock than the allowed lag).
    """

    pipeline: str
    lake: str
    checked_at: str
    state: str
    watermark: str | None
    watermark_from: str | None
    watermark_lag_s: float | None
    last_batch_id: int | None
    last_batch_at: str | None
    backlog: Backlog | None
    source_version_read: int | None
    source_versions_behind: int | None
    pane_log_version: int | None
    view_folded_version: int | None
    view_versions_behind: int | None
    tables: dict[str, TableStatus]
    locks: dict[str, LockStatus]
    last_run: RunStatus | None = None
    running: RunStatus | None = None
    last_24h: RecentRuns | None = None
    operator_state: StateStatus | None = None
    not_reported: tuple[str, ...] = field(default=NOT_REPORTED_ALWAYS)
    view_fold_error: str | None = None
    view_fold_failed_at: str | None = None
    #: A pipeline of several inputs: each input's status (``backlog`` is then their sum).
    inputs: tuple[InputStatus, ...] = ()

    @property
    def healthy(self) -> bool:
        """Whether a monitor should stay quiet (exit status 0)."""
        return self.state in ("ok", "never_run")

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form: ``{"schema": 1, ...}`` with the fields of this class."""
        out = {"schema": SCHEMA, **asdict(self)}
        out["not_reported"] = list(self.not_reported)
        return out

    def lines(self) -> list[str]:
        """The human form: one aligned ``name  value`` line per field."""
        na = "not reported"

        def lag() -> str:
            if self.watermark_lag_s is None:
                return na
            return f"{self.watermark_lag_s:.0f}s behind the wall clock"

        rows = [
            ("pipeline", self.pipeline),
            ("lake", self.lake),
            ("state", self.state.replace("_", " ")),
            (
                "watermark",
                f"{self.watermark} (from {self.watermark_from})" if self.watermark else na,
            ),
            ("watermark lag", lag()),
            (
                "last batch",
                f"{self.last_batch_id} at {self.last_batch_at}"
                if self.last_batch_id is not None
                else "none",
            ),
            (
                "backlog",
                f"{self.backlog.files} files, {self.backlog.bytes} bytes, oldest "
                f"{self.backlog.oldest_modified or '-'}"
                if self.backlog
                else na,
            ),
            *((f"input {i.name}", i.line()) for i in self.inputs),
            (
                "source versions",
                f"read up to {self.source_version_read}, {self.source_versions_behind} behind"
                if self.source_versions_behind is not None
                else na,
            ),
            (
                "view",
                f"folded pane-log version {_or(self.view_folded_version, 'none')} of "
                f"{_or(self.pane_log_version, 'none')}"
                + (
                    f" ({self.view_versions_behind} behind)"
                    if self.view_versions_behind is not None
                    else ""
                ),
            ),
        ]
        if self.view_fold_error is not None:
            rows.append(
                ("view fold", f"failed at {self.view_fold_failed_at}: {self.view_fold_error}")
            )
        rows.append(("last run", self.last_run.line() if self.last_run else "none recorded"))
        if self.running is not None:
            rows.append(("running", self.running.line()))
        if self.last_24h is not None:
            d = self.last_24h
            rows.append(
                (
                    "last 24 hours",
                    f"{d.runs} runs ({d.failed} failed), {d.records} records, {d.panes} panes, "
                    f"{d.late} late, {d.rejected} rejected",
                )
            )
        if self.operator_state is not None:
            rows.append(("operator state", self.operator_state.line()))
        for name, t in self.tables.items():
            rows.append(
                (
                    f"table {name}",
                    f"version {t.version} at {t.committed_at}, {t.files} files, {t.bytes} bytes",
                )
            )
        for name, lock in self.locks.items():
            rows.append((f"{name} lock", f"held by {lock.holder}" if lock.held else "free"))
        rows.append(("not reported", ", ".join(self.not_reported)))
        width = max(len(n) for n, _ in rows)
        return [f"{n.ljust(width)}  {v}" for n, v in rows]


def _or(value: Any, default: str) -> str:
    return default if value is None else str(value)


def _backlog(pipeline: Pipeline, last_batch: int | None) -> Backlog | None:
    """The landing files that no committed batch (up to ``last_batch``, the checkpoint's last
    commit) read: a file a failed batch took and never committed is backlog, the file every
    run stops on (None: not a local file source)."""
    from jobs.reading.files.paths import landing_files
    from jobs.sources.files.changes import taken_files

    source = pipeline.source
    if source.format not in ("jsonl", "csv", "parquet") or is_object_store(source.path):
        return None
    if not os.path.isdir(source.path):
        return Backlog(0, 0, None)
    through = -1 if last_batch is None else last_batch
    taken = taken_files(pipeline.checkpoint_path, source.path, through)
    read = {local for local, _ in taken.values()}
    count = size = 0
    oldest: int | None = None
    for path in landing_files(source.path):
        if os.path.abspath(path) in read:
            continue
        try:
            st = os.stat(path)
        except OSError:  # gone since the listing
            continue
        count, size = count + 1, size + st.st_size
        ms = st.st_mtime_ns // 1_000_000
        oldest = ms if oldest is None else min(oldest, ms)
    return Backlog(count, size, iso_ms(oldest))


def _source_versions(
    pipeline: Pipeline, last_batch: int | None, options: dict[str, str] | None
) -> tuple[int | None, int | None]:
    """(the version read up to, the versions behind the source table's latest) of a ``pane_log``
    or ``delta`` source, from the offset log of the last committed batch; (None, None) for other
    sources or when the source table cannot be read."""
    from deltalake import DeltaTable

    from jobs.checkpoint.logs import recorded_offsets

    source = pipeline.source
    if source.format == "pane_log" and source.upstream is not None:
        path = source.upstream.pane_log
    elif source.format == "delta":
        path = source.path
    else:
        return None, None
    read = [
        r.offset.version
        for r in recorded_offsets(pipeline.checkpoint_path)
        if last_batch is not None and r.batch_id <= last_batch
    ]
    try:
        latest = DeltaTable(path, storage_options=options).version()
    except Exception:  # deltalake's own errors: no table there (yet), unreadable
        return (read[-1] if read else None), None
    done = read[-1] if read else -1
    return (done if read else None), max(0, latest - done)


def _table(dt: Any) -> tuple[TableStatus, int | None]:
    """A table's status, and the highest ``watermark_us`` its files' statistics hold (None if
    it has no such column)."""
    import pyarrow.compute as pc

    history = dt.history(1)
    at = history[0].get("timestamp") if history else None
    adds = dt.get_add_actions(flatten=True)
    adds = adds if hasattr(adds, "column") else adds.to_arrow()  # arro3 -> pyarrow
    import pyarrow as pa

    adds = pa.table(adds)
    nbytes = int(pc.sum(adds.column("size_bytes")).as_py() or 0) if adds.num_rows else 0
    watermark = None
    if "max.watermark_us" in adds.column_names and adds.num_rows:
        watermark = pc.max(adds.column("max.watermark_us")).as_py()
    status = TableStatus(dt.version(), iso_ms(at), adds.num_rows, nbytes)
    return status, None if watermark is None else int(watermark)


def _lock(lake: str, name: str) -> LockStatus | None:
    """The lock ``name``'s status (:func:`sinks.lake.lock.holder_here`, or for a lake in an object
    store :func:`sinks.lake.lock.holder_in_store`: its lease); None where it cannot be told."""
    from sinks.lake import holder_here, holder_in_store

    try:
        seen = holder_in_store(lake, name) if is_object_store(lake) else holder_here(lake, name)
    except Exception:  # the store cannot be read (obstore's errors): not told
        return None
    if seen is None:
        return None
    held, holder = seen
    return LockStatus(True, holder.describe()) if held else LockStatus(False, None)


def lake_status(pipeline: Pipeline, *, max_lag_us: int | None = None) -> LakeStatus:
    """The status of ``pipeline``'s lake now (see the module doc); ``max_lag_us``: a watermark
    further behind the wall clock than this makes the state ``lagging``."""
    from jobs.config.sink_spec import view_spec
    from sinks.lake import existing_table

    spec = view_spec(pipeline)
    now_ms = int(time.time() * 1000)
    not_reported = list(NOT_REPORTED_ALWAYS)
    clock = committed_clock(pipeline.run_files.sub("_checkpoint"))
    last_id = None if clock is None else clock.batch_id
    last_at = None if clock is None else iso_ms(clock.committed_ms)
    watermark_ms = None if clock is None else clock.watermark_ms
    watermark_from = "checkpoint" if watermark_ms is not None else None

    tables: dict[str, TableStatus] = {}
    pane_log_version = folded = None
    for name in TABLES:
        dt = existing_table(spec, name)
        if dt is None:
            continue
        tables[name], table_watermark_us = _table(dt)
        if name == "panes":
            pane_log_version = dt.version()
            if watermark_ms is None and table_watermark_us is not None:
                # a drained pipeline's is the end of time: the last representable instant
                end = min(table_watermark_us, MAX_TIMESTAMP_US)
                watermark_ms, watermark_from = end // 1000, "pane_log"
        if name == "current":
            folded = dt.transaction_version(spec.app_id)
    behind = None
    if pane_log_version is not None:
        behind = pane_log_version - (-1 if folded is None else folded)
        # version 0 of the pane log is its creation: no panes to fold
        behind = max(0, behind - (1 if folded is None else 0))

    inputs: tuple[InputStatus, ...] = ()
    if pipeline.several_inputs:
        inputs, watermark_ms = _inputs(pipeline, last_id, now_ms)
        watermark_from = "input clocks" if watermark_ms is not None else None
        backlog = _summed([i.backlog for i in inputs])
    else:
        backlog = _backlog(pipeline, last_id)
    if backlog is None:
        not_reported.append("backlog")
    opts = dict(spec.storage_options) if spec.storage_options else None
    source_read, source_behind = _source_versions(pipeline, last_id, opts)
    if source_behind is None:
        not_reported.append("source_versions_behind")

    locks: dict[str, LockStatus] = {}
    for name in ("run", "materializer"):
        lock = _lock(pipeline.lake_location, name)
        if lock is None:
            not_reported.append(f"{name}_lock")
        else:
            locks[name] = lock

    last_run, running, recent = _runs(pipeline, spec, locks.get("run"), now_ms)
    operator_state = _operator_state(pipeline)
    if operator_state is None and last_id is not None:
        not_reported.append("operator_state")

    # Spark's watermark is 0 before it has seen an event time: no watermark yet, no lag
    if watermark_ms is not None and watermark_ms <= 0:
        watermark_ms = None
    lag_s = None
    if watermark_ms is not None:  # a drained lake's is near the end of time: no lag
        lag_s = max(0.0, (now_ms - watermark_ms) / 1000)
    fold = fold_failure(spec) if "panes" in tables else None
    never_run = last_id is None and "panes" not in tables and last_run is None
    if never_run:
        state = "never_run"
    elif (last_run is not None and last_run.outcome in (FAILED, KILLED)) or fold is not None:
        state = "failed"
    elif max_lag_us is not None and lag_s is not None and lag_s * 1e6 > max_lag_us:
        state = "lagging"
    else:
        state = "ok"
    return LakeStatus(
        pipeline=pipeline.name,
        lake=pipeline.lake_location,
        checked_at=iso_ms(now_ms) or "",
        state=state,
        watermark=iso_ms(watermark_ms),
        watermark_from=watermark_from if watermark_ms is not None else None,
        watermark_lag_s=lag_s,
        last_batch_id=last_id,
        last_batch_at=last_at,
        backlog=backlog,
        source_version_read=source_read,
        source_versions_behind=source_behind,
        pane_log_version=pane_log_version,
        view_folded_version=folded,
        view_versions_behind=behind,
        tables=tables,
        locks=locks,
        last_run=last_run,
        running=running,
        last_24h=recent,
        operator_state=operator_state,
        not_reported=tuple(not_reported),
        view_fold_error=None if fold is None else fold.error,
        view_fold_failed_at=None if fold is None else _iso_us(fold.failed_us),
        inputs=inputs,
    )


def _inputs(
    pipeline: Pipeline, last_batch: int | None, now_ms: int
) -> tuple[tuple[InputStatus, ...], int | None]:
    """Each input's status after the committed batch ``last_batch``, from the inputs' clocks the
    run settled for it (:mod:`jobs.checkpoint.input_clocks`), and the pipeline's watermark
    after it (ms; None: none yet)."""
    from jobs.checkpoint.input_clocks import latest_before, watermark_ms
    from jobs.driver.plan import inputs_rule

    rule, delays = inputs_rule(pipeline)
    settled = None if last_batch is None else latest_before(pipeline.run_files, last_batch + 1)
    out = []
    for one, delay in zip(pipeline.inputs, delays, strict=True):
        state = None if settled is None else settled.states.get(one.name)
        clock = None if state is None else state.clock(delay)
        own = None if state is None or state.max_event_time is None else clock
        out.append(
            InputStatus(
                one.name,
                None if own is None else iso_ms(watermark_ms(own.watermark)),
                None if state is None or not state.last_data else _iso_us(state.last_data),
                clock is not None and rule.idle(clock, now_ms * 1000),
                _backlog(pipeline.read_as(one), last_batch),
            )
        )
    after = None if settled is None else watermark_ms(settled.watermark_after)
    return tuple(out), after or None


def _summed(backlogs: list[Backlog | None]) -> Backlog | None:
    """Several inputs' backlogs as one (None if one is not reported)."""
    if any(b is None for b in backlogs):
        return None
    known = [b for b in backlogs if b is not None]
    oldest = min((b.oldest_modified for b in known if b.oldest_modified), default=None)
    return Backlog(sum(b.files for b in known), sum(b.bytes for b in known), oldest)


def _operator_state(pipeline: Pipeline) -> StateStatus | None:
    """The operator's state after the last committed batch; None before one, or when it cannot
    be read (a run deleted the version being read twice over: it moved on by several batches)."""
    from jobs.inspection.state_summary import summarize_state

    for _ in range(2):  # a run may delete the version being read: the second read is newer
        try:
            summary = summarize_state(pipeline)
        except FileNotFoundError:
            continue
        return None if summary is None else StateStatus.of(summary)
    return None


DAY_US = 86_400_000_000


def _runs(
    pipeline: Pipeline, spec: Any, run_lock: LockStatus | None, now_ms: int
) -> tuple[RunStatus | None, RunStatus | None, RecentRuns | None]:
    """(the last run that ended, the run in progress, the last 24 hours' runs) from the runs
    table and the run's note (:mod:`jobs.driver.run_record`): a note while the run lock is
    held is the run in progress; a note with the lock free, a run that was killed (the next run
    records it)."""
    from jobs.driver.run_record import read_note

    since = now_ms * 1000 - DAY_US
    records = read_runs(spec, last=1, since_us=since)
    note = read_note(pipeline)
    running = None
    if note is not None and all(r.run_id != note.run_id for r in records):
        if run_lock is not None and not run_lock.held:
            records.append(note)  # killed: its outcome says so
        else:  # held, or not told (the store could not be read)
            running = RunStatus.of(note, "running")
    last = RunStatus.of(records[-1]) if records else None
    day = [r for r in records if r.started_us >= since]
    recent = None
    if records:
        recent = RecentRuns(
            runs=len(day),
            failed=sum(1 for r in day if r.outcome in (FAILED, KILLED)),
            records=sum(r.records for r in day),
            panes=sum(r.panes for r in day),
            late=sum(r.late for r in day),
            rejected=sum(r.rejected for r in day),
        )
    return last, running, recent
