"""A pipeline's input records as the batch check's elements (``sinks.verification.view_check``),
read with DuckDB.

The job reads its source with Spark and the JSON-lines decoder; this module re-reads it
independently (the landing files with DuckDB, a Delta table's commits with pyarrow, or an Arrow
table of the same events the caller gives), to compute the pipeline's results as one batch and
compare them with the view (``panestore verify``). Event times (and text in ``timestamp``
columns) are read by DuckDB's own timestamp parser, gated by this module's own statement of the
accepted forms (:data:`ISO_FORM`, :data:`EPOCH_FORM`): none of the job's event-time code
(:mod:`jobs.config.event_time`) is used, so a misreading there shows as a difference.

A pipeline of several inputs is read input by input, each as a pipeline of one input is
(:func:`input_elements`: the one-input case is the pipeline's one input, ``[source]``), and the
inputs' elements are made one table of the union's columns (:func:`as_union`), each element's
``ts_us`` read from its own input's event-time column.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config.event_time import EPOCH_UNITS, MAX_EVENT_TIME_US, MIN_EVENT_TIME_US
from jobs.config.inputs import Input
from jobs.config.pipeline import Pipeline
from jobs.config.sink_spec import view_spec
from jobs.executor.operator_input import TS_US
from jobs.reading.files.paths import duckdb_literal
from jobs.reading.files.paths import landing_files as input_files
from jobs.reading.pane_log.upstream import final_view_elements
from jobs.sources.pane_log.identity import check_upstream
from panes.inputs import INPUT_COLUMN
from sinks.lake import INTEGRAL, TYPES, LakeError, column_type, is_struct_type
from sinks.presentation import raw_connect
from sinks.verification import DEDUP_GROUP, VALUE, value_fields


def landing_files(path: str) -> list[str]:
    """The input files under ``path``, sorted: the files the job reads (every depth, hidden
    names left out at every level: :func:`jobs.reading.files.paths.landing_files`)."""
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
    """What :func:`load_source_elements` reads, as ``panestore verify`` names it (of several
    inputs, what each input's elements are, by name)."""
    if pipeline.several_inputs:
        each = "; ".join(f"{one.name}: {_input_elements_are(one)}" for one in pipeline.inputs)
        return f"the inputs' records ({each})"
    return _input_elements_are(pipeline.input_list[0])


def _input_elements_are(one: Input) -> str:
    up = one.source.upstream
    if up is not None:
        return f"the final windows of {up.name} (its current view)"
    return "accepted raw events"


def load_source_elements(
    pipeline: Pipeline, events: pa.Table | Mapping[str, pa.Table] | None = None
) -> pa.Table:
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

    A pipeline of several inputs (:mod:`jobs.config.inputs`): each input's elements are read as
    a one-input pipeline's are (:func:`input_elements`: its own source, event-time column and
    dedup ids), then made the union's (:func:`as_union`): ``ts_us`` is each element's own
    input's event time, :data:`~panes.inputs.INPUT_COLUMN` holds the input's name, a column the
    input lacks is null; the inputs' tables follow one another. An input whose landing
    directory holds no files yet has no elements. ``events`` gives inputs' records by name
    (``{"clicks": table}``: a DataFrame input's are needed, as a ``dataframe`` source's); the
    other inputs' are read from their sources. One table of events for them all is refused.
    """
    if not pipeline.several_inputs:
        if isinstance(events, Mapping):
            raise LakeError(
                f"pipeline {pipeline.name} reads one input: give its events as one table, "
                "not by input name"
            )
        return input_elements(pipeline, pipeline.input_list[0], events)
    names = [one.name for one in pipeline.inputs]
    if events is not None and not isinstance(events, Mapping):
        raise LakeError(
            f"the pipeline reads several inputs ({', '.join(names)}): give the batch check "
            "each input's events by name (events={name: table}), not one table"
        )
    given = dict(events or {})
    unknown = [n for n in given if n not in names]
    if unknown:
        raise LakeError(f"events of no input {unknown[0]!r}: the inputs are {names}")
    tables = [
        as_union(pipeline, one, input_elements(pipeline, one, given.get(one.name)))
        for one in pipeline.inputs
    ]
    return _one_after_another(tables)


def input_elements(pipeline: Pipeline, one: Input, events: pa.Table | None = None) -> pa.Table:
    """Input ``one``'s records as elements of ``pipeline`` (:func:`load_source_elements`, whose
    rules these are): the key columns, the value columns the aggregates read that ``one`` has,
    ``ts_us`` from ``one``'s own event-time column, and, when ``one`` is deduplicated,
    :data:`~sinks.verification.DEDUP_GROUP` by ``one``'s own id columns. The source read is
    the input's as the run reads it (:meth:`Pipeline.read_as` for one of several inputs; the
    pipeline itself for its one ``[source]``)."""
    several = pipeline.several_inputs
    reader, of = (pipeline.read_as(one), one.name) if several else (pipeline, None)
    src = one.source
    types = one.types
    spec = view_spec(pipeline)
    if src.upstream is not None and events is None:
        check_upstream(reader, of)
        wanted = [*pipeline.keys, *[c for c in pipeline.value_columns if c not in pipeline.keys]]
        return final_view_elements(src.upstream.view, [c for c in wanted if c in types])
    et = one.event_time
    if one.ingestion_time or not et:
        raise LakeError(
            "ingestion-time pipelines cannot be checked against raw events: their "
            "event time is the batch time, not in the records"
            + ("" if one.single else f" (input {one.name!r})")
        )
    if events is None and src.is_dataframe:
        if not one.single:
            raise LakeError(
                f"input {one.name!r} is a DataFrame: give the batch check a batch DataFrame of "
                f"its events (jobs.api.verify(pipeline, events={{{one.name!r}: ...}}))"
            )
        raise LakeError(
            "the source is a DataFrame: give the batch check a batch DataFrame of the same "
            "events (jobs.api.verify(pipeline, events=...))"
        )
    if events is None and src.is_delta:
        events = _delta_rows(reader, of)
    if events is None and not one.single and _no_files_yet(src.path):
        return _no_elements(pipeline, one)
    con = raw_connect()
    try:
        if events is None:
            reader_from = reader_sql(reader, landing_files(src.path))
            given: dict[str, pa.DataType] = {}
        else:
            con.register("source_events", events)
            reader_from = "source_events"
            given = {f.name: f.type for f in events.schema}
        described = {
            r[0]: r[1] for r in con.sql(f"DESCRIBE SELECT * FROM {reader_from}").fetchall()
        }

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

        # (a filter's condition may read a key: it is read once, as the key); the columns the
        # input lacks are the union's (as_union), not read here
        vals = [f for f in value_fields(spec) if f != VALUE and f not in spec.keys and f in types]
        values = [v for v in pipeline.value_columns if v in types]
        epoch_us = EPOCH_UNITS[src.epoch_unit] if types[et] != "timestamp" else None
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
            for v in values
            if types[v] in ("double", "float")
        ]
        accepted_sql += [f'("{c}" IS NULL OR {sql} IS NOT NULL)' for c, sql in stamps.items()]
        order = ""
        if one.dedup:
            group, order = _copies(one, values, [typed(k) for k in spec.keys], typed, us, stamps)
            sel += f", {group}"
        table = con.sql(
            f"SELECT * FROM (SELECT {sel} FROM {reader_from} WHERE {' AND '.join(accepted_sql)}) "
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


def _no_files_yet(path: str) -> bool:
    """Whether the landing directory ``path`` is there and holds no input files yet: one of
    several inputs that has delivered nothing (the others' elements are checked; a pipeline of
    one input with nothing to read is refused by :func:`landing_files`)."""
    return os.path.isdir(path) and not input_files(path)


def _no_elements(pipeline: Pipeline, one: Input) -> pa.Table:
    """The elements of input ``one`` when it has no records: the columns :func:`input_elements`
    gives, in their types, and no rows."""
    spec = view_spec(pipeline)
    present = [f for f in value_fields(spec) if f not in spec.keys and f in one.types]
    fields = [(c, column_type(one.types[c]).arrow) for c in [*spec.keys, *present]]
    fields.append((TS_US, pa.int64()))
    if one.dedup:
        fields.append((DEDUP_GROUP, pa.int64()))
    return pa.schema(fields).empty_table()


def as_union(pipeline: Pipeline, one: Input, elements: pa.Table) -> pa.Table:
    """Input ``one``'s ``elements`` (:func:`input_elements`) as elements of the union of
    ``pipeline``'s several inputs, as the run tags them (:meth:`Pipeline.tag_as`):
    :data:`~panes.inputs.INPUT_COLUMN` holds the input's name (read by an aggregate or not: a
    late element is matched to an element of its own input), every value column the input
    lacks is null (of the union's type: :func:`jobs.config.inputs.union_columns`), the columns
    in the order of a one-input pipeline's (keys, values, ``ts_us``, then the copies' group,
    null where the input is not deduplicated)."""
    spec = view_spec(pipeline)
    n = elements.num_rows
    union = pipeline.source.types
    vals = [f for f in value_fields(spec) if f != VALUE and f not in spec.keys]
    if INPUT_COLUMN not in vals:  # (read by no aggregate: it tells the late elements' input)
        vals.append(INPUT_COLUMN)
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    for c in [*spec.keys, *vals, TS_US]:
        if c in elements.column_names:
            out[c] = elements.column(c)
        elif c == INPUT_COLUMN:
            out[c] = pa.array([one.name] * n, pa.string())
        elif is_struct_type(union[c]):  # an upstream's sketch: its type is the other input's
            out[c] = pa.nulls(n)
        else:
            out[c] = pa.nulls(n, column_type(union[c]).arrow)
    if any(other.dedup for other in pipeline.inputs):
        held = DEDUP_GROUP in elements.column_names
        out[DEDUP_GROUP] = elements.column(DEDUP_GROUP) if held else pa.nulls(n, pa.int64())
    return pa.table(out)


def _one_after_another(tables: list[pa.Table]) -> pa.Table:
    """The inputs' elements (:func:`as_union`) in one table, one input's after another's; each
    input's copies' groups numbered after the previous inputs' (an id is its own input's: equal
    ids of two inputs are no copies of each other). A column an input holds in another Arrow type
    than the union's (an input's stored decimal's precision) takes the type the inputs share."""
    numbered = []
    after = 0
    for table in tables:
        if DEDUP_GROUP in table.column_names:
            groups = pc.cast(table.column(DEDUP_GROUP), pa.int64())
            table = table.set_column(
                table.schema.get_field_index(DEDUP_GROUP), DEDUP_GROUP, pc.add(groups, after)
            )
            top = pc.max(groups).as_py()
            after += 0 if top is None else top
        numbered.append(table)
    return pa.concat_tables(numbered, promote_options="permissive")


def _is_text(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_)


def _copies(
    one: Input, values: list[str], keys: list[str], typed, us: str, stamps: dict[str, str]
) -> tuple[str, str]:
    """A deduplicated input's copies, in DuckDB SQL (docs/running.md, "Duplicates"): the
    :data:`sinks.verification.batch_check.DEDUP_GROUP` column (records of one key and id, every id
    column of ``one.dedup`` typed and not null, share a number; a timestamp or the event time
    compared as µs) and the ``ORDER BY`` putting each group's copies in the order the job takes
    them: event time, then the input's value columns ``values`` (null first)."""
    ids = []
    for c in one.dedup:
        if c == one.event_time:
            ids.append(us)
        elif c in stamps:
            ids.append(stamps[c])
        elif one.types[c] == "timestamp":
            ids.append(f"epoch_us({typed(c)})")
        else:
            ids.append(typed(c))
    whole = " AND ".join(f"({i}) IS NOT NULL" for i in ids)
    rank = f"dense_rank() OVER (ORDER BY {', '.join([*keys, *ids])})"
    group = f"CASE WHEN {whole} THEN {rank} END AS {DEDUP_GROUP}"
    order = [f'"{v}" NULLS FIRST' for v in values]
    return group, f" ORDER BY {DEDUP_GROUP}, {', '.join([TS_US, *order])}"


def _delta_rows(pipeline: Pipeline, of_input: str | None = None) -> pa.Table:
    """The rows a ``delta`` source's stream reads, from its starting version to the table's
    newest: what every commit added (change commits stop it, or are skipped, as in the stream);
    ``of_input``: the input of several the table is."""
    from jobs.checkpoint.offsets import head_at
    from jobs.reading.delta_table.log import plan_range, read_files
    from jobs.sources.delta_table.driver import check_source_table, starting_version, stored_columns

    src = pipeline.source
    table = check_source_table(pipeline, of_input)
    files = plan_range(
        src.path,
        starting_version(pipeline) - 1,
        head_at(src.path).version,
        table=table,
        skip_change_commits=src.skip_change_commits,
    )
    columns = [(c, column_type(t).arrow) for c, t in stored_columns(pipeline)]
    return read_files(src.path, files, columns)
