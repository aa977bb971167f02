"""The job's output rows and their tables: what each kind of row is, where it goes, how it ends.

The stateful operator (:mod:`jobs.executor.operator`) emits rows of three kinds
(:data:`RECORD_KIND`), each bound for one Delta table of the pipeline:

* ``pane``: a pane the engine emitted (a pane-log core record) -> the pane log;
* ``late``: an element the engine dropped for lateness -> the late table;
* ``rejected``: an input record that could not become an element -> the rejected table.

A row leaves the operator as a *core* record. *Finishing* (:meth:`OutputTables.finish`) turns
core records of one kind and batch into table rows: ids, timestamps, pipeline and batch columns
(:func:`sinks.lake.pane_log.finish_batch`, :func:`sinks.lake.records.finish_late`,
:func:`sinks.lake.records.finish_rejected`). Finishing numbers the rows that would otherwise get
equal ids within what it is given (one data file), so a key's rows of a batch are finished together
wherever that can be arranged.

An output row whose :data:`DATA_FILE` is set is not a record: it names a data file that an
operator task wrote itself into the kind's table directory (:mod:`jobs.executor.task_files`).
Nor is a row of kind :data:`KIND_CLOCK`: each operator task sends one, with the largest clock
of its input and how many input records it took (:data:`INPUT_RECORDS`:
:class:`jobs.executor.operator.OperatorBatch`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from sinks.lake import (
    REJECTED_CORE,
    PaneLogLayout,
    core_schema,
    finish_batch,
    finish_late,
    finish_rejected,
    late_core_schema,
    pane_figures,
)

RECORD_KIND = "record_kind"
"""The output column saying what a row is: one of the ``KIND_`` values."""
KIND_PANE = "pane"
KIND_LATE = "late"
KIND_REJECTED = "rejected"
KINDS = (KIND_PANE, KIND_LATE, KIND_REJECTED)
"""In commit order: the pane log first."""
KIND_CLOCK = "clock"
"""A task's largest input clock and its input records (no table)."""
DATA_FILE = "data_file"
"""The output column naming a data file a task wrote (relative to its table's root)."""
INPUT_RECORDS = "pst_records"
"""The output column of a task's ``clock`` row: the input records the task took (each an
element, a late record or a rejected one; control and clock rows are not records)."""
PROCESSING_TIME = "processing_time_us"
FIGURES_KEY = "panestore.figures"
"""Key of a data file's figures (:meth:`OutputTables.figures`) in its Parquet metadata."""


@dataclass(frozen=True)
class TableTarget:
    """Where one kind of the output is written: the table's URI and schema, the core columns
    finishing reads, and the columns whose equal values must be finished together."""

    kind: str
    table_uri: str
    schema: pa.Schema
    core: pa.Schema
    identity: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.core.names)


@dataclass(frozen=True)
class OutputTables:
    """The three targets of a pipeline's output, and how their rows are finished. Picklable:
    shipped to the tasks that write data files."""

    pipeline_id: str
    layout: PaneLogLayout
    targets: Mapping[str, TableTarget]

    @classmethod
    def of(
        cls,
        pipeline_id: str,
        layout: PaneLogLayout,
        uris: Mapping[str, str],
        schemas: Mapping[str, pa.Schema],
    ) -> OutputTables:
        """The targets of a pipeline whose tables are at ``uris`` with ``schemas`` (by kind)."""
        keys = tuple(layout.key_names)
        rejected = pa.schema([*REJECTED_CORE, pa.field(PROCESSING_TIME, pa.int64())])
        core = {
            KIND_PANE: core_schema(layout),
            KIND_LATE: late_core_schema(layout),
            KIND_REJECTED: rejected,
        }
        identity = {KIND_PANE: keys, KIND_LATE: keys, KIND_REJECTED: tuple(REJECTED_CORE.names)}
        return cls(
            pipeline_id,
            layout,
            {k: TableTarget(k, uris[k], schemas[k], core[k], identity[k]) for k in KINDS},
        )

    def finish(self, kind: str, core: pa.Table, batch_id: int) -> pa.Table:
        """Core records of ``kind`` of batch ``batch_id`` -> rows of its table."""
        if kind == KIND_PANE:
            return finish_batch(core, self.pipeline_id, batch_id, self.layout)
        if kind == KIND_LATE:
            return finish_late(core, self.pipeline_id, batch_id, self.layout)
        # every rejected row of a batch carries the batch timestamp
        return finish_rejected(
            core, self.pipeline_id, batch_id, core.column(PROCESSING_TIME)[0].as_py()
        )

    @staticmethod
    def figures(kind: str, core: pa.Table) -> str:
        """What a batch's progress reports of these rows besides their number (JSON): panes by
        timing and how many are retractions."""
        if kind != KIND_PANE or not core.num_rows:
            return "{}"
        by_timing, retractions = pane_figures(core)
        return json.dumps({"by_timing": by_timing, "retractions": retractions})
