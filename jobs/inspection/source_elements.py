"""A pipeline's input records as the batch check's elements (``sinks.verification.view_check``),
read with DuckDB.

The job reads its source with Spark and the JSON-lines decoder; this module re-reads it
independently (the landing files with DuckDB, a Delta table's commits with pyarrow, or an Arrow
table of the same events the caller gives), to compute the pipeline's results as one batch and
compare them with the view (``panestore verify``). Event times (and text in ``timestamp``
columns) are read by DuckDB's own timestamp parser, gated by this module's own statement of the
accepted forms (:data:`ISO_FORM`, :data:`EPOCH_FORM`): none of the job's event-time code
(:mod:`jobs.config.event_time`) is used, so a misreading there shows as a difference.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config.event_time import EPOCH_UNITS, MAX_EVENT_TIME_US, MIN_EVENT_TIME_US
from jobs.config.pipeline import Pipeline
from jobs.config.sink_spec import view_spec
from jobs.executor.operator_input import TS_US
from jobs.sources.files.paths import duckdb_literal
from jobs.sources.files.paths import landing_files as input_files
from jobs.sources.pane_log.identity import check_upstream
from jobs.sources.pane_log.upstream import final_view_elements
from sinks.lake import INTEGRAL, TYPES, LakeError, column_type
from sinks.presentation import raw_connect
from sinks.verification import DEDUP_GROUP, VALUE, value_fields


def landing_files(path: str) -> list[str]:
    """The input files under ``path``, sorted: the files the job reads (every depth, hidden
    names left out at every level: :func:`jobs.sources.files.paths.landing_files`)."""
    if not os.path.isdir(path):
        raise LakeError(f"landing zone {path} not found")
    files = input_files(path)
    if not files:
        raise LakeError(f"no input files in {path}")
    return sorted(files)


def reader_sql(pipeline: Pipeline, files: list[str]) -> str:
    """The DuckDB table function reading ``files`` in the source's format and schema, the event
    time of text formats as text (:func:`event_time_sql` reads it). Malformed records are skipped
    (the job rejects them too)."""
    src = pipeline.source

    def duckdb_type(column: str, type_name: str) -> str:
        if column == pipeline.event_time or column_type(type_name).text_form is not None:
            return "VARCHAR"  # decimals and dates as text: DuckDB's casts round and are lenient
        return column_type(type_name).duckdb

    cols = "{" + ", ".join(f"'{c}': '{duckdb_type(c, t)}'" for c, t in src.schema) + "}"
    # each file literally: DuckDB would read a name holding [, * or ? as a glob pattern
    try:
        literal = [duckdb_literal(f) for f in files]
    except ValueError as e:
        raise LakeError(str(e)) from None
    flist = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in literal) + "]"
    if src.format == "jsonl":
        return _strict_json(pipeline, flist)
    if src.format == "csv":
        return (
            f"read_csv({flist}, header={str(src.csv_header).lower()}, "
            f"delim='{src.csv_delimiter}', columns={cols}, ignore_errors=true)"
        )
    return f"read_parquet({flist})"


_JSON_TYPES = {
    "VARCHAR": ("VARCHAR",),
    "BOOLEAN": ("BOOLEAN",),
    "DOUBLE": ("UBIGINT", "BIGINT", "DOUBLE"),
    "FLOAT": ("UBIGINT", "BIGINT", "DOUBLE"),
}
_JSON_INTEGERS = ("UBIGINT", "BIGINT")
_JSON_DECIMALS = ("UBIGINT", "BIGINT", "DOUBLE", "VARCHAR")
"""A decimal is a JSON number or string (docs/aggregates.md); DuckDB reads a JSON number
through a double: its text is exact only to ~15 significant digits."""


def _strict_json(pipeline: Pipeline, flist: str) -> str:
    """A DuckDB subquery reading JSON lines as the strict-JSON contract says (docs/sources.md):
    a record whose schema field is of another JSON type than its column's (a number for a
    string, text for a number, an integer beyond its column) is left out, as the job rejects it;
    the event time as text (a number's digits for an epoch column)."""
    src = pipeline.source
    epoch = src.types.get(pipeline.event_time or "") in INTEGRAL
    cols = "{" + ", ".join(f"'{c}': 'JSON'" for c, _ in src.schema) + "}"
    values, checks = [], []
    for c, t in src.schema:
        name = f'"{c}"'
        of_column = column_type(t)
        duck = "VARCHAR" if c == pipeline.event_time else of_column.duckdb
        allowed = _JSON_TYPES.get(duck, _JSON_INTEGERS)
        if c == pipeline.event_time and epoch:
            allowed = (*_JSON_INTEGERS, "VARCHAR")
        value = f"({name} ->> '$')" if duck == "VARCHAR" else f"TRY_CAST({name} AS {duck})"
        if c != pipeline.event_time and of_column.text_form is not None:
            allowed = _JSON_DECIMALS if of_column.numeric else ("VARCHAR",)
            duck, value = "VARCHAR", f"({name} ->> '$')"  # text, read by its form (typed)
        kinds = ", ".join(f"'{k}'" for k in allowed)
        checks.append(
            f"(coalesce(json_type({name}), 'NULL') = 'NULL' OR "
            f"(json_type({name}) IN ({kinds}) AND {value} IS NOT NULL))"
        )
        values.append(f"CASE WHEN json_type({name}) <> 'NULL' THEN {value} END AS {name}")
    reader = f"read_json({flist}, format='newline_delimited', columns={cols}, ignore_errors=true)"
    return f"(SELECT {', '.join(values)} FROM {reader} WHERE {' AND '.join(checks)})"


# The accepted event-time text forms (docs/sources.md), stated again here for DuckDB's regular
# expressions (RE2), apart from the job's jobs.config.event_time.FORMS.
_DATE = r"[0-9]{4,5}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_CLOCK = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_OFFSET = r"(Z|[+-](0[0-9]|1[0-7])(:?[0-5][0-9])?)"
ISO_FORM = f"{_DATE}([T ]{_CLOCK}{_OFFSET}?)?"
"""An ISO-8601 date-time (the whole text): a date, optionally a time and a zone."""
_MINUTES_AND_ZONE = r"^([0-9]{4,5}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2})([Z+-].*)?$"
EPOCH_FORM = r"[+-]?[0-9]{1,19}"
"""An epoch in text: an optional sign and digits."""


def event_time_sql(column: str, duckdb_type: str, epoch_us: int | None) -> str:
    """DuckDB SQL reading the SQL expression ``column`` (of DuckDB type ``duckdb_type``) as µs
    since 1970 UTC (a HUGEINT), null where it is not an accepted form (text trimmed of spaces
    first; without a zone, UTC: :func:`sinks.presentation.duck.raw_connect`'s time zone).
    ``epoch_us``: an epoch column's unit in µs (None: a timestamp column). Range checks are the
    caller's."""
    if duckdb_type.startswith("TIMESTAMP"):
        return f"epoch_us({column})"
    if duckdb_type != "VARCHAR":  # a number (a fraction cut towards zero, as Spark's cast)
        number = f"trunc({column})" if duckdb_type in ("DOUBLE", "FLOAT") else column
        return f"TRY_CAST({number} AS HUGEINT) * {epoch_us}" if epoch_us is not None else "NULL"
    text = f"trim({column}, ' ')"
    if epoch_us is not None:
        return (
            f"CASE WHEN regexp_full_match({text}, '{EPOCH_FORM}') "
            f"THEN TRY_CAST({text} AS HUGEINT) * {epoch_us} END"
        )
    # DuckDB reads HH:MM and a zone only with seconds: HH:MM:00
    seconds = f"regexp_replace({text}, '{_MINUTES_AND_ZONE}', '\\1:00\\2')"
    return (
        f"CASE WHEN regexp_full_match({text}, '{ISO_FORM}') "
        f"THEN epoch_us(TRY_CAST({seconds} AS TIMESTAMPTZ)) END"
    )


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
    :class:`sinks.lake.errors.UpstreamChanged` if the upstream is not the table the pipeline has
    read (rebuilt since: its view is not what the pipeline's view was computed from).

    Records that the job rejects (a missing or empty key, a missing, unreadable or out of range
    event time, a value that does not cast to its type, a non-finite number; jobs.driver.plan)
    are left out. The event time is read by DuckDB (:func:`event_time_sql`), not by the job's
    code. Requires ``event_time`` (an ingestion-time pipeline's event time is the batch time,
    which the records do not hold).
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
        described = {r[0]: r[1] for r in con.sql(f"DESCRIBE SELECT * FROM {reader}").fetchall()}

        def typed(column: str) -> str:
            """The column in its schema type: a given table's other type converted as the job
            converts it (:meth:`jobs.executor.record_rules.SparkRecords.typed`), null where it
            does not exactly: text by its form, another type only if the value is the same in
            both types."""
            wanted = column_type(types[column])
            name = f'"{column}"'
            converted = f"TRY_CAST({name} AS {wanted.duckdb})"
            held = given.get(column)
            text = described[column] == "VARCHAR" if held is None else _is_text(held)
            if text and wanted.text_form is not None:
                # a decimal's or date's text: the whole text of its form, else null (as the
                # job's tagging); DuckDB's cast would round 1.234 and read 2024-1-2
                form = f"regexp_full_match(trim({name}, ' '), '{wanted.text_form}')"
                return f"CASE WHEN {form} THEN TRY_CAST(trim({name}, ' ') AS {wanted.duckdb}) END"
            if held is None or held == wanted.arrow:
                return name
            if text:
                if types[column] in INTEGRAL:  # DuckDB would round "1.5"; Spark refuses it
                    form = f"regexp_matches(trim({name}), '^[+-]?[0-9]+$')"
                    return f"CASE WHEN {form} THEN {converted} END"
                return converted
            if pa.types.is_timestamp(held) and pa.types.is_timestamp(wanted.arrow):
                return converted
            return f"CASE WHEN {converted} = {name} THEN {converted} END"

        # (a filter's condition may read a key: it is read once, as the key)
        vals = [f for f in value_fields(spec) if f != VALUE and f not in spec.keys]
        epoch_us = EPOCH_UNITS[pipeline.source.epoch_unit] if types[et] != "timestamp" else None
        # timestamp keys and values, in µs: text read as an event time's text is
        stamps = {
            c: event_time_sql(f'"{c}"', described[c], None)
            for c in (*spec.keys, *vals)
            if types[c] == "timestamp"
        }

        def column(c: str) -> str:
            return f'{stamps[c] if c in stamps else typed(c)} AS "{c}"'

        us = event_time_sql(f'"{et}"', described[et], epoch_us)
        sel = ", ".join([*map(column, spec.keys), *map(column, vals), f"{us} AS {TS_US}"])
        accepted_sql = [f"{typed(k)} IS NOT NULL" for k in spec.keys]
        accepted_sql += [f"trim({typed(k)}) <> ''" for k in spec.keys if types[k] == "string"]
        accepted_sql += [f'("{v}" IS NULL OR {typed(v)} IS NOT NULL)' for v in vals]
        accepted_sql += [
            f'("{v}" IS NULL OR isfinite({typed(v)}))'
            for v in pipeline.value_columns
            if types[v] in ("double", "float")
        ]
        accepted_sql += [f'("{c}" IS NULL OR {sql} IS NOT NULL)' for c, sql in stamps.items()]
        order = ""
        if pipeline.dedup:
            group, order = _copies(pipeline, [typed(k) for k in spec.keys], typed, us, stamps)
            sel += f", {group}"
        table = con.sql(
            f"SELECT * FROM (SELECT {sel} FROM {reader} WHERE {' AND '.join(accepted_sql)}) "
            f"WHERE {TS_US} BETWEEN {MIN_EVENT_TIME_US} AND {MAX_EVENT_TIME_US}{order}"
        ).to_arrow_table()
    finally:
        con.close()
    at = table.schema.get_field_index(TS_US)
    table = table.set_column(at, TS_US, pc.cast(table.column(TS_US), pa.int64()))
    for c in stamps:
        at = table.schema.get_field_index(c)
        micros = pc.cast(table.column(c), pa.int64())
        table = table.set_column(at, c, micros.cast(TYPES["timestamp"].arrow))
    return table


def _is_text(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_)


def _copies(
    pipeline: Pipeline, keys: list[str], typed, us: str, stamps: dict[str, str]
) -> tuple[str, str]:
    """A deduplicated pipeline's copies, in DuckDB SQL (docs/running.md, "Duplicates"): the
    :data:`sinks.verification.batch_check.DEDUP_GROUP` column (records of one key and id, every id
    column typed and not null, share a number; a timestamp or the event time compared as µs) and the
    ``ORDER BY`` putting each group's copies in the order the job takes them: event time, then
    the value columns (null first)."""
    ids = []
    for c in pipeline.dedup:
        if c == pipeline.event_time:
            ids.append(us)
        elif c in stamps:
            ids.append(stamps[c])
        elif pipeline.source.types[c] == "timestamp":
            ids.append(f"epoch_us({typed(c)})")
        else:
            ids.append(typed(c))
    whole = " AND ".join(f"({i}) IS NOT NULL" for i in ids)
    rank = f"dense_rank() OVER (ORDER BY {', '.join([*keys, *ids])})"
    group = f"CASE WHEN {whole} THEN {rank} END AS {DEDUP_GROUP}"
    values = [f'"{v}" NULLS FIRST' for v in pipeline.value_columns]
    return group, f" ORDER BY {DEDUP_GROUP}, {', '.join([TS_US, *values])}"


def _delta_rows(pipeline: Pipeline) -> pa.Table:
    """The rows a ``delta`` source's stream reads, from its starting version to the table's
    newest: what every commit added (change commits stop it, or are skipped, as in the stream)."""
    from jobs.checkpoint.offsets import head_at
    from jobs.sources.delta_table.driver import check_source_table, starting_version, stored_columns
    from jobs.sources.delta_table.log import plan_range, read_files

    src = pipeline.source
    table = check_source_table(pipeline)
    files = plan_range(
        src.path,
        starting_version(pipeline) - 1,
        head_at(src.path).version,
        table=table,
        skip_change_commits=src.skip_change_commits,
    )
    columns = [(c, column_type(t).arrow) for c, t in stored_columns(pipeline)]
    return read_files(src.path, files, columns)
