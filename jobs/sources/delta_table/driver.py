"""A pipeline whose source is a Delta table (``[source] format = "delta"``), read without jars.

The table is read incrementally by a PySpark Python streaming data source
(:class:`jobs.reading.delta_table.reader.DeltaTableDataSource`): offsets are table versions
and the table's id, a micro-batch reads the rows the commits of its version range added. See
``docs/sources.md`` for what is read, what is skipped and what stops a run.

Before the query starts, :func:`check_source_table` compares the newest offset of the checkpoint
with the table at the path: a table deleted and created again at the same path (new id, versions
from 0 again) is refused, as reading on by version number would skip or repeat rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.checkpoint.logs import recorded_offsets
from jobs.checkpoint.offsets import head_at
from jobs.config.pipeline import Pipeline
from jobs.config.source import starting_timestamp_ms
from jobs.config.values import PipelineConfigError
from jobs.reading.columns import encode_columns, spark_columns
from jobs.reading.delta_table.log import source_table_columns, version_at
from jobs.reading.delta_table.reader import FORMAT_NAME, DeltaTableDataSource
from jobs.sources.files.landing import SOURCE_FILE
from jobs.startup.session import register_data_source
from sinks.lake import SourceTableChanged

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def check_source_table(pipeline: Pipeline, of_input: str | None = None) -> str | None:
    """The id of the source table the pipeline may read on (None: no table there yet and
    nothing read); raises :class:`sinks.lake.errors.SourceTableChanged` (an ``UpstreamChanged``) if
    the path holds another table than the one the pipeline has read, or none; ``of_input``: the
    input of several the table is (its offsets only)."""
    path = pipeline.source.path
    head = head_at(path)
    named = [
        r.offset
        for r in recorded_offsets(pipeline.checkpoint_path)
        if r.offset.table and r.offset.of_input(of_input)
    ]
    if not named:
        return head.table
    mine = named[-1]
    if head.table == mine.table:
        return mine.table
    now = f"holds table {head.table} now" if head.table else "holds no Delta table now"
    raise SourceTableChanged(
        f"the source table {path} {now}, not table {mine.table} that {pipeline.name} has read "
        f"up to version {mine.version}: it was recreated. Rebuild {pipeline.name}: "
        f"{pipeline.set_aside} and run again "
        "(docs/sources.md)"
    )


def starting_version(pipeline: Pipeline) -> int:
    """The first version the pipeline reads: ``source.starting_version``, or the first version
    committed at or after ``source.starting_timestamp``, or 0."""
    src = pipeline.source
    if src.starting_version is not None:
        return src.starting_version
    if src.starting_timestamp is not None:
        return version_at(src.path, starting_timestamp_ms(src.starting_timestamp))
    return 0


def stored_columns(pipeline: Pipeline) -> list[tuple[str, str]]:
    """The schema's columns with the types the table stores them in (the job casts them to the
    schema's); refuses a column the table does not have or holds in a type no pipeline reads."""
    table = source_table_columns(pipeline.source.path)
    for column, _ in pipeline.source.schema:
        problem = table.column_error(column)
        if problem is not None:
            raise PipelineConfigError(f"source.schema.{column}", problem)
    stored = dict(table.columns)
    return [(c, stored[c]) for c, _ in pipeline.source.schema]


def read_delta_table(
    spark: SparkSession, pipeline: Pipeline, table: str | None, of_input: str | None = None
) -> DataFrame:
    """The source table as a streaming records frame: the schema's columns in the table's own
    types (:func:`jobs.driver.plan.build_job` converts them to the schema's, rejecting what does
    not convert exactly) and ``_source_file``, the data file a row came from; ``table``: the
    table's id the run's checks found (:func:`check_source_table`), to which the reader holds the
    versions it reads; ``of_input``: the input of several it is read as (its offsets name it)."""
    src = pipeline.source
    register_data_source(spark, DeltaTableDataSource)
    columns = stored_columns(pipeline)
    return (
        spark.readStream.format(FORMAT_NAME)
        .schema(", ".join([*spark_columns(columns), f"`{SOURCE_FILE}` string"]))
        .option("path", src.path)
        .option("table", table or "")
        .option("input", of_input or "")
        .option("starting_version", str(starting_version(pipeline)))
        .option("skip_change_commits", "true" if src.skip_change_commits else "false")
        .option("parallelism", str(spark.sparkContext.defaultParallelism))
        .option("columns", encode_columns(columns))
        .option("file_column", SOURCE_FILE)
        .load()
    )
