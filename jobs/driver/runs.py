"""Running a pipeline: scheduled (``availableNow``), continuous (``--follow``) and draining runs.

* :func:`run` with the defaults processes every file that has landed, in micro-batches of at most
  ``source.max_files_per_trigger`` files, each batch firing the event-time timers its own
  watermark advance made due (:mod:`jobs.driver.batch_sink`); every batch is committed; the run
  exits. That is
  the cron / Airflow mode: run it again when new files land.
* ``follow=True`` keeps running with a processing-time trigger (a batch every ``interval`` while
  files arrive) until stopped (Ctrl-C, or ``stop_after_batches``).
* ``watermark.policy = "writer_noted"``: after the data, the writers' watermark is recorded as
  a control row (:mod:`jobs.driver.writers_watermark`) and, if it moved, one more query runs on it
  (firing what became due); with ``follow`` it is recorded every few seconds while running.
* ``drain=True`` runs as above, then drops the drain sentinel into ``<checkpoint>/_control`` and
  runs once more: the watermark moves to the end of time and every window closes (final panes of
  sessions, the global window, ...). Data that lands after a drain is late for good.

After its batches (not after a stop on a signal; a ``--follow`` run after each batch too), still
under the lake's lock, a run compacts each table it wrote whose small files passed the threshold
(:mod:`sinks.upkeep.compaction`): the lake stays small without ``panestore optimize``; a compaction
that fails is a warning line. Then, once a day, it vacuums them (:mod:`sinks.upkeep.auto_vacuum`;
likewise a warning when it fails). It then deletes the control files its batches took
(:func:`jobs.driver.control.clean_control`).

Exactly-once: each batch's panes, late and rejected rows are committed with a Delta application
transaction (app id = pipeline name, version = batch id); Spark's checkpoint is under
``<checkpoint>/_checkpoint``. Killed at any moment, the next run replays the batch Spark had not
committed with the same offsets, watermark and batch timestamp (and the operator's state version
before it); tables that already hold that batch skip it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from jobs.config.pipeline import Pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import BatchSink, BatchStats
from jobs.driver.control import clean_control, control_stream, write_drain_sentinel, write_tick
from jobs.driver.fold_spread import spread_pays
from jobs.driver.plan import build_inputs_job, build_job
from jobs.driver.preflight import Preflight, check_before_lock, check_run
from jobs.driver.run_record import recording
from jobs.driver.stopping import StopRequest, listen_again, stop_on_signals
from jobs.driver.writers_watermark import noted_inputs, record_writers_watermark
from jobs.sources.files.changes import note_changes
from jobs.sources.files.landing import jsonl_decoder
from jobs.sources.records import read_source
from jobs.startup.python_processes import start_workers
from jobs.startup.session import (
    AVAILABLE_NOW_LOGGERS,
    SessionOptions,
    StartingSession,
    end_session_soon,
    existing_session,
    quiet_loggers,
)
from sinks.lake import (
    AccumulatorNotStorable,
    LakeError,
    LakeLock,
    PaneValueOutOfRange,
    SourceTableChanged,
    SourceTableError,
    UpstreamChanged,
    first_line,
    one_line,
    shared_snapshots,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sinks.fold import MaterializeResult
    from sinks.upkeep import Compaction, Vacuum


@dataclass
class BatchReport:
    """One micro-batch of a run: its input records (``rows``) and control rows (a drain, a tick,
    the writers' watermark: rows that only move the watermark), watermark, what the sink did
    (``stats``) and Spark's own timings of it (``durations_ms``: the progress report's
    ``durationMs``, e.g. ``latestOffset``, ``queryPlanning``, ``addBatch``, ``walCommit``,
    ``commitOffsets`` and their total ``triggerExecution``)."""

    batch_id: int
    rows: int
    watermark: str | None
    stats: BatchStats | None
    durations_ms: dict[str, int] = field(default_factory=dict)
    control_rows: int = 0

    @classmethod
    def of(cls, progress, stats: BatchStats | None) -> BatchReport:
        """The report of a query's progress event. The job's last source is its control stream
        (:func:`jobs.driver.plan.build_job` unions it after the records)."""
        per_source = [int(s.numInputRows) for s in progress.sources or ()]
        control = per_source[-1] if len(per_source) > 1 else 0
        # the watermark the batch ran at: Spark's, or the one the driver keeps of several inputs
        ran_at = _iso_ms(stats.watermark_ms) if stats and stats.watermark_ms else None
        return cls(
            progress.batchId,
            int(progress.numInputRows) - control,
            ran_at or _watermark(progress),
            stats,
            dict(progress.durationMs or {}),
            control,
        )

    @property
    def watermark_after(self) -> str | None:
        """The watermark after the batch: what it moved to, and fired at (the batch's own
        watermark when it moved nothing)."""
        after = None if self.stats is None else self.stats.watermark_after_ms
        return _iso_ms(after) if after else self.watermark

    def line(self) -> str:
        s = self.stats
        wm = self.watermark or "-"
        if self.watermark_after != self.watermark:
            wm = f"{wm} -> {self.watermark_after}"
        rows = f"{self.rows} rows" + (
            f" (+{_control(self.control_rows)})" if self.control_rows else ""
        )
        if s is None:
            return f"batch {self.batch_id}: {rows}, watermark {wm}"
        timing = ", ".join(
            f"{n} {t.lower().replace('_', '-')}" for t, n in sorted(s.by_timing.items())
        )
        panes = f"{s.panes} panes" + (
            f" ({timing}; {s.retractions} retractions)" if s.panes else ""
        )
        note = "" if s.committed else "  [replayed batch: already committed, skipped]"
        return (
            f"batch {self.batch_id}: {rows} -> {panes}, {s.late} late, "
            f"{s.rejected} rejected; watermark {wm} ({s.compute_s:.1f}s + commit "
            f"{s.commit_s:.1f}s){note}"
        )


@dataclass
class RunResult:
    """What a run did: its batches, its wall time, and where that time went (``phases``:
    seconds by phase, in order: ``session`` (starting Spark, when the run did), ``prepare``
    (lock, state layout, tables, checkpoint checks), ``build`` (the query's DataFrames),
    ``query`` (from the query's start to its end, batches included; summed over the queries
    of a run that ticks or drains), ``compact`` (the automatic compaction after a run that
    committed batches: :mod:`sinks.upkeep.compaction`, reported in ``compactions``), ``vacuum`` (the
    daily vacuum, when one ran: :mod:`sinks.upkeep.auto_vacuum`, reported in ``vacuums``))."""

    batches: list[BatchReport] = field(default_factory=list)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    stopped_by: str = ""  # the signal that stopped the run (SIGINT, SIGTERM), if one did
    queries: int = 0  # the streaming queries it ran (one, plus one for a drain or a tick)
    folded: MaterializeResult | None = None  # the fold after the run (jobs.api.run), if done
    compactions: list[Compaction] = field(default_factory=list)  # after the batches
    vacuums: list[Vacuum] = field(default_factory=list)  # after the compaction, once a day

    def add_phase(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def committed(self) -> list[int]:
        """The ids of the batches this run committed (replayed batches it skipped excluded)."""
        return [b.batch_id for b in self.batches if b.stats is not None and b.stats.committed]

    def total(self, what: str) -> int:
        if what == "rows":
            return sum(b.rows for b in self.batches)
        return sum(getattr(b.stats, what) for b in self.batches if b.stats is not None)

    def summary(self) -> str:
        phases = ", ".join(f"{name} {secs:.1f}s" for name, secs in self.phases.items())
        control = sum(b.control_rows for b in self.batches)
        rows = f"{self.total('rows')} rows" + (f" (+{_control(control)})" if control else "")
        return (
            f"{len(self.batches)} batches, {rows}, "
            f"{self.total('panes')} panes, {self.total('late')} late, "
            f"{self.total('rejected')} rejected in {self.seconds:.1f}s"
            + (f" ({phases})" if phases else "")
        )


def _control(n: int) -> str:
    return f"{n} control row{'s' if n != 1 else ''}: watermark moves"


def _iso_ms(ms: int) -> str:
    """Milliseconds since 1970 as ISO-8601 UTC text."""
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _watermark(progress) -> str | None:
    wm = (progress.eventTime or {}).get("watermark")
    if not wm or wm.startswith("1970-01-01T00:00:00"):
        return None
    return wm


def _writer(
    spark: SparkSession,
    pipeline: Pipeline,
    sink: BatchSink,
    *,
    follow: bool,
    interval: str,
    records: DataFrame | None,
    checked: Preflight,
):
    """The query, built and ready to start (a ``DataStreamWriter``), over the state layout and
    source table the run's checks found."""
    control = control_stream(spark, pipeline)
    buckets = checked.state.bucket_ids
    if pipeline.several_inputs:  # each input read as its own source, one query over them all
        by_input = {
            one.name: one.source.frame  # a DataFrame input's own (jobs.api checks it is given)
            if one.source.is_dataframe
            else read_source(
                spark,
                pipeline.read_as(one),
                checked.source_table(one),
                decoder=jsonl_decoder(pipeline, one) or False,
                values=[c for c in pipeline.value_columns if c in one.types],
                of_input=one.name,
            )
            for one in pipeline.inputs
        }
        out = build_inputs_job(spark, pipeline, by_input, control, bucket_ids=buckets)
    else:
        if records is None:
            records = read_source(spark, pipeline, checked.source_table(pipeline.input_list[0]))
        out = build_job(spark, pipeline, records, control, bucket_ids=buckets)
    writer = (
        out.writeStream.foreachBatch(sink)
        .queryName(f"panestore_{pipeline.name}")
        .option("checkpointLocation", pipeline.checkpoint_path)
    )
    if follow:
        return writer.trigger(processingTime=interval)
    spark.conf.set(AVAILABLE_NOW_WRAPPER, "true")  # read when the query starts
    quiet_loggers(spark, AVAILABLE_NOW_LOGGERS)
    return writer.trigger(availableNow=True)


AVAILABLE_NOW_WRAPPER = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"
"""Spark's setting that runs ``availableNow`` over every source (SPARK-45178).

Spark's own sources (files, Kafka, Delta) stop at the offset they had when the query started,
in as many batches as their limits make, after replaying a batch a killed run left uncommitted.
A source that does not implement ``availableNow`` (every PySpark Python data source: the
pane-log and Delta-table sources, a user's own) would otherwise fall back to a single batch
(Trigger.Once), which after a kill replays the uncommitted batch and stops without the newer
data, with a warning. With this setting Spark wraps such a source: its latest offset at the
query's start is the end, and the run takes the replayed batch, then everything up to that
end."""


def _run_query(
    spark,
    pipeline,
    sink,
    result: RunResult,
    emit: Callable[[str], Any],
    *,
    follow: bool,
    interval: str,
    records,
    checked: Preflight,
    stop_after_batches: int | None,
    built: Callable[[], Any],
    poll: Callable[[], Any] | None = None,
    stop: StopRequest | None = None,
) -> None:
    """Run one query to its end, reporting each batch (:func:`_await_query`: ``poll``,
    ``stop``); ``built`` is called once the query is built, before it starts."""
    building = time.monotonic()
    writer = _writer(
        spark,
        pipeline,
        sink,
        follow=follow,
        interval=interval,
        records=records,
        checked=checked,
    )
    starting = time.monotonic()
    result.add_phase("build", starting - building)
    built()
    query = writer.start()
    result.queries += 1
    try:
        _await_query(query, sink, result, emit, stop_after_batches, poll, stop)
    finally:
        result.add_phase("query", time.monotonic() - starting)


def _await_query(
    query,
    sink: BatchSink,
    result: RunResult,
    emit: Callable[[str], Any],
    stop_after_batches: int | None,
    poll: Callable[[], Any] | None = None,
    stop: StopRequest | None = None,
) -> None:
    """Report each batch of the running ``query`` as it commits, until the query ends; ``poll``
    is called between checks. When
    ``stop`` is requested (a signal, :mod:`jobs.driver.stopping`), the query is stopped once no
    batch is in flight, or at once when ``stop.abandon``; a batch that then fails was abandoned (the
    next run replays it; tables that had committed it skip it) and is reported, not raised."""
    seen: set[int] = set()
    done = 0
    waiting = False  # said that the stop waits for the batch in flight

    def drain_progress() -> None:
        nonlocal done
        for p in query.recentProgress:
            if p.batchId in seen or p.batchId not in sink.stats:
                continue  # (no sink call: no batch ran, e.g. the final idle progress)
            seen.add(p.batchId)
            rep = BatchReport.of(p, sink.stats.get(p.batchId))
            result.batches.append(rep)
            done += 1
            emit(rep.line())
            for uri in rep.stats.vanished if rep.stats else ():
                emit(
                    f"WARNING batch {p.batchId}: input file {uri} vanished before it was read; "
                    "recorded in the rejected table"
                )
            for c in rep.stats.changed if rep.stats else ():
                when = (
                    f"modified {_iso_ms(c.modified_ms)}, read as of {_iso_ms(c.read_modified_ms)}"
                )
                emit(
                    f"WARNING batch {p.batchId}: input file {c.uri} changed after it was read "
                    f"({when}): what was written after the read is not in the tables; recorded "
                    "in the rejected table"
                )

    try:
        while query.isActive:
            query.awaitTermination(0.5)
            drain_progress()
            if stop is not None and stop.requested:
                if stop.abandon or not query.status.get("isTriggerActive"):
                    query.stop()
                elif not waiting:
                    waiting = True
                    emit(
                        f"{stop.name}: stopping after the batch in flight "
                        "(send it again to abandon that batch)"
                    )
                continue
            if poll is not None:
                poll()
            enough = stop_after_batches is not None and done >= stop_after_batches
            if enough:
                query.stop()
    except KeyboardInterrupt:
        emit("stopping...")
        query.stop()
    except Exception:
        if query.exception() is None:
            raise  # not the query's failure (reported below)
    drain_progress()
    err = query.exception()
    if err is not None and stop is not None and stop.requested:
        first = first_line(err)
        emit(f"{stop.name}: the batch in flight was abandoned ({first}); the next run replays it")
        return
    if err is not None:
        refused = _REFUSED.search(str(err))
        if refused:  # a table source's refusal, a pane value out of range
            raise _REFUSALS[refused.group(1)](refused.group(2).strip()) from None
        unreadable = _UNREADABLE.search(str(err))
        if unreadable:
            causes = [c for c in _CAUSE.findall(str(err)) if "FAILED_READ_FILE" not in c]
            raise RuntimeError(
                f"input file {unreadable.group(1)} could not be read"
                f"{f' ({causes[0].strip()})' if causes else ''}; nothing of its batch was "
                "committed. Repair the file, or move it out of the landing directory (the next "
                "run then records it in the rejected table), and run again"
            ) from None
        raise RuntimeError(f"the streaming query failed: {python_error(str(err))}") from None


# What a task refuses to do, inside Spark's error (a Python trace): a table source's refusal
# (another table at the path; a Delta source's change commit or lost version), a pane whose
# value does not fit the pane log, or whose accumulator has no text
_REFUSALS: dict[str, type[LakeError]] = {
    e.__name__: e
    for e in (
        UpstreamChanged,
        SourceTableError,
        SourceTableChanged,
        PaneValueOutOfRange,
        AccumulatorNotStorable,
    )
}
_REFUSED = re.compile(rf"({'|'.join(_REFUSALS)}): ([^\n]+)")
# Spark's error for an input file it cannot read (corrupt, truncated, not of the format, ...)
_CAUSE = re.compile(r"Caused by: [\w.$]+: ([^\n]+)")
_UNREADABLE = re.compile(
    r"\[FAILED_READ_FILE[^\]]*\] Encountered error while reading file (\S+?)\.?\s"
)


def python_error(text: str) -> str:
    r"""The one line that says what failed in Spark's error ``text``: the last exception line
    (``Name: message``) of the last Python traceback in it (an error raised in a Python worker,
    whichever), else its first line; ``panestore run -v`` leaves Spark's traces on stderr.

    >>> python_error("org.apache.spark.SparkException: Job aborted\nTraceback (most recent "
    ...     "call last):\n  File \"w.py\", line 3, in f\n    g()\nValueError: bad\n\tat x")
    'ValueError: bad'
    """
    found, in_trace = None, False
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_trace = True
        elif in_trace and line and not line[0].isspace():
            found, in_trace = line.strip(), False
    if found is None:
        found = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return found[:2000]


WRITERS_POLL_S = 2.0
"""``--follow`` with ``writer_noted``: how often the writers' watermark is recomputed."""


def _record_writers(
    spark: SparkSession,
    pipeline: Pipeline,
    emit: Callable[[str], Any],
    said: set[str],
    *,
    quiet: bool = False,
) -> bool:
    """Record the writers' watermark (:mod:`jobs.driver.writers_watermark`; of each input whose
    writers note it) and report it (``quiet``: only when it moved) and each new warning; True
    when one moved."""
    moved = False
    for one in noted_inputs(pipeline):
        adv = record_writers_watermark(spark, pipeline, one=one)
        for warning in adv.warnings:
            if warning not in said:
                said.add(warning)
                emit(f"WARNING {warning}")
        if adv.watermark_ms is not None or not quiet:
            emit(adv.line())
        moved |= adv.watermark_ms is not None
    return moved


def _writers_poll(
    spark: SparkSession, pipeline: Pipeline, emit: Callable[[str], Any], said: set[str]
) -> Callable[[], None]:
    """A ``poll`` for ``--follow``: records the writers' watermark every WRITERS_POLL_S, so an
    idle writer stops holding it even while no data arrives (its control row makes a batch)."""
    last = [0.0]

    def poll() -> None:
        if time.monotonic() - last[0] >= WRITERS_POLL_S:
            last[0] = time.monotonic()
            _record_writers(spark, pipeline, emit, said, quiet=True)

    return poll


def _shuffle_partitions(spark: SparkSession) -> int | None:
    """The session's shuffle partitions (what a new lake's shards are), or None if not a
    number."""
    value = spark.conf.get("spark.sql.shuffle.partitions")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _table_versions(pipeline: Pipeline, sink: BatchSink) -> dict[str, int | None]:
    """The versions of the lake's tables a run's record holds (the view's too)."""
    from sinks.lake import existing_table

    view = existing_table(view_spec(pipeline), "current")
    return {**sink.table_versions(), "current": None if view is None else view.version()}


def _compact(
    pipeline: Pipeline, sink: BatchSink, result: RunResult, emit: Callable[[str], Any]
) -> None:
    """After the run's batches (a ``--follow`` run's: after each batch that committed), under
    its lock: compact the tables it wrote whose small files passed the threshold
    (:func:`sinks.upkeep.compaction.compact_after_run`), reporting each (a failure as a warning: the
    run goes on)."""
    from sinks.upkeep import compact_after_run

    compacting = time.monotonic()
    try:
        done = compact_after_run(view_spec(pipeline), sink.written_tables())
    except Exception as e:  # an unreadable log: the run's batches are committed all the same
        why = first_line(e)
        emit(f"WARNING compaction skipped ({why}); nothing was lost: it runs again next time")
        return
    finally:
        result.add_phase("compact", time.monotonic() - compacting)
    result.compactions += done
    for c in done:
        emit(c.line())


def _vacuum(pipeline: Pipeline, result: RunResult, emit: Callable[[str], Any]) -> None:
    """After the run's compaction, under its lock: vacuum the tables it writes whose last
    vacuum is more than a day ago (:func:`sinks.upkeep.auto_vacuum.vacuum_after_run`), reporting
    each (a failure as a warning: the run goes on)."""
    from sinks.upkeep import vacuum_after_run

    vacuuming = time.monotonic()
    done = vacuum_after_run(view_spec(pipeline))
    if done:
        result.add_phase("vacuum", time.monotonic() - vacuuming)
    result.vacuums += done
    for v in done:
        emit(v.line())


def _clean_control(pipeline: Pipeline, emit: Callable[[str], Any]) -> None:
    """After the run's queries: delete the control files its batches took
    (:func:`jobs.driver.control.clean_control`); a failure is a warning, the run goes on."""
    try:
        clean_control(pipeline)
    except (OSError, ValueError, KeyError) as e:  # an unreadable log or folder
        emit(f"WARNING control files not cleaned ({e}); they are cleaned after the next run")


def spark_interval(us: int) -> str:
    """A ``--follow`` run's batch interval (µs) as Spark's processing-time trigger takes it.

    >>> spark_interval(10_000_000)
    '10000 milliseconds'
    """
    return f"{max(us // 1000, 0)} milliseconds"


def run(
    pipeline: Pipeline,
    *,
    spark: SparkSession | None = None,
    follow: bool = False,
    drain: bool = False,
    interval: str = "10 seconds",
    records: DataFrame | None = None,
    progress: TextIO | None = sys.stderr,
    stop_after_batches: int | None = None,
    kill_at: Sequence[tuple[str, int]] = (),
    profile_dir: str | None = None,
    stop: StopRequest | None = None,
    session: SessionOptions | None = None,
    describe: bool = False,
    fold: bool = False,
) -> RunResult:
    """Run ``pipeline`` once (see the module doc); returns what each batch did.

    Holds the lake's run lock (:class:`sinks.lake.lock.LakeLock`) throughout: a second run of the
    same lake while this one lives raises :class:`sinks.lake.errors.LakeBusy` and writes nothing.
    Under it, the run's checks run once (:func:`jobs.driver.preflight.check_run`), before Spark
    starts when the run starts its own session (``spark`` None: as ``session`` says, by default a
    local one). A stop
    requested in ``stop`` (by default, and on the main thread, SIGINT or SIGTERM during the run:
    :func:`jobs.driver.stopping.stop_on_signals`) ends the run after the batch in flight, skipping
    its remaining queries (tick, writers' watermark, drain); ``stopped_by`` of the result names the
    signal. Developer aids: ``kill_at`` SIGKILLs the job at ``(point, batch id)`` pairs
    (:func:`jobs.driver.batch_sink.kill`); ``profile_dir`` profiles the operator's tasks into that
    directory. ``describe``: print the pipeline's description to ``progress`` once the checks have
    passed. ``fold``: fold the pane log into the view as the run's last step (:func:`fold_view`),
    under its lock and in its record: a fold that fails fails the run (:class:`FoldFailed`).
    """
    if follow and drain:
        raise ValueError("--follow and --drain exclude each other (a drain ends the input)")
    drain = drain or pipeline.source.bounded
    started = time.monotonic()
    result = RunResult()
    # a session this run starts (none was running in the process) it may end before its fold
    own_session = spark is None and existing_session() is None

    def emit(line: str) -> None:
        if progress is not None:
            stamp = dt.datetime.now().strftime("%H:%M:%S")
            print(f"[{stamp}] {pipeline.name}: {line}", file=progress, flush=True)

    check_before_lock(pipeline)
    lock = LakeLock(
        pipeline.lake_location,
        "run",
        f"another run of pipeline {pipeline.name!r}",
        single_writer=pipeline.single_writer,
    )
    with lock, contextlib.ExitStack() as scope:
        scope.enter_context(shared_snapshots())  # each table's log read once a run
        starting: StartingSession | None = None
        if spark is None:  # every check before Spark starts
            options = session or SessionOptions(f"panestore-{pipeline.name}")
            checked = check_run(pipeline, options.shuffle_partitions)
            # the JVM starts (seconds) while the run prepares what needs no Spark
            starting = dataclasses.replace(options, checkpoint=pipeline.run_location).start_soon()
            scope.callback(starting.wait)  # a run failing before it takes its session
        else:
            checked = check_run(pipeline, _shuffle_partitions(spark))
        # from here on the run is in the lake's run history, however it ends
        mode = "follow" if follow else "drain" if drain else "scheduled"
        recorded = scope.enter_context(recording(pipeline, result, mode, emit))
        preparing = time.monotonic()
        state = checked.state
        sink = BatchSink(pipeline, kill_at=kill_at, shards=state.shards, profile_dir=profile_dir)
        sink.create_tables()
        recorded.versions = functools.partial(_table_versions, pipeline, sink)
        prepared = time.monotonic() - preparing  # (while the session started)
        if starting is not None:
            spark = starting.result()
            result.add_phase("session", time.monotonic() - started)
            if stop is not None and threading.current_thread() is threading.main_thread():
                listen_again(stop)  # the caller's handlers (a session may replace them)
        result.add_phase("prepare", prepared)
        assert spark is not None
        if describe and progress is not None:
            print(pipeline.describe(), file=progress, flush=True)
        if stop is None and threading.current_thread() is threading.main_thread():
            stop = scope.enter_context(stop_on_signals())  # after the session: see its doc

        def after_batch(stats: BatchStats) -> None:
            """In the sink, before Spark's commit entry of the batch: the run's note counts it;
            a ``--follow`` run (it may never end) compacts after each batch that committed."""
            recorded.batch_done(stats)
            if follow and stats.committed:
                _compact(pipeline, sink, result, emit)
                _vacuum(pipeline, result, emit)

        sink.on_batch = after_batch

        def start_python_workers() -> None:
            """After the build, while the query starts (:func:`start_workers`; once per
            Spark application)."""
            workers = start_workers(spark)
            if workers is not None:
                scope.callback(workers.join)

        run_query = functools.partial(
            _run_query,
            spark,
            pipeline,
            sink,
            result,
            emit,
            follow=follow,
            interval=interval,
            records=records,
            checked=checked,
            stop_after_batches=stop_after_batches,
            built=start_python_workers,
            stop=stop,
        )
        said: set[str] = set()  # writer_noted warnings already reported

        def stopped() -> bool:
            return stop is not None and stop.requested

        if note_changes(pipeline):  # a batch records them: make sure one runs
            write_tick(pipeline)
        writers = follow and bool(noted_inputs(pipeline))
        poll = _writers_poll(spark, pipeline, emit, said) if writers else None
        run_query(poll=poll)
        record_writers = not follow and not stopped() and bool(noted_inputs(pipeline))
        if record_writers and _record_writers(spark, pipeline, emit, said):
            # the writers' watermark, a control row, moves Spark's after one more batch
            run_query()
        if drain and not stopped():
            emit("drain: moving the watermark to the end of time")
            write_drain_sentinel(pipeline)
            run_query()
        if not stopped():
            if result.committed():
                _compact(pipeline, sink, result, emit)
            _vacuum(pipeline, result, emit)
            _clean_control(pipeline, emit)
        result.seconds = time.monotonic() - started
        if stop is not None and stop.requested:
            result.stopped_by = stop.name
            undrained = "; the drain did not run: run again with --drain" if drain else ""
            emit(f"stopped on {stop.name}{undrained}")
        emit(result.summary())
        if fold:
            fold_spark: SparkSession | None = spark
            if own_session and not spread_pays(spark):  # the fold needs no Spark: the
                end_session_soon()  # session ends (its JVM, its workers) while the fold runs
                fold_spark = None
            fold_view(pipeline, result, emit, spark=fold_spark)
        return result


class FoldFailed(Exception):
    """The fold at the end of a run failed (its batches are committed; the view is as the last
    fold left it, and ``panestore status`` says so): the fold's error on one line."""


def said_batches(ids: Sequence[int]) -> str:
    """``batches 3..5`` / ``batch 3`` / ``batches 3, 5``: batch ids as a reader says them.

    >>> said_batches([3, 4, 5]), said_batches([3]), said_batches([3, 5])
    ('batches 3..5', 'batch 3', 'batches 3, 5')
    """
    if len(ids) == 1:
        return f"batch {ids[0]}"
    if list(ids) == list(range(ids[0], ids[0] + len(ids))):
        return f"batches {ids[0]}..{ids[-1]}"
    return "batches " + ", ".join(map(str, ids))


def fold_view(
    pipeline: Pipeline,
    result: RunResult,
    emit: Callable[[str], Any],
    *,
    spark: SparkSession | None = None,
) -> None:
    """Fold what the run appended into ``current`` (``result.folded``), saying what it did; a
    fold too large for one piece goes over ``spark``'s executors when they are a cluster's
    (:mod:`jobs.driver.fold_spread`).

    Another materializer holding the lake's materializer lock is not an error of the run: its
    batches are committed and the next ``panestore materialize`` folds them; that is said. Any
    other failure raises :class:`FoldFailed` with the fold's error on one line.
    """
    from jobs.config.sink_spec import view_spec
    from jobs.driver.fold_spread import SparkSpread
    from sinks.fold import Materializer
    from sinks.lake import MaterializerBusy

    spread = SparkSpread(spark) if spark is not None and spread_pays(spark) else None
    try:
        result.folded = Materializer(view_spec(pipeline), spread=spread).run()
    except MaterializerBusy as e:
        holder = str(e).split(". Nothing was written")[0]  # the lock's refusal, as to a fold
        committed = result.committed()
        what = f"run committed {said_batches(committed)}" if committed else "run committed no batch"
        emit(
            f"{what}; the fold was skipped: {holder}; the next `panestore materialize` folds "
            f"{'them' if committed else 'what the pane log holds'}"
        )
        return
    except Exception as e:
        raise FoldFailed(f"materialize: {one_line(e, limit=2000)}") from e
    emit(result.folded.line())
