"""Exactly-once appends of per-batch rows to a Delta table through delta-rs.

Each append is one Delta commit carrying an application transaction (``txn``) with
``app_id = pipeline id`` and ``version = batch id``. delta-rs records the transaction but enforces
nothing (measured with deltalake 1.6.6: the same version commits twice, and a *lower* version is
accepted and moves the recorded version backwards), so :meth:`ExactlyOnceAppender.append` reads the
committed version first and skips a batch whose id is not above it.

One writer per (table, pipeline) at a time is assumed: Spark's streaming checkpoint already forbids
two concurrent runs of one query.

delta-rs creates the tables and writes every commit (the driver commits the data files Spark's
executors wrote: :meth:`ExactlyOnceAppender.commit_files`); the tables follow the Delta protocol,
so delta-spark, delta-rs and DuckDB read them. The commit's panestore metadata is in its
``commitInfo`` (:func:`commit_metadata`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from sinks.lake.data_files import ROW_GROUP_ROWS, DataFile, commit_data_files
from sinks.lake.errors import ConfigMismatch
from sinks.lake.lake_format import (
    BATCH_ID_METADATA,
    DERIVED_TIMESTAMPS,
    FORMAT_PROPERTY,
    FORMAT_VERSION,
    KIND_METADATA,
    PIPELINE_METADATA,
    check_format,
)
from sinks.lake.snapshot_sharing import held, keep, kept, transaction_version


def commit_metadata(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A Delta history entry's panestore metadata (its ``commitInfo`` fields)."""
    return {k: v for k, v in entry.items() if k.startswith("panestore.")}


def _as_table(data: Any, schema: pa.Schema) -> pa.Table:
    """``data`` (Arrow table / record batch / list of row dicts / None) as a table of ``schema``."""
    if data is None:
        return schema.empty_table()
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        missing = [n for n in schema.names if n not in data.column_names]
        extra = [n for n in data.column_names if n not in schema.names]
        if missing or extra:
            raise ValueError(
                f"columns differ from the table schema: missing {missing}, extra {extra}"
            )
        return data.select(schema.names).cast(schema)
    rows = list(data)
    return pa.Table.from_pylist(rows, schema=schema)


class ExactlyOnceAppender:
    """Append one batch of rows per Delta commit, at most once per batch id.

    ``path`` is a local path or URI understood by delta-rs; the table is created (empty, with
    ``schema``, the table ``properties`` and the lake format version) on first use so readers
    always find it. On first use the table's format version is checked, and
    ``check(configuration)`` is called with the table's properties (it raises to refuse a table
    written by another configuration; nothing is written then).
    """

    def __init__(
        self,
        path: str | Path,
        pipeline_id: str,
        schema: pa.Schema,
        *,
        kind: str,
        storage_options: Mapping[str, str] | None = None,
        commit_empty: bool = True,
        properties: Mapping[str, str] | None = None,
        check: Callable[[Mapping[str, str]], None] | None = None,
    ) -> None:
        if not pipeline_id:
            raise ValueError("pipeline_id must be a non-empty string")
        self.path = str(path)
        self.pipeline_id = pipeline_id
        self.schema = schema
        self.kind = kind
        self.storage_options = dict(storage_options) if storage_options else None
        # Committing empty batches keeps the recorded txn version equal to the last batch id, which
        # makes "how far has this sink got" observable; it costs one small commit per batch.
        self.commit_empty = commit_empty
        self.properties = {**(properties or {}), FORMAT_PROPERTY: FORMAT_VERSION}
        self.check = check
        self._table = None

    # -- table access ---------------------------------------------------------------------------

    def table(self):
        """The :class:`deltalake.DeltaTable`, created empty with the schema if it does not exist
        (the run's snapshot when a run shares them: :mod:`sinks.lake.snapshot_sharing`)."""
        from deltalake import DeltaTable

        if self._table is None:
            # the run's (shared_snapshots), opened under the run lock: up to date (see below)
            table = held(self.path, self.storage_options)
            if table is None:
                table = DeltaTable.create(
                    self.path,
                    self.schema,
                    mode="ignore",
                    configuration=self.properties,
                    raise_if_key_not_exists=False,
                    storage_options=self.storage_options,
                )
                keep(self.path, self.storage_options, table)
            configuration = table.metadata().configuration or {}
            check_format(f"{self.kind} table", self.path, configuration)
            if self.check is not None:
                self.check(configuration)
            self._add_new_columns(table)
            self._table = table
        # a run's shared snapshot is not brought up to date again: the run holds the run lock,
        # so its own appends are the table's only ones, and each moves the snapshot as it
        # commits (write_deltalake does; after a write transaction, commit_files does); reading
        # the log again at every use cost two requests each, six uses a table a batch
        elif not kept(self.path, self.storage_options):
            self._table.update_incremental()
        return self._table

    def _add_new_columns(self, table) -> None:
        """Add the derived timestamp columns (:data:`DERIVED_TIMESTAMPS`) of the schema that a
        table written by an earlier version lacks (the ``late`` table's ``window_start`` and
        ``window_end``): one metadata commit; its older rows hold null there. Any other missing
        column is refused."""
        from deltalake.schema import Field

        have = set(table.schema().to_arrow().names)
        new = [f for f in self.schema if f.name not in have]
        if not new:
            return
        if not all(f.nullable and f.name in DERIVED_TIMESTAMPS for f in new):
            names = [f.name for f in new]
            raise ConfigMismatch(
                f"{self.kind} table at {self.path} has no column(s) {names}: it was written by "
                "another version of panestore. Nothing was written."
            )
        table.alter.add_columns([Field.from_arrow(f) for f in new])
        table.update_incremental()

    def committed_batch_id(self) -> int | None:
        """The highest batch id committed to this table for this pipeline, or None."""
        return transaction_version(self.table(), self.pipeline_id)

    # -- writing --------------------------------------------------------------------------------

    def append(self, batch_id: int, data: pa.Table | Iterable[Mapping[str, Any]] | None) -> bool:
        """Commit ``data`` as batch ``batch_id``; False (and no write) if already committed."""
        if batch_id < 0:
            raise ValueError(f"batch_id must be >= 0, got {batch_id}")
        delta = self.table()  # brought up to date once: the check and the commit share it
        committed = transaction_version(delta, self.pipeline_id)
        if committed is not None and batch_id <= committed:
            return False
        table = _as_table(data, self.schema)
        if table.num_rows == 0 and not self.commit_empty:
            return False
        from deltalake import CommitProperties, Transaction, WriterProperties, write_deltalake

        props = CommitProperties(
            app_transactions=[Transaction(self.pipeline_id, batch_id)],
            custom_metadata=self.batch_metadata(batch_id),
        )
        # row groups as the executors' files have them (a reader holds one at a time)
        writer = WriterProperties(max_row_group_size=ROW_GROUP_ROWS, compression="SNAPPY")
        write_deltalake(
            delta, table, mode="append", commit_properties=props, writer_properties=writer
        )
        return True

    def batch_metadata(self, batch_id: int) -> dict[str, str]:
        """The panestore metadata of the commit of batch ``batch_id``."""
        return {
            BATCH_ID_METADATA: str(batch_id),
            PIPELINE_METADATA: self.pipeline_id,
            KIND_METADATA: self.kind,
        }

    def is_committed(self, batch_id: int) -> bool:
        """Whether batch ``batch_id`` (or a later one) is already committed to this table."""
        committed = self.committed_batch_id()
        return committed is not None and batch_id <= committed

    def commit_files(self, batch_id: int, files: Sequence[DataFile]) -> bool:
        """Commit data files already written into the table directory (by Spark's executors,
        :mod:`sinks.lake.data_files`) as batch ``batch_id``; False (and no commit: the files stay
        unreferenced) if that batch is committed."""
        if batch_id < 0:
            raise ValueError(f"batch_id must be >= 0, got {batch_id}")
        delta = self.table()
        committed = transaction_version(delta, self.pipeline_id)
        if committed is not None and batch_id <= committed:
            return False
        if not files and not self.commit_empty:
            return False
        commit_data_files(
            delta, files, self.schema, self.pipeline_id, batch_id, self.batch_metadata(batch_id)
        )
        delta.update_incremental()  # a write transaction leaves the table object where it was
        return True

    def read(self) -> pa.Table:
        """The whole table (tests, inspection)."""
        return self.table().to_pyarrow_table()
