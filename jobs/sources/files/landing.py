"""Streaming sources: a landing directory of JSON-lines, CSV or Parquet files.

:func:`read_landing_zone` returns the *records* frame the job core (:mod:`jobs.driver.plan`) takes:
one row per input record with the schema's columns plus three bookkeeping columns:

* ``_raw``: the record as it was read (the line of a jsonl/csv file; for Parquet, the row as
  JSON), kept so a rejected record can be inspected and replayed;
* ``_source_file``: the file it came from;
* ``_error``: why the record could not be parsed, or null.

CSV (and the JSON lines of a pipeline the decoder does not serve) are read as text and parsed
with ``from_csv`` / ``from_json`` (PERMISSIVE, with a corrupt-record column), so an unparseable
line becomes a row with ``_error`` set instead of stopping the job or vanishing. The event-time
and key columns are read as *strings* and converted by the job core, which can then tell a
missing value from an unparseable one.

JSON-lines of a pipeline :class:`jobs.executor.jsonl_decoder.JsonlDecoder` serves are read by
the decoder alone, in the Python workers (strict JSON; it skips blank lines itself): the frame
then holds the decoder's columns only (``pst_bucket``, ``pst_ts``, ``pst_blob``, ``_raw``,
``_source_file``, ``_error``), a row being either a blob of decoded elements (its other columns
null) or a line the decoder rejected (``_raw``, ``_source_file`` and its reason in ``_error``).
Spark parses no line of such a pipeline.

Any other Spark streaming source plugs into :func:`jobs.driver.plan.build_job` the same way: give it
a frame with the schema's columns (``_raw``/``_source_file``/``_error`` are optional).

Every file below the landing directory is read, at any depth (``recursiveFileLookup``: date
folders, one folder per writer), except hidden names at any level (:mod:`jobs.reading.files.paths`,
the rule ``panestore verify`` and the writers' watermark share). The directory's path is taken
literally (escaped for Hadoop's globbing: ``land[1]`` is not a pattern).

Files must appear atomically in the landing directory: write them under a hidden name (``.name``
or ``_name``, which Spark's file listing skips) or elsewhere, then rename.

Every file source reads with :data:`FILE_SOURCE_OPTIONS`: no file is skipped for its
modification time (Spark's default ``maxFileAge`` of 7 days, counted from the newest file seen,
would skip a backfilled ``cp -p`` file, and a file dated in the future would hide every later
one), and a file that vanishes between listing and reading does not fail the batch: the sink
reports it in ``rejected`` (:mod:`jobs.checkpoint.logs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.config.inputs import Input
from jobs.config.pipeline import Pipeline
from jobs.executor.jsonl_decoder import DECODER_OUTPUT, AsInput, JsonlDecoder
from jobs.executor.record_rules import HASHED_AS
from jobs.executor.rejection_reasons import MALFORMED
from jobs.reading.files.paths import spark_path
from jobs.sources.shape import record_shape
from panes.inputs import INPUT_COLUMN
from sinks.lake import INTEGRAL, column_type

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

RAW, SOURCE_FILE, ERROR = "_raw", "_source_file", "_error"
# maxFileAge: ~274,000 years, so every file is new whatever its modification time (Spark keeps one
# entry per file seen in the driver's memory either way: see docs/running.md).
FILE_SOURCE_OPTIONS = {"maxFileAge": "100000000d", "ignoreMissingFiles": "true"}
# the landing source reads subfolders too (no partition inference: folder names are not columns)
LANDING_OPTIONS = {**FILE_SOURCE_OPTIONS, "recursiveFileLookup": "true"}
CORRUPT = "_corrupt_record"
UNBALANCED_QUOTES = "unbalanced quotes (a quoted CSV field cannot span lines)"


def read_schema_ddl(pipeline: Pipeline) -> str:
    """The DDL schema the text parsers use: event-time, key and timestamp columns as strings
    (the plan reads them: :func:`jobs.driver.plan.build_job`; a timestamp without a zone is
    UTC, not the session's time zone)."""
    as_text = {*pipeline.keys, *([pipeline.event_time] if pipeline.event_time else [])}
    as_text |= {c for c, t in pipeline.source.schema if t == "timestamp"}
    # decimals and dates too: Spark's parsers round surplus digits and take 2024-1-2; the plan
    # reads their text by its exact form (jobs.executor.record_rules.SparkRecords.typed)
    as_text |= {c for c, t in pipeline.source.schema if column_type(t).text_form is not None}
    cols = [
        f"`{c}` {'string' if c in as_text else column_type(t).spark}"
        for c, t in pipeline.source.schema
    ]
    return ", ".join(cols)


def spark_schema_ddl(pipeline: Pipeline) -> str:
    """The declared schema as DDL (Parquet reads it as is)."""
    return ", ".join(f"`{c}` {column_type(t).spark}" for c, t in pipeline.source.schema)


def _file_stream(spark: SparkSession, pipeline: Pipeline, fmt: str, schema: str | None = None):
    """The landing directory (recursively, its path literal) read by Spark's ``fmt`` file source
    (see LANDING_OPTIONS)."""
    src = pipeline.source
    reader = spark.readStream.format(fmt).options(**LANDING_OPTIONS)
    if schema is not None:
        reader = reader.schema(schema)
    if src.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", src.max_files_per_trigger)
    return reader.load(spark_path(src.path))


def read_landing_zone(
    spark: SparkSession, pipeline: Pipeline, *, python_decoder: bool | JsonlDecoder = True
) -> DataFrame:
    """The pipeline's landing directory as a streaming records frame (see the module doc).

    With ``python_decoder`` (and a pipeline it can serve), JSON-lines are decoded and judged in the
    Python workers (:mod:`jobs.executor.jsonl_decoder`, strict JSON): the frame then carries
    its blob columns and the lines it rejected, with their reasons; Spark parses none. Without it
    (tests, measurements), Spark's ``from_json`` reads them. A decoder given is the one (one
    input of several: :func:`jsonl_decoder`).
    """
    from pyspark.sql import functions as F

    src = pipeline.source
    names = [c for c, _ in src.schema]
    if src.format == "parquet":
        df = _file_stream(spark, pipeline, "parquet", spark_schema_ddl(pipeline))
        return df.select(
            *names,
            F.to_json(F.struct(*names)).alias(RAW),
            F.input_file_name().alias(SOURCE_FILE),
            F.lit(None).cast("string").alias(ERROR),
        )

    # input_file_name(), not _metadata.file_path: the metadata column costs ~20% of parsing here
    lines = _file_stream(spark, pipeline, "text").select(
        F.col("value").alias(RAW), F.input_file_name().alias(SOURCE_FILE)
    )
    ddl = read_schema_ddl(pipeline) + f", `{CORRUPT}` string"
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    if src.format == "jsonl":
        decoder = python_decoder if isinstance(python_decoder, JsonlDecoder) else None
        if python_decoder is True:
            decoder = jsonl_decoder(pipeline)
        if decoder is not None:  # the decoder's rows: blobs and rejected lines (with _error)
            return lines.mapInArrow(decoder, DECODER_OUTPUT)
        lines = lines.where(F.trim(F.col(RAW)) != "")  # blank lines are not records
        parsed = F.from_json(F.col(RAW), ddl, opts)
    else:
        opts["sep"] = src.csv_delimiter
        opts["escape"] = '"'  # RFC 4180: a quote inside a quoted field is doubled
        if src.csv_header:
            header = src.csv_delimiter.join(names)
            lines = lines.where(F.col(RAW) != header)
        lines = lines.where(F.col(RAW) != "")
        parsed = F.from_csv(F.col(RAW), ddl, opts)
    rec = lines.select(RAW, SOURCE_FILE, parsed.alias("_r"))
    malformed = F.col("_r").isNull() | F.col(f"_r.`{CORRUPT}`").isNotNull()
    checks = [(malformed, MALFORMED)]  # (condition, reason): the first that holds is the error
    if src.format == "jsonl":
        # Spark's parser stops after the first JSON value: text after it must not pass
        checks.insert(0, (~F.rtrim(F.col(RAW)).endswith("}"), MALFORMED))
    else:
        # Lines are records: a quoted field spanning lines leaves an odd number of quotes on
        # each of its lines, and a part of it must not pass for a record.
        quotes = F.length(RAW) - F.length(F.regexp_replace(RAW, '"', ""))
        checks.insert(0, (quotes % 2 == 1, UNBALANCED_QUOTES))
    error = F.lit(None).cast("string")
    for condition, reason in reversed(checks):
        error = F.when(F.col(RAW).isNotNull() & condition, F.lit(reason)).otherwise(error)
    columns = {c: F.col(f"_r.`{c}`") for c in names}
    if src.format == "jsonl":
        columns.update(_decimal_texts(pipeline))
    return rec.select(
        *[col.alias(c) for c, col in columns.items()], RAW, SOURCE_FILE, error.alias(ERROR)
    )


NOT_EXACT = "not an exact decimal (a number in exponent form, or of more than 38 digits)"
"""What a JSON-lines decimal column holds for a number Spark reads only as a double (the plan
refuses the text: ``unparseable value``)."""


def _decimal_texts(pipeline: Pipeline) -> dict[str, Column]:
    """The exact text of each decimal value column of JSON lines: a JSON string's text, a JSON
    number's digits as written (``from_json`` reads a number into a string column through a
    double, and into a decimal column rounds it: Spark's variant keeps it exact), or
    :data:`NOT_EXACT` for a number in exponent form or of more than 38 digits (Spark's variant
    holds those as doubles)."""
    from pyspark.sql import functions as F

    out = {}
    parsed = F.try_parse_json(F.col(RAW))
    for c, t in pipeline.source.schema:
        if not column_type(t).numeric or column_type(t).text_form is None:
            continue
        if c == pipeline.event_time or c in pipeline.keys:
            continue
        field = F.try_variant_get(parsed, f"$.{c}", "variant")
        inexact = F.schema_of_variant(field) == "DOUBLE"
        text = F.try_variant_get(field, "$", "string")
        out[c] = F.when(inexact, F.lit(NOT_EXACT)).otherwise(text)
    return out


def jsonl_decoder(pipeline: Pipeline, one: Input | None = None) -> JsonlDecoder | None:
    """The pipeline's JSON-lines decoder (:mod:`jobs.executor.jsonl_decoder`), the one tagger
    of its lines, or None when its records are all read and tagged by Spark: another format,
    ingestion time, a key type the decoder cannot hash, an event time that is neither a
    timestamp nor an integer, a column the decoder does not read (``float``, ``timestamp``
    besides the event time), or a value column that is also a key or the event time.

    ``one``: the decoder of that input of a pipeline of several, tagging its records as the
    pipeline does (``Pipeline.tag_as``), by the same test over the columns its lines hold
    (:class:`jobs.executor.jsonl_decoder.AsInput`)."""
    view = pipeline if one is None else pipeline.tag_as(one)
    src = view.source
    if src.format != "jsonl" or view.ingestion_time or not view.event_time:
        return None
    types = src.types
    et = view.event_time
    if any(types[k] not in HASHED_AS for k in view.keys):
        return None
    if types[et] != "timestamp" and types[et] not in INTEGRAL:
        return None
    held = src.schema if one is None else one.source.schema  # what its lines hold
    plain = [t for c, t in held if c != et and c not in view.keys]
    if any(column_type(t).arrow_json is None for t in plain):
        return None
    if set(pipeline.value_columns) & {et, *view.keys}:
        return None
    if one is None:
        return JsonlDecoder(record_shape(view), tuple(view.carried_columns))
    as_input = AsInput(
        INPUT_COLUMN,
        one.name,
        pipeline.inputs.index(one),
        tuple(c for c, _ in held),
        ids=any(i.dedup for i in pipeline.input_list),
        weighted=pipeline.weighted,
    )
    return JsonlDecoder(record_shape(view), tuple(pipeline.carried_columns), as_input)
