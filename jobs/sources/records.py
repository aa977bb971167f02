"""A pipeline's records frame, by its source's format: the one place a run picks its reader.

* files (``jsonl``, ``csv``, ``parquet``): :func:`jobs.sources.files.landing.read_landing_zone`
  (a landing directory that ``source.create_path`` allows to be missing is created empty);
* ``pane_log``: :func:`jobs.sources.pane_log.driver.read_pane_log`;
* ``delta``: :func:`jobs.sources.delta_table.driver.read_delta_table`;
* ``dataframe``: the caller's streaming DataFrame (:func:`jobs.driver.runs.run` ``records``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.config.pipeline import Pipeline
from jobs.reading.files.paths import has_scheme

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from jobs.executor.jsonl_decoder import JsonlDecoder


class RecordsRequired(ValueError):
    """A ``dataframe`` pipeline run without the DataFrame it reads."""


def read_source(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str | None = None,
    *,
    decoder: bool | JsonlDecoder = True,
    values: Sequence[str] | None = None,
    of_input: str | None = None,
) -> DataFrame:
    """The streaming records frame of ``pipeline``'s source (see the module doc); ``table``: the
    id of the pane log or Delta table the run's checks found the source to be
    (:func:`jobs.driver.preflight.check_source_identity`), which the reader holds it to;
    ``decoder``: JSON lines may be decoded by the JSON-lines decoder (else Spark parses them;
    a decoder given is the one: an input of several,
    :func:`jobs.sources.files.landing.jsonl_decoder`); ``values``: the
    value columns to read of an upstream pane log (default: the pipeline's); ``of_input``: the
    input of several a table is read as (its offsets name it)."""
    src = pipeline.source
    if src.is_pane_log:
        from jobs.sources.pane_log.driver import read_pane_log

        return read_pane_log(spark, pipeline, table, values, of_input)
    if src.is_delta:
        from jobs.sources.delta_table.driver import read_delta_table

        return read_delta_table(spark, pipeline, table, of_input)
    if src.is_dataframe:
        raise RecordsRequired(
            f"pipeline {pipeline.name} reads a streaming DataFrame (source.format = "
            "'dataframe'): run it from PySpark code with jobs.api.run(pipeline, frame)"
        )
    from jobs.sources.files.landing import read_landing_zone

    if not has_scheme(src.path):
        Path(src.path).mkdir(parents=True, exist_ok=True)
    return read_landing_zone(spark, pipeline, python_decoder=decoder)
