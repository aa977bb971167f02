"""A pipeline's input records as the batch check's elements (``sinks.verify``), read with DuckDB.

The job reads its source with Spark; this module re-reads it independently (the landing files
with DuckDB, a Delta table's commits with pyarrow, or an Arrow table of the same events the
caller gives), to compute the pipeline's results as one batch and compare them with the view
(``panestore verify``).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config.event_time import EPOCH_UNITS, accepted, event_time_us
from jobs.config.pipeline import Pipeline
from jobs.config.sink_spec import view_spec
from jobs.executor.operator_input import TS_US
from jobs.sources.files.paths import duckdb_literal
from jobs.sources.files.paths import landing_files as input_files
from jobs.sources.pane_log.identity import check_upstream
from jobs.sources.pane_log.upstream import final_view_elements
from sinks.batch_check import VALUE, value_fields
from sinks.column_types import INTEGRAL, TYPES
from sinks.duck import raw_connect
from sinks.errors import LakeError


def landing_files(path: str) -> list[str]:
    """The input files under ``path``, sorted: the files the job reads (every depth, hidden
    names left out at every level: :func:`jobs.config.landing_paths.landing_files`)."""
    if not os.path.isdir(path):
        raise LakeError(f"landing zone {path} not found")
    files = input_files(path)
    if not files:
        raise LakeError(f"no input files in {path}")
    return sorted(files)


def reader_sql(pipeline: Pipeline, files: list[str]) -> str:
    """The DuckDB table function reading ``files`` in the source's format and schema, the event
    time of text formats as text (as the job reads it: :func:`jobs.config.event_time.event_time_us`
    reads it afterwards). Malformed records are skipped (the job rejects them too)."""
    src = pipeline.source

    def duckdb_type(column: str, type_name: str) -> str:
        return "VARCHAR" if column == pipeline.event_time else TYPES[type_name].duckdb

    cols = "{" + ", ".join(f"'{c}': '{duckdb_type(c, t)}'" for c, t in src.schema) + "}"
    # each file literally: DuckDB would read a name holding [, * or ? as a glob pattern
    try:
        literal = [duckdb_literal(f) for f in files]
    except ValueError as e:
        raise LakeError(str(e)) from None
    flist = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in literal) + "]"
    if src.format == "jsonl":
        return f"read_json({flist}, format='newline_delimited', columns={cols}, ignore_errors=true)"
    if src.format == "csv":
        return (
            f"read_csv({flist}, header={str(src.csv_header).lower()}, "
            f"delim='{src.csv_delimiter}', columns={cols}, ignore_errors=true)"
        )
    return f"read_parquet({flist})"


RAW_EVENT_TIME = "pst_event_time"


def source_elements_are(pipeline: Pipeline) -> str:
    """What :func:`load_source_elements` reads, as ``panestore verify`` names it."""
    up = pipeline.source.upstream
    if up is not None:
        return f"the final windows of {up.name} (its current view)"
    return "accepted raw events"


def load_source_elements(pipeline: Pipeline, events: pa.Table | None = None) -> pa.Table:
    """The pipeline's input records as an elements table: key columns, the value columns the
    aggregates read, ``ts_us``.

    ``events``: the records as an Arrow table (a batch DataFrame of the same events as the
    pipeline's stream, ``DataFrame.toArrow()``); without it they are read from the source: the
    landing directory's files (DuckDB), the Delta table's rows from the starting version to its
    newest (:func:`sinks.delta_source.plan_range`, as the stream reads them). A ``dataframe``
    source has nothing to read: it needs ``events``.

    For a pipeline over another pipeline's pane log, the elements are the upstream's current
    view (its final windows; materialize the upstream first):
    :func:`sinks.upstream.final_view_elements`; refused with
    :class:`sinks.errors.UpstreamChanged` if the upstream is not the table the pipeline has read
    (rebuilt since: its view is not what the pipeline's view was computed from).

    Records that the job rejects (a missing or empty key, a missing, unreadable or out of range
    event time, a value that does not cast to its type, a non-finite number; jobs.driver.plan)
    are left out. The event time is read by the job's own
    :func:`jobs.config.event_time.event_time_us`. Requires ``event_time`` (an ingestion-time
    pipeline's event time is the batch time, which the records do not hold).
    """
    if pipeline.source.upstream is not None and events is None:
        check_upstream(pipeline)
        upstream = pipeline.source.upstream
        wanted = [*pipeline.keys, *[c for c in pipeline.value_columns if c not in pipeline.keys]]
        return final_view_elements(upstream.view, wanted)
    if getattr(pipeline, "ingestion_time", False) or not pipeline.event_time:
        raise LakeError(
            "ingestion-time pipelines cannot be checked against raw events: their "
            "event time is the batch time, not in the records"
        )
    if events is None and pipeline.source.is_dataframe:
        raise LakeError(
            "the source is a DataFrame: give the batch check a batch DataFrame of the same "
            "events (jobs.api.verify(pipeline, events=...))"
        )
    if events is None and pipeline.source.is_delta:
        events = _delta_rows(pipeline)
    spec = view_spec(pipeline)
    et = pipeline.event_time
    types = pipeline.source.types
    con = raw_connect()
    try:
        if events is None:
            reader = reader_sql(pipeline, landing_files(pipeline.source.path))
            given: dict[str, pa.DataType] = {}
        else:
            con.register("source_events", events)
            reader = "source_events"
            given = {f.name: f.type for f in events.schema}

        def typed(column: str) -> str:
            """The column in its schema type: a given table's other type converted as the job
            converts it (:func:`jobs.driver.plan._typed`), null where it does not exactly:
            text by its form, another type only if the value is the same in both types."""
            wanted = TYPES[types[column]]
            name = f'"{column}"'
            if column not in given or given[column] == wanted.arrow:
                return name
            converted = f"TRY_CAST({name} AS {wanted.duckdb})"
            if pa.types.is_string(given[column]) or pa.types.is_large_string(given[column]):
                if types[column] in INTEGRAL:  # DuckDB would round "1.5"; Spark refuses it
                    form = f"regexp_matches(trim({name}), '^[+-]?[0-9]+$')"
                    return f"CASE WHEN {form} THEN {converted} END"
                return converted
            if pa.types.is_timestamp(given[column]):
                return converted
            return f"CASE WHEN {converted} = {name} THEN {converted} END"

        vals = [f for f in value_fields(spec) if f != VALUE]
        sel = ", ".join(
            [
                *[f'{typed(k)} AS "{k}"' for k in spec.keys],
                *[f'{typed(v)} AS "{v}"' for v in vals],
                f'"{et}" AS {RAW_EVENT_TIME}',
            ]
        )
        accepted_sql = [f"{typed(k)} IS NOT NULL" for k in spec.keys]
        accepted_sql += [f"trim({typed(k)}) <> ''" for k in spec.keys if types[k] == "string"]
        accepted_sql += [f'("{v}" IS NULL OR {typed(v)} IS NOT NULL)' for v in vals]
        accepted_sql += [
            f'("{v}" IS NULL OR isfinite({typed(v)}))'
            for v in pipeline.value_columns
            if types[v] in ("double", "float")
        ]
        table = con.sql(f"SELECT {sel} FROM {reader} WHERE {' AND '.join(accepted_sql)}")
        table = table.to_arrow_table()
    finally:
        con.close()
    epoch_us = EPOCH_UNITS[pipeline.source.epoch_unit] if types[et] != "timestamp" else None
    us = event_time_us(table.column(RAW_EVENT_TIME), epoch_us=epoch_us)
    table = table.drop_columns([RAW_EVENT_TIME]).append_column(TS_US, us)
    table, readable = _timestamps_read(table, [c for c in table.column_names if c in types], types)
    return table.filter(pc.and_(accepted(us), readable))


def _timestamps_read(
    table: pa.Table, columns: list[str], types: dict[str, str]
) -> tuple[pa.Table, pa.Array]:
    """``table`` with its ``timestamp`` columns read as the job reads them when they are text
    (:func:`jobs.config.event_time.event_time_us`: UTC without a zone), and the mask of the rows
    whose text was readable (the job rejects the others)."""
    readable = pa.array([True] * table.num_rows, pa.bool_())
    for name in columns:
        column = table.column(name)
        if types[name] != "timestamp" or not pa.types.is_string(column.type):
            continue
        us = event_time_us(column, epoch_us=None)
        readable = pc.and_(readable, pc.or_(pc.is_null(column), pc.is_valid(us)))
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, us.cast(TYPES["timestamp"].arrow))
    return table, readable


def _delta_rows(pipeline: Pipeline) -> pa.Table:
    """The rows a ``delta`` source's stream reads, from its starting version to the table's
    newest: what every commit added (change commits stop it, or are skipped, as in the stream)."""
    from jobs.sources.delta_table.driver import check_source_table, starting_version, stored_columns
    from jobs.sources.delta_table.log import plan_range, read_files
    from jobs.sources.versions import head_at

    src = pipeline.source
    table = check_source_table(pipeline)
    files = plan_range(
        src.path,
        starting_version(pipeline) - 1,
        head_at(src.path).version,
        table=table,
        skip_change_commits=src.skip_change_commits,
    )
    columns = [(c, TYPES[t].arrow) for c, t in stored_columns(pipeline)]
    return read_files(src.path, files, columns)
