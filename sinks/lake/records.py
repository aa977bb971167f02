"""The ``late`` and ``rejected`` Delta tables: nothing is lost silently.

- ``late``: elements the engine dropped for lateness (``Dropped`` records), with the watermark
  and processing time at the moment and the reason.
- ``rejected``: input records that could not become elements (unparseable line, missing or
  unparseable event time or key), with the raw record, the source file and the reason.

Both are written exactly once per batch like the pane log (app transaction, skip replays).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from sinks.lake.delta_append import ExactlyOnceAppender
from sinks.lake.lake_format import DERIVED_TIMESTAMPS, TIMESTAMP_TYPE, representable_us
from sinks.lake.pane_log import DEFAULT_LAYOUT, PaneLogLayout


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True, separators=(",", ":"))


def _digest(*parts: Any) -> str:
    return hashlib.sha256(_json(list(parts)).encode()).hexdigest()[:32]


# -- late ------------------------------------------------------------------------------------


def late_core_schema(layout: PaneLogLayout = DEFAULT_LAYOUT) -> pa.Schema:
    """Schema of the late records the operator emits (no pipeline/batch/record id)."""
    return pa.schema(
        [
            *[pa.field(n, t) for n, t in layout.key_fields],
            pa.field("value_json", pa.string()),
            pa.field("timestamp_us", pa.int64(), nullable=False),
            pa.field("window_start_us", pa.int64()),
            pa.field("window_end_us", pa.int64()),
            pa.field("reason", pa.string(), nullable=False),
            pa.field("watermark_us", pa.int64()),
            pa.field("processing_time_us", pa.int64()),
        ]
    )


def late_schema(layout: PaneLogLayout = DEFAULT_LAYOUT) -> pa.Schema:
    """The ``late`` table's schema: the core records, with the timestamps the ``panes`` and
    ``current`` tables have too (``timestamp``, ``window_start``, ``window_end``, each derived
    from its ``*_us`` column), and the pipeline, batch and record ids."""
    core = list(late_core_schema(layout))
    for derived, base in DERIVED_TIMESTAMPS.items():
        at = [f.name for f in core].index(base) + 1
        core.insert(at, pa.field(derived, TIMESTAMP_TYPE))
    return pa.schema(
        [
            pa.field("pipeline_id", pa.string(), nullable=False),
            *core,
            pa.field("batch_id", pa.int64(), nullable=False),
            pa.field("record_id", pa.string(), nullable=False),
        ]
    )


def dropped_record(dropped: Any, layout: PaneLogLayout = DEFAULT_LAYOUT) -> dict[str, Any]:
    """Core late record of one engine ``Dropped`` (duck-typed)."""
    rec = layout.keys_of(dropped.key)
    window = getattr(dropped, "window", None)
    ts = int(dropped.timestamp)
    rec.update(
        value_json=_json(dropped.value),
        timestamp_us=ts,
        window_start_us=None if window is None else int(window.start),
        window_end_us=None if window is None else int(window.end),
        reason=str(dropped.reason),
        watermark_us=None if dropped.watermark is None else int(dropped.watermark),
        processing_time_us=(
            None if dropped.processing_time is None else int(dropped.processing_time)
        ),
    )
    return rec


def finish_late(
    core: pa.Table, pipeline_id: str, batch_id: int, layout: PaneLogLayout = DEFAULT_LAYOUT
) -> pa.Table:
    """Late core records of a batch -> late-table rows (pipeline id, batch id, the timestamp,
    a record id), sorted by key, event time and value.

    A record id hashes the pipeline, the batch, the record's key, event time, value and reason,
    and its ordinal among identical records of ``core``: all of a batch's identical records
    must be in ``core`` (they are: they share a key, and a key's records of a batch come from
    one task), so a subset of a batch can be finished on its own.
    """
    core_names = late_core_schema(layout).names
    rows = core.select(core_names).to_pylist()
    keys = layout.key_names
    rows.sort(key=lambda r: (_json([r[k] for k in keys]), r["timestamp_us"], r["value_json"]))
    seen: dict[str, int] = {}
    for r in rows:
        base = _json([[r[k] for k in keys], r["timestamp_us"], r["value_json"], r["reason"]])
        n = seen.get(base, 0)
        seen[base] = n + 1
        r.update(
            pipeline_id=pipeline_id,
            batch_id=batch_id,
            record_id=_digest(pipeline_id, batch_id, base, n),
            **{derived: representable_us(r[us]) for derived, us in DERIVED_TIMESTAMPS.items()},
        )
    return pa.Table.from_pylist(rows, schema=late_schema(layout))


class LateLog:
    """``late`` table of a pipeline; ``append(batch_id, dropped_or_records_or_table)``."""

    kind = "late"

    def __init__(
        self, path: str | Path, pipeline_id: str, layout: PaneLogLayout = DEFAULT_LAYOUT, **kw: Any
    ) -> None:
        self.layout = layout
        self.core = late_core_schema(layout)
        self.appender = ExactlyOnceAppender(
            path, pipeline_id, late_schema(layout), kind=self.kind, **kw
        )

    def committed_batch_id(self) -> int | None:
        return self.appender.committed_batch_id()

    def core_table(self, data: Any) -> pa.Table:
        """``data`` (a late-core or late table, record batch, dicts or engine ``Dropped``) as a
        table of late core records."""
        if data is None:
            return self.core.empty_table()
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if isinstance(data, pa.Table):
            return data.select(self.core.names).cast(self.core)
        out = []
        for x in data:
            rec = x if isinstance(x, Mapping) else dropped_record(x, self.layout)
            out.append({n: rec.get(n) for n in self.core.names})
        return pa.Table.from_pylist(out, schema=self.core)

    def append(self, batch_id: int, data: Any) -> bool:
        committed = self.committed_batch_id()
        if committed is not None and batch_id <= committed:
            return False
        rows = finish_late(self.core_table(data), self.appender.pipeline_id, batch_id, self.layout)
        return self.appender.append(batch_id, rows)

    def read(self) -> pa.Table:
        return self.appender.read()


# -- rejected --------------------------------------------------------------------------------

REJECTED_CORE = pa.schema(
    [
        pa.field("raw", pa.string()),
        pa.field("source_file", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
    ]
)
REJECTED_SCHEMA = pa.schema(
    [
        pa.field("pipeline_id", pa.string(), nullable=False),
        *REJECTED_CORE,
        pa.field("processing_time_us", pa.int64()),
        pa.field("processing_time", TIMESTAMP_TYPE),
        pa.field("batch_id", pa.int64(), nullable=False),
        pa.field("record_id", pa.string(), nullable=False),
    ]
)


def finish_rejected(
    core: pa.Table | pa.RecordBatch, pipeline_id: str, batch_id: int, processing_time_us: int | None
) -> pa.Table:
    """Rejected core records (``raw``, ``source_file``, ``reason``) of a batch -> rejected-table
    rows stamped with ``processing_time_us`` (the batch timestamp), sorted by file and record.

    A record id hashes the pipeline, the batch, the file, the raw record and the reason, and
    its ordinal among identical records of ``core``: all of a batch's identical rejected records
    must be in ``core`` (the operator passes a batch's rejected records through one group).
    """
    rows = core.select(REJECTED_CORE.names).to_pylist()
    rows.sort(key=lambda r: (r["source_file"] or "", r["raw"] or "", r["reason"]))
    seen: dict[str, int] = {}
    for r in rows:
        base = _json([r["source_file"], r["raw"], r["reason"]])
        n = seen.get(base, 0)
        seen[base] = n + 1
        r.update(
            pipeline_id=pipeline_id,
            processing_time_us=processing_time_us,
            processing_time=representable_us(processing_time_us),
            batch_id=batch_id,
            record_id=_digest(pipeline_id, batch_id, base, n),
        )
    return pa.Table.from_pylist(rows, schema=REJECTED_SCHEMA)


class RejectedLog:
    """``rejected`` table of a pipeline; ``append(batch_id, rows, processing_time_us=...)``.

    ``rows``: dicts or an Arrow table with ``raw``, ``source_file``, ``reason``.
    ``processing_time_us`` is the batch timestamp (deterministic on replay).
    """

    kind = "rejected"

    def __init__(self, path: str | Path, pipeline_id: str, **kw: Any) -> None:
        self.appender = ExactlyOnceAppender(
            path, pipeline_id, REJECTED_SCHEMA, kind=self.kind, **kw
        )

    def committed_batch_id(self) -> int | None:
        return self.appender.committed_batch_id()

    def append(self, batch_id: int, data: Any, processing_time_us: int | None = None) -> bool:
        committed = self.committed_batch_id()
        if committed is not None and batch_id <= committed:
            return False
        if data is None:
            core = REJECTED_CORE.empty_table()
        elif isinstance(data, (pa.Table, pa.RecordBatch)):
            core = data.select(REJECTED_CORE.names)
        else:
            core = pa.Table.from_pylist(
                [{n: dict(r).get(n) for n in REJECTED_CORE.names} for r in data],
                schema=REJECTED_CORE,
            )
        rows = finish_rejected(core, self.appender.pipeline_id, batch_id, processing_time_us)
        return self.appender.append(batch_id, rows)

    def read(self) -> pa.Table:
        return self.appender.read()
