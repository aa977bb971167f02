"""The pane-log stream reader: a PySpark Python data source over another pipeline's pane log.

Offsets are pane-log versions and the table they belong to
(:class:`jobs.checkpoint.offsets.TableOffset`: ``{"version": v, "table": id}``, version -1
before the first), and a micro-batch reads the rows of the versions ``(start, end]`` with delta-rs
(:func:`jobs.reading.pane_log.upstream.read_elements`). Spark records both offsets in its offset log
before the batch runs, so a replayed batch reads exactly the same rows.

This module runs in Spark's Python workers (Spark starts them for the data source's planning
calls and its ``read``): it imports nothing of the pipeline configuration. The driver side
(registration, the checks before the query starts, the element rows the job takes) is
:mod:`jobs.sources.pane_log.driver`.

A version range means something only in its table: the reader is given the table the driver
checked and refuses another (an upstream rebuilt while the downstream runs) when it looks for
new versions, plans a batch or reads one, with :class:`sinks.lake.errors.UpstreamChanged`.
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
from jobs.reading.pane_log.upstream import EVENT_TIME_US, WATERMARK_US, read_elements
from jobs.reading.pane_log.upstream import WEIGHT as UPSTREAM_WEIGHT
from sinks.lake import UpstreamChanged, arrow_type

FORMAT_NAME = "panestore_pane_log"
"""The name :class:`PaneLogDataSource` is registered under."""


class VersionRange(InputPartition):
    """One micro-batch's input: pane-log versions ``after < v <= upto`` of the table ``table``
    (None: not named, by offsets of an older panestore that the driver checked)."""

    def __init__(self, after: int, upto: int, table: str | None) -> None:
        self.value = (after, upto, table)
        self.after, self.upto, self.table = after, upto, table


class PaneLogStreamReader(DataSourceStreamReader):
    """Offsets are pane-log versions of one table; one partition per micro-batch (see the module
    doc). ``options["table"]``: the table id the driver checked ("" while there is no table and
    nothing was read: then the first table seen is kept); ``options["input"]``: the input of
    several it is read as, which its offsets name (absent: the pipeline's one)."""

    def __init__(self, options: dict[str, str], columns: Sequence[tuple[str, str]]) -> None:
        self.path = options["path"]
        self.pipeline = options["pipeline"]
        self.table = options.get("table") or None
        self.input = options.get("input") or None
        self.columns = tuple(columns)

    def _changed(self, now: str | None, read: str) -> UpstreamChanged:
        where = f"is table {now} now" if now else "is gone"
        return UpstreamChanged(
            f"the upstream pane log at {self.path} {where}, not table {read} that this "
            f"pipeline has read: the upstream was rebuilt. Rebuild this pipeline too "
            f"(docs/running.md, 'Recovering a lake')"
        )

    def initialOffset(self) -> dict:
        return TableOffset(-1, input=self.input).to_json()

    def latestOffset(self) -> dict:
        head = head_at(self.path)
        if self.table is None:
            self.table = head.table
        elif head.table != self.table:
            raise self._changed(head.table, self.table)
        return TableOffset(head.version, head.table, self.input).to_json()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        first, last = TableOffset.from_json(start), TableOffset.from_json(end)
        if first.version >= 0 and first.table is not None and last.table != first.table:
            raise self._changed(last.table, first.table)
        if last.version > first.version:
            return [VersionRange(first.version, last.version, last.table)]
        return []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, VersionRange)
        columns = [(c, arrow_type(t)) for c, t in self.columns]
        table = read_elements(
            self.path, self.pipeline, partition.after, partition.upto, columns, partition.table
        )
        yield from table.to_batches()

    def commit(self, end: dict) -> None:
        """Nothing to release: the pane log is immutable and read by version."""


class PaneLogDataSource(ColumnsDataSource):
    """``spark.readStream.format("panestore_pane_log")`` with options ``path`` (the pane-log
    table), ``pipeline`` (its writer), ``table`` (its table id, see :class:`PaneLogStreamReader`)
    and ``columns`` (``name:type,...``, configuration types)."""

    format_name = FORMAT_NAME

    def extra_columns(self) -> list[str]:
        return [f"{EVENT_TIME_US} bigint", f"{WATERMARK_US} bigint", f"{UPSTREAM_WEIGHT} int"]

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return PaneLogStreamReader(dict(self.options), self.columns())
