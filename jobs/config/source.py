"""The ``[source]`` table of a pipeline's configuration: where its records come from.

One table for every kind of source (:mod:`jobs.sources`), its ``format`` choosing the source: the
settings each source reads are listed in its sub-package's front door; this module parses and
checks them, with the rest of the configuration, before Spark starts (raising
:class:`jobs.config.values.PipelineConfigError` naming the first bad setting).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.config.event_time import EPOCH_UNITS
from jobs.config.values import IDENTIFIER, PipelineConfigError, expect
from jobs.reading.files.paths import landing_path_problem
from jobs.reading.pane_log.upstream import PaneLogColumns
from sinks.lake import column_type, is_struct_type

FILE_FORMATS = ("jsonl", "csv", "parquet")
FORMATS = (*FILE_FORMATS, "pane_log", "delta", "dataframe")


@dataclass(frozen=True)
class Source:
    """Where a pipeline's records come from (``format``):

    * ``jsonl``, ``csv``, ``parquet``: a directory of files that grows over time (``path``),
      read as a Spark streaming file source;
    * ``pane_log``: another pipeline's pane log (its ``upstream``; ``schema`` is then the
      columns it offers);
    * ``delta``: a Delta table read as an append-only stream (``path``, a directory or URI):
      every commit's new rows from ``starting_version`` (or the first version committed at or
      after ``starting_timestamp``, ISO-8601; default: version 0) on. A commit that deletes or
      updates rows stops the run, unless ``skip_change_commits`` (the whole commit is then
      skipped). ``schema`` defaults to the table's columns of the types below;
    * ``dataframe``: a streaming DataFrame built in PySpark code (``frame``, given once: to
      ``jobs.api.define(source=...)``; ``path`` is only a description, optional).

    ``schema`` lists (column, type) pairs (types: string, int, long, double, float, boolean,
    timestamp); it is explicit for files (no inference). A ``timestamp`` column is an ISO-8601
    string in jsonl/csv; a numeric event-time column counts ``epoch_unit`` (s, ms, us) since
    1970-01-01 UTC. A column whose type in a table or DataFrame differs from the schema's is
    cast; a value that does not cast rejects its record. ``bounded``: the input is finite and
    complete when a run starts, every run drains (see :mod:`jobs.driver.runs`).
    ``create_path``: a missing landing directory is created empty (the producer has not started
    yet) instead of refused as a likely typo.
    """

    path: str
    schema: tuple[tuple[str, str], ...]
    format: str = "jsonl"
    max_files_per_trigger: int | None = None
    csv_header: bool = False
    csv_delimiter: str = ","
    epoch_unit: str = "ms"
    bounded: bool = False
    create_path: bool = False
    pipeline: str | None = None
    upstream: Upstream | None = None
    starting_version: int | None = None
    starting_timestamp: str | None = None
    skip_change_commits: bool = False
    #: A ``dataframe`` source's streaming DataFrame, when the pipeline was defined in code with
    #: it; not a setting (not compared, not saved): a run reads it unless given other events.
    frame: Any = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without ``frame``: a DataFrame lives on the driver, and the settings travel
        to Spark's workers in the operator's closures."""
        return {**self.__dict__, "frame": None}

    def __post_init__(self) -> None:
        """Check the settings (raising :class:`PipelineConfigError` naming the first bad one)."""
        if self.format not in FORMATS:
            raise PipelineConfigError("source.format", f"{self.format!r} is not one of {FORMATS}")
        if self.is_pane_log and self.upstream is None:
            raise PipelineConfigError(
                "source.path", "a pane_log source needs its upstream (load it with load_pipeline)"
            )
        if not self.path and not self.is_dataframe:
            what = "the Delta table" if self.is_delta else "the landing directory"
            raise PipelineConfigError("source.path", f"is required ({what})")
        self._check_delta_settings()
        if self.frame is not None and not self.is_dataframe:
            raise PipelineConfigError("source.format", "only a dataframe source holds a DataFrame")
        if not self.schema:
            raise PipelineConfigError("source.schema", "is required: column = type, ...")
        for col, typ in self.schema:
            if not IDENTIFIER.fullmatch(col) or col.startswith("_"):
                raise PipelineConfigError(
                    f"source.schema.{col}", "column names are identifiers not starting with _"
                )
            if self.is_pane_log and is_struct_type(typ):
                continue  # an upstream's sketch column (read by merge(column) alone)
            try:
                column_type(typ)
            except (ValueError, TypeError) as e:
                raise PipelineConfigError(f"source.schema.{col}", str(e)) from None
        mf = self.max_files_per_trigger
        if mf is not None and mf < 1:
            raise PipelineConfigError("source.max_files_per_trigger", f"must be >= 1, got {mf!r}")
        if self.epoch_unit not in EPOCH_UNITS:
            raise PipelineConfigError(
                "source.epoch_unit", f"{self.epoch_unit!r} is not one of {list(EPOCH_UNITS)}"
            )
        if len(self.csv_delimiter) != 1:
            raise PipelineConfigError("source.csv_delimiter", "must be one character")
        problem = landing_path_problem(self.path) if self.is_landing else None
        if problem is not None:
            raise PipelineConfigError("source.path", problem)

    def _check_delta_settings(self) -> None:
        """The settings of a ``delta`` source: on no other format, one starting point."""
        given = [
            name
            for name in ("starting_version", "starting_timestamp", "skip_change_commits")
            if getattr(self, name) not in (None, False)
        ]
        if given and not self.is_delta:
            raise PipelineConfigError(
                f"source.{given[0]}", f"is a setting of a delta source, not of {self.format}"
            )
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise PipelineConfigError(
                "source.starting_timestamp", "give starting_version or starting_timestamp, not both"
            )
        if self.starting_version is not None:
            expect("source.starting_version", self.starting_version, int, "a version >= 0")
            if self.starting_version < 0:
                raise PipelineConfigError("source.starting_version", "must be >= 0")
        if self.starting_timestamp is not None:
            expect("source.starting_timestamp", self.starting_timestamp, str, "ISO-8601 text")
            starting_timestamp_ms(self.starting_timestamp)  # raises naming the setting

    @property
    def types(self) -> dict[str, str]:
        return dict(self.schema)

    @property
    def is_pane_log(self) -> bool:
        return self.format == "pane_log"

    @property
    def is_delta(self) -> bool:
        return self.format == "delta"

    @property
    def is_dataframe(self) -> bool:
        """The records are a streaming DataFrame the caller gives the run."""
        return self.format == "dataframe"

    @property
    def is_landing(self) -> bool:
        """The source is a landing directory of files."""
        return self.format in FILE_FORMATS

    def unknown_column(self, column: str) -> str:
        """Why ``column`` cannot be read from this source."""
        if self.upstream is not None:
            return (
                f"column {column!r} is not a column of the upstream pane log "
                f"{self.upstream.pane_log} ({self.upstream.columns.describe()})"
            )
        return f"column {column!r} is not in source.schema"


@dataclass(frozen=True)
class Upstream:
    """The pipeline a ``pane_log`` source reads: the path of its pane-log table and what the
    table offers (:class:`jobs.reading.pane_log.upstream.PaneLogColumns`). Its panes become
    elements: key and aggregate columns as fields, output timestamp as event time, weight -1 for a
    retraction (docs/running.md, "A pipeline over another pipeline's pane log")."""

    pane_log: str
    columns: PaneLogColumns

    @property
    def name(self) -> str:
        return self.columns.pipeline

    @property
    def view(self) -> str:
        """The path of the upstream's current view (next to its pane log)."""
        return str(Path(self.pane_log).parent / "current")

    @property
    def schema(self) -> dict[str, str]:
        """The columns a downstream can use: key and aggregate columns, with their types."""
        return dict((*self.columns.keys, *self.columns.values))


def starting_timestamp_ms(text: str) -> int:
    """``source.starting_timestamp`` in ms since 1970 (ISO-8601; no zone: UTC)."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PipelineConfigError(
            "source.starting_timestamp", f"{text!r} is not an ISO-8601 time (2024-05-01T00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)
