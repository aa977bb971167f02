"""The Delta-table stream reader: a PySpark Python data source over any Delta table, append-only.

Offsets are table versions and the table they belong to
(:class:`jobs.checkpoint.offsets.TableOffset`: ``{"version": v, "table": id}``), as for the
pane-log source. A micro-batch reads the rows the commits of versions ``(start, end]`` added
(:func:`jobs.reading.delta_table.log.plan_range`, then
:func:`jobs.reading.delta_table.log.read_files`): Spark records both offsets in its offset log
before the batch runs, and the commits of a version range never change, so a replayed batch reads
the same rows. Commits that add no data (OPTIMIZE, compaction, properties) contribute nothing; a
commit that deletes or updates rows, a version no longer in the table's log and a data file vacuumed
before it was read stop the batch with :class:`sinks.lake.errors.SourceTableError`, naming the
version (never a silent gap). The start is ``options["starting_version"]`` (the offset before it is
the initial offset).

The batch's files are split into partitions of about equal size (at most one per core Spark
reported when the query was built), so the read runs in parallel.

This module runs in Spark's Python workers: it imports nothing of the pipeline configuration.
The driver side (registration, the table check before the query starts) is
:mod:`jobs.sources.delta_table.driver`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

try:  # pyspark is optional at import time (the pure test suite runs without it)
    from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover - exercised only without pyspark
    # stand-ins so that the module imports; mypy checks against pyspark's classes
    DataSourceStreamReader = InputPartition = object  # type: ignore[assignment,misc]

from jobs.checkpoint.offsets import TableOffset, head_at
from jobs.reading.columns import ColumnsDataSource
from jobs.reading.delta_table.log import SourceFile, plan_range, read_files
from sinks.lake import SourceTableChanged, arrow_type

FORMAT_NAME = "panestore_delta_table"
"""The name :class:`DeltaTableDataSource` is registered under."""


class FileGroup(InputPartition):
    """Data files of one micro-batch that one task reads, in commit order."""

    def __init__(self, files: Sequence[SourceFile]) -> None:
        self.value = tuple(files)
        self.files = tuple(files)


def split_files(files: Sequence[SourceFile], parts: int) -> list[list[SourceFile]]:
    """``files`` in consecutive groups of about equal total size, at most ``parts`` groups."""
    if not files:
        return []
    parts = max(1, min(parts, len(files)))
    target = sum(max(f.size, 1) for f in files) / parts
    groups: list[list[SourceFile]] = [[]]
    filled = 0.0
    for f in files:
        if groups[-1] and filled >= target and len(groups) < parts:
            groups.append([])
            filled = 0.0
        groups[-1].append(f)
        filled += max(f.size, 1)
    return groups


class DeltaTableStreamReader(DataSourceStreamReader):
    """Offsets are versions of one Delta table (see the module doc). ``options``: ``path``,
    ``table`` (the table id the driver checked; "" while nothing was read: the first table seen
    is kept), ``starting_version``, ``skip_change_commits`` ("true"/"false"), ``parallelism``,
    ``file_column`` (the column naming each row's data file) and ``input`` (the input of several
    it is read as, which its offsets name; absent: the pipeline's one)."""

    def __init__(self, options: dict[str, str], columns: Sequence[tuple[str, str]]) -> None:
        self.path = options["path"]
        self.table = options.get("table") or None
        self.input = options.get("input") or None
        self.start = int(options.get("starting_version", "0"))
        self.skip_change_commits = options.get("skip_change_commits", "false") == "true"
        self.parallelism = int(options.get("parallelism", "1"))
        self.file_column = options["file_column"]
        self.columns = tuple(columns)

    def _changed(self, now: str | None) -> SourceTableChanged:
        where = f"is table {now} now" if now else "is gone"
        return SourceTableChanged(
            f"the source Delta table at {self.path} {where}, not table {self.table} that this "
            "pipeline has read: it was recreated. Rebuild this pipeline (docs/sources.md)"
        )

    def initialOffset(self) -> dict:
        return TableOffset(self.start - 1, input=self.input).to_json()

    def latestOffset(self) -> dict:
        head = head_at(self.path)
        if self.table is None:
            self.table = head.table
        elif head.table != self.table:
            raise self._changed(head.table)
        return TableOffset(max(head.version, self.start - 1), head.table, self.input).to_json()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        first, last = TableOffset.from_json(start), TableOffset.from_json(end)
        if last.version <= first.version:
            return []
        files = plan_range(
            self.path,
            first.version,
            last.version,
            table=last.table,
            skip_change_commits=self.skip_change_commits,
        )
        return [FileGroup(group) for group in split_files(files, self.parallelism)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FileGroup)
        columns = [(c, arrow_type(t)) for c, t in self.columns]
        for file in partition.files:  # one file in memory at a time
            rows = read_files(self.path, [file], columns, file_column=self.file_column)
            yield from rows.to_batches()

    def commit(self, end: dict) -> None:
        """Nothing to release: the table's commits are read by version."""


class DeltaTableDataSource(ColumnsDataSource):
    """``spark.readStream.format("panestore_delta_table")`` with the options of
    :class:`DeltaTableStreamReader` and ``columns`` (``name:type,...``, configuration types)."""

    format_name = FORMAT_NAME

    def extra_columns(self) -> list[str]:
        return [f"`{self.options['file_column']}` string"]

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return DeltaTableStreamReader(dict(self.options), self.columns())
