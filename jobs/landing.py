"""The landing zone's records as the batch check's elements (``sinks.verify``), read with DuckDB.

The job reads the landing zone with Spark; this module re-reads it independently, to compute
the pipeline's results as one batch and compare them with the view (``panestore verify``).
"""

from __future__ import annotations

import os

import pyarrow as pa

from jobs.event_time import EPOCH_UNITS, MAX_EVENT_TIME_US, MIN_EVENT_TIME_US
from jobs.pipeline import Pipeline
from jobs.view_spec import view_spec
from sinks.batch_check import VALUE, value_fields
from sinks.column_types import TYPES
from sinks.duck import raw_connect
from sinks.errors import LakeError
from sinks.upstream import final_view_elements


def landing_files(path: str) -> list[str]:
    """The input files under ``path`` (hidden and ``_`` files left out), sorted."""
    if not os.path.isdir(path):
        raise LakeError(f"landing zone {path} not found")
    files = [
        os.path.join(dp, f)
        for dp, _, fs in os.walk(path)
        for f in fs
        if not f.startswith((".", "_"))
    ]
    if not files:
        raise LakeError(f"no input files in {path}")
    return sorted(files)


def reader_sql(pipeline: Pipeline, files: list[str]) -> str:
    """The DuckDB table function reading ``files`` in the source's format and schema. Malformed
    records are skipped (the job rejects them too)."""
    src = pipeline.source
    cols = "{" + ", ".join(f"'{c}': '{TYPES[t].duckdb}'" for c, t in src.schema) + "}"
    flist = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    if src.format == "jsonl":
        return f"read_json({flist}, format='newline_delimited', columns={cols}, ignore_errors=true)"
    if src.format == "csv":
        return (
            f"read_csv({flist}, header={str(src.csv_header).lower()}, "
            f"delim='{src.csv_delimiter}', columns={cols}, ignore_errors=true)"
        )
    return f"read_parquet({flist})"


def event_time_sql(pipeline: Pipeline) -> str:
    """The SQL expression of a record's event time in µs (null when it does not parse)."""
    et = pipeline.event_time
    src = pipeline.source
    if src.types[et] == "timestamp":
        return f'epoch_us(TRY_CAST("{et}" AS TIMESTAMPTZ))'
    return f'("{et}" * {EPOCH_UNITS[src.epoch_unit]})::BIGINT'


def source_elements_are(pipeline: Pipeline) -> str:
    """What :func:`load_source_elements` reads, as ``panestore verify`` names it."""
    up = pipeline.source.upstream
    if up is not None:
        return f"the final windows of {up.name} (its current view)"
    return "accepted raw events"


def load_source_elements(pipeline: Pipeline) -> pa.Table:
    """The pipeline's landing-zone records as an elements table: key columns, the value columns
    the aggregates read, ``ts_us``.

    For a pipeline over another pipeline's pane log, the elements are the upstream's current
    view (its final windows; materialize the upstream first):
    :func:`sinks.upstream.final_view_elements`.

    Records that the job rejects (a missing or empty key, a missing event time or one out of
    range, a non-finite number; jobs.job) are left out. Requires
    ``event_time`` (an ingestion-time pipeline's event time is the batch time, which the files
    do not hold).
    """
    if pipeline.source.upstream is not None:
        upstream = pipeline.source.upstream
        wanted = [*pipeline.keys, *[c for c in pipeline.value_columns if c not in pipeline.keys]]
        return final_view_elements(upstream.view, wanted)
    if getattr(pipeline, "ingestion_time", False) or not pipeline.event_time:
        raise LakeError(
            "ingestion-time pipelines cannot be checked against raw events: their "
            "event time is the batch time, not in the files"
        )
    spec = view_spec(pipeline)
    reader = reader_sql(pipeline, landing_files(pipeline.source.path))
    ts = event_time_sql(pipeline)
    keys = ", ".join(f'"{k}"' for k in spec.keys)
    vals = [f for f in value_fields(spec) if f != VALUE]
    sel = ", ".join([keys, *[f'"{v}"' for v in vals], f"{ts} AS ts_us"])
    types = pipeline.source.types
    accepted = [f'"{k}" IS NOT NULL' for k in spec.keys]
    accepted += [f"trim(\"{k}\") <> ''" for k in spec.keys if types[k] == "string"]
    accepted.append(f"{ts} BETWEEN {MIN_EVENT_TIME_US} AND {MAX_EVENT_TIME_US}")
    accepted += [f'("{v}" IS NULL OR isfinite("{v}"))' for v in pipeline.value_columns
                 if types[v] in ("double", "float")]  # fmt: skip
    nn = " AND ".join(accepted)
    con = raw_connect()
    try:
        return con.sql(f"SELECT {sel} FROM {reader} WHERE {nn}").to_arrow_table()
    finally:
        con.close()
