"""The lake's run history: the ``runs`` Delta table, one row per run of the pipeline.

A run (:func:`jobs.driver.runs.run`) appends its row once, as it ends: succeeded, failed (with
its error on one line) or stopped by a signal; a run killed before it could write its row is
recorded by the next run, from the note the killed run left (:mod:`jobs.driver.run_record`), as
``killed``. A row holds what the run did (batches, records, panes by timing, late and rejected
records), the watermark before and after it, and the versions of the tables when it ended.

The table is the lake's, next to ``panes``, ``current``, ``late`` and ``rejected``: DuckDB reads
it as ``runs`` (``panestore query CONF "SELECT ... FROM runs"``), and :func:`read_runs` gives
its rows as :class:`RunRecord` values. Each append is one Delta commit whose metadata names the
run (``panestore.runId``); :func:`append_run` skips a run already in the table, so writing a
run's row twice (a killed run recorded by two later runs, say) adds it once.

>>> import tempfile
>>> from panes import AccumulationMode, FixedWindows
>>> from panes.combiners import count
>>> spec = ViewSpec("clicks", tempfile.mkdtemp(), ("user",), (("n", count()),),
...     FixedWindows(60_000_000), AccumulationMode.DISCARDING)
>>> record = RunRecord(run_id="r1", pipeline="clicks", started_us=1_000_000,
...     ended_us=3_500_000, outcome=SUCCEEDED, batches=1, records=10, panes=2, on_time=2)
>>> append_run(spec, record), append_run(spec, record)
(True, False)
>>> [(r.run_id, r.outcome, r.seconds, r.panes) for r in read_runs(spec)]
[('r1', 'succeeded', 2.5, 2)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from sinks.lake.lake_format import (
    RUNS,
    TIMESTAMP_TYPE,
    check_format,
    representable_us,
)
from sinks.lake.spec import ViewSpec

SUCCEEDED, FAILED, STOPPED, KILLED = "succeeded", "failed", "stopped", "killed"
OUTCOMES = (SUCCEEDED, FAILED, STOPPED, KILLED)
"""How a run ended: every batch it started committed and it exited; it raised (``error``); a
signal stopped it after the batch in flight; the process died without recording its end (a
kill, a crash of the machine): recorded by the next run."""

RUN_ID_METADATA = "panestore.runId"

TIMING_FIELDS = {"EARLY": "early", "ON_TIME": "on_time", "LATE": "late_panes"}
"""The run history's column of each pane timing (the pane log's ``timing``)."""


@dataclass(frozen=True)
class Figures:
    """What the run history counts of a batch, and sums over the batches a run counts (the
    ``runs`` table's columns of the same names): ``records`` the input records the batch took
    (each became an element, a late record or a rejected one), ``panes`` its rows of the pane
    log (by timing: ``early``, ``on_time``, ``late_panes``; retractions included, and counted in
    ``retractions``), ``late`` and ``rejected`` its rows of those tables."""

    records: int = 0
    panes: int = 0
    early: int = 0
    on_time: int = 0
    late_panes: int = 0
    retractions: int = 0
    late: int = 0
    rejected: int = 0
    #: A pipeline of several inputs: of ``records``, each input's (by name; empty otherwise).
    records_by_input: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        *,
        records: int = 0,
        panes: int = 0,
        by_timing: Mapping[str, int] | None = None,
        retractions: int = 0,
        late: int = 0,
        rejected: int = 0,
        records_by_input: Mapping[str, int] | None = None,
    ) -> Figures:
        """The figures of a batch whose panes are counted ``by_timing`` (``EARLY``, ``ON_TIME``,
        ``LATE``: :data:`TIMING_FIELDS`)."""
        timings = dict(by_timing or {})
        unknown = set(timings) - set(TIMING_FIELDS)
        if unknown:
            raise ValueError(f"unknown pane timings {sorted(unknown)}")
        return cls(
            records=records,
            panes=panes,
            retractions=retractions,
            late=late,
            rejected=rejected,
            records_by_input=dict(records_by_input or {}),
            **{TIMING_FIELDS[t]: n for t, n in timings.items()},
        )

    def __add__(self, other: Figures) -> Figures:
        summed: dict[str, Any] = {}
        for f in fields(Figures):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "records_by_input":
                names = [*mine, *(n for n in theirs if n not in mine)]
                summed[f.name] = {n: mine.get(n, 0) + theirs.get(n, 0) for n in names}
            else:
                summed[f.name] = mine + theirs
        return Figures(**summed)


def batch_figures(tables: Mapping[str, Any], batch_id: int) -> Figures:
    """What ``tables`` (``deltalake.DeltaTable`` handles by name: any of ``panes``, ``late``,
    ``rejected``) hold of batch ``batch_id``: its rows in each, its panes by timing and
    retractions (``records`` 0: no table holds the input). Reads that batch's rows only, from
    the files whose statistics admit its id."""
    import pyarrow.dataset as ds

    from sinks.lake.pane_log import pane_figures

    of_batch = ds.field("batch_id") == batch_id
    found = Figures()
    for name, table in tables.items():
        if name not in ("panes", "late", "rejected"):
            raise ValueError(f"the run history counts no rows of table {name!r}")
        columns = ["timing", "is_retraction"] if name == "panes" else ["batch_id"]
        rows = table.to_pyarrow_dataset().to_table(columns=columns, filter=of_batch)
        if name == "panes":
            by_timing, retractions = pane_figures(rows)
            found += Figures.of(panes=rows.num_rows, by_timing=by_timing, retractions=retractions)
        else:
            found += Figures(**{name: rows.num_rows})
    return found


@dataclass(frozen=True)
class RunRecord:
    """One run of a pipeline: a row of the ``runs`` table.

    Times are µs since 1970 (UTC); the table holds them as timestamps (``started``, ``ended``,
    ``watermark_before``, ``watermark_after``). ``ended_us`` of a killed run is the last moment
    it was seen alive (its last noted batch, else its start). The counts (:class:`Figures`,
    :attr:`figures`) are those of the batches the run counts: each batch is counted in one row,
    the first run's that noted it (:mod:`jobs.driver.run_record`). ``batches``: the batches it
    ran, ``replayed`` of them already committed to every table by a killed run (skipped). The
    ``*_version`` fields: each table's Delta version when it ended (None: not known).
    ``records_by_input``: a pipeline of several inputs' ``records`` by input (the table's
    ``records_by_input`` map; empty, and null in the table, for one input)."""

    run_id: str
    pipeline: str
    started_us: int
    ended_us: int | None
    outcome: str
    error: str | None = None
    mode: str = "scheduled"  # scheduled, follow or drain
    host: str | None = None
    pid: int | None = None
    batches: int = 0
    replayed: int = 0
    first_batch_id: int | None = None
    last_batch_id: int | None = None
    records: int = 0
    panes: int = 0
    early: int = 0
    on_time: int = 0
    late_panes: int = 0
    retractions: int = 0
    late: int = 0
    rejected: int = 0
    records_by_input: Mapping[str, int] = field(default_factory=dict)
    watermark_before_us: int | None = None
    watermark_after_us: int | None = None
    panes_version: int | None = None
    late_version: int | None = None
    rejected_version: int | None = None
    current_version: int | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def figures(self) -> Figures:
        """What it counted (:class:`Figures`)."""
        return Figures(**{f.name: getattr(self, f.name) for f in fields(Figures)})

    @property
    def seconds(self) -> float | None:
        """How long it ran (None: its end is not known)."""
        if self.ended_us is None:
            return None
        return (self.ended_us - self.started_us) / 1e6


_INT = pa.int64()
_TIMES = {  # record field -> table column (a timestamp)
    "started_us": "started",
    "ended_us": "ended",
    "watermark_before_us": "watermark_before",
    "watermark_after_us": "watermark_after",
}
_TYPES: dict[str, pa.DataType] = {
    "records_by_input": pa.map_(pa.string(), pa.int64()),
    "run_id": pa.string(),
    "pipeline": pa.string(),
    "outcome": pa.string(),
    "error": pa.string(),
    "mode": pa.string(),
    "host": pa.string(),
}
_NOT_NULL = frozenset({"run_id", "pipeline", "started", "outcome"})


def _columns() -> list[tuple[str, str, pa.DataType]]:
    """(record field, column, type) of each column, in the record's order, ``seconds`` after
    ``ended``."""
    out = []
    for f in fields(RunRecord):
        column = _TIMES.get(f.name, f.name)
        out.append(
            (f.name, column, TIMESTAMP_TYPE if f.name in _TIMES else _TYPES.get(f.name, _INT))
        )
        if f.name == "ended_us":
            out.append(("seconds", "seconds", pa.float64()))
    return out


RUNS_SCHEMA = pa.schema(
    [pa.field(column, t, nullable=column not in _NOT_NULL) for _, column, t in _columns()]
)
"""The ``runs`` table's columns (documented in ``docs/operations.md``)."""


def _row(record: RunRecord) -> dict[str, Any]:
    row = {}
    for name, column, _ in _columns():
        value = getattr(record, name)
        if name == "records_by_input":
            value = list(value.items()) or None
        row[column] = representable_us(value) if name in _TIMES else value
    return row


def _records(table: pa.Table) -> list[RunRecord]:
    """The rows of ``table`` (the ``runs`` table's columns) as records: the timestamps as µs
    (cast in Arrow, not through ``datetime``), columns the record does not know left out."""
    names = {f.name for f in fields(RunRecord)}
    columns = {}
    for name, column, _ in _columns():
        if name not in names or column not in table.column_names:
            continue
        values = table.column(column)
        columns[name] = values.cast(pa.int64()) if name in _TIMES else values
    rows = pa.table(columns).to_pylist()
    for row in rows:  # a map reads back as (key, value) pairs; null for one input
        if "records_by_input" in row:
            row["records_by_input"] = dict(row["records_by_input"] or ())
    return [RunRecord(**row) for row in rows]


def _table(spec: ViewSpec, *, create: bool):
    """The ``runs`` table (created when ``create``; None when missing and not created)."""
    from deltalake import DeltaTable

    from sinks.lake.tables import existing_table, table_properties

    path = spec.table_path(RUNS)
    dt = existing_table(spec, RUNS)  # a run's shared snapshot when it has one
    if dt is None and create:
        dt = DeltaTable.create(
            path,
            RUNS_SCHEMA,
            mode="ignore",
            configuration=table_properties(spec, RUNS),
            raise_if_key_not_exists=False,
            storage_options=dict(spec.storage_options) if spec.storage_options else None,
        )
    if dt is not None:
        check_format("runs table", path, dt.metadata().configuration)
    return dt


def recorded_run_ids(spec: ViewSpec) -> set[str]:
    """The ids of the runs the table holds (empty: no table yet)."""
    dt = _table(spec, create=False)
    if dt is None:
        return set()
    return set(dt.to_pyarrow_table(columns=["run_id"]).column("run_id").to_pylist())


def last_batch_recorded(spec: ViewSpec) -> int | None:
    """The highest ``last_batch_id`` of the table's rows (None: no row ran a batch). Every batch
    up to it is counted in a row: a later run that replays one of them counts it in
    ``batches`` and ``replayed`` only (:mod:`jobs.driver.run_record`)."""
    import pyarrow.compute as pc

    dt = _table(spec, create=False)
    if dt is None:
        return None
    ids = dt.to_pyarrow_table(columns=["last_batch_id"]).column("last_batch_id")
    return pc.max(ids).as_py()


def append_run(spec: ViewSpec, record: RunRecord, *, check_recorded: bool = True) -> bool:
    """Append ``record``'s row to the lake's ``runs`` table (created on first use); False (and
    nothing written) when that run is already recorded. ``check_recorded=False`` skips reading
    the recorded ids, for a writer that knows the run is new (a run recording its own end)."""
    from deltalake import CommitProperties, write_deltalake

    dt = _table(spec, create=True)
    if check_recorded and record.run_id in recorded_run_ids(spec):
        return False
    table = pa.Table.from_pylist([_row(record)], schema=RUNS_SCHEMA)
    props = CommitProperties(custom_metadata={RUN_ID_METADATA: record.run_id})
    # a table written before a column of RUNS_SCHEMA existed gains it (null in its rows)
    older = set(RUNS_SCHEMA.names) - {f.name for f in dt.schema().fields}
    write_deltalake(
        dt, table, mode="append", commit_properties=props, schema_mode="merge" if older else None
    )
    return True


def read_runs(
    spec: ViewSpec, *, last: int | None = None, since_us: int | None = None
) -> list[RunRecord]:
    """The recorded runs, oldest first: all, or the newest ``last`` and those started at or
    after ``since_us`` (µs), when either is given; empty when the lake has no run history yet.
    Only the rows returned are turned into records (a year of 5-minute runs is 100,000 rows)."""
    dt = _table(spec, create=False)
    if dt is None:
        return []
    table = dt.to_pyarrow_table().sort_by([("started", "ascending")])
    if last is not None or since_us is not None:
        keep = table.num_rows - max(last or 0, 0)
        if since_us is not None:
            import pyarrow.compute as pc

            started = table.column("started").cast(pa.int64())
            keep = min(
                keep, table.num_rows - int(pc.sum(pc.greater_equal(started, since_us)).as_py() or 0)
            )
        table = table.slice(max(keep, 0))
    return _records(table)
