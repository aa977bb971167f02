"""The lake's format: table names, column names and types, timestamp bounds, the keys of the
table properties and commit metadata panestore writes, and the format version.

Every table panestore creates records :data:`FORMAT_VERSION` in its table properties
(:data:`FORMAT_PROPERTY`); a table is checked once, when it is opened
(:func:`check_format`), and one of another format is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from sinks.lake.errors import FormatMismatch

# -- format version and table properties ---------------------------------------------------------

FORMAT_PROPERTY = "panestore.format"
FORMAT_VERSION = "1"

# Table properties written on the tables panestore creates (the job's ``panes``, ``late`` and
# ``rejected``; the materializer's ``current``).
FINGERPRINT_PROPERTY = "panestore.fingerprint"
CONFIG_PROPERTY = "panestore.config"
PIPELINE_PROPERTY = "panestore.pipeline"
KIND_PROPERTY = "panestore.table"
# Delta writes a checkpoint (the table's state in one Parquet file) every this many commits; an
# open of the table reads the newest checkpoint and the commits after it. Delta's default (100)
# makes every open replay up to 99 JSON commits: on an object store, one request each.
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
CHECKPOINT_INTERVAL = "10"
# The view's change feed: Delta's change data feed, and the first view version it covers (the
# version of the commit that enabled it: 0 for views created with it).
CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"
CHANGE_FEED_FROM_PROPERTY = "panestore.changeFeedFrom"

RUNS = "runs"  # the run history (sinks.lake.run_history): one row per run
TABLES = ("panes", "current", "late", "rejected", RUNS)

# -- commit metadata ------------------------------------------------------------------------------

# Written on every append of the job (pane log, late, rejected).
BATCH_ID_METADATA = "panestore.batchId"
PIPELINE_METADATA = "panestore.pipeline"
KIND_METADATA = "panestore.table"
# Written on every MERGE of the materializer into ``current``.
FOLDED_VERSION_METADATA = "panestore.paneLogVersion"
FOLDED_FROM_METADATA = "panestore.paneLogFrom"
# Written on each MERGE of a fold in several pieces (sinks.fold.fold_plan): the plan, the piece's
# number; the last piece's commit also carries the two above.
FOLD_PLAN_METADATA = "panestore.foldPlan"
FOLD_PIECE_METADATA = "panestore.foldPiece"
# Delta operations whose commits add no pane rows (maintenance, metadata).
NO_DATA_OPERATIONS = frozenset(
    {
        "CREATE TABLE",
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "CHECKPOINT",
        "UPDATE METADATA",
        "ADD COLUMN",
        "RESTORE",
    }
)

# -- timestamps ------------------------------------------------------------------------------------

# Spark/Delta timestamps must lie within 0001-01-01T00:00:00 .. 9999-12-31T23:59:59.999999 UTC.
MIN_TIMESTAMP_US = -62_135_596_800_000_000
MAX_TIMESTAMP_US = 253_402_300_799_999_999
MAX_TIMESTAMP_MS = MAX_TIMESTAMP_US // 1000
"""Spark's last timestamp in ms: a drain moves Spark's watermark here (the end of time)."""
# The Arrow type of every timestamp column (derived from its ``*_us`` column).
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def representable_us(us: int | None) -> int | None:
    """``us`` if a Delta/Spark timestamp can hold it, else None."""
    if us is None or us < MIN_TIMESTAMP_US or us > MAX_TIMESTAMP_US:
        return None
    return us


# -- pane-log columns ------------------------------------------------------------------------------

Field = tuple[str, pa.DataType]

WINDOW_REF = pa.struct([("start_us", pa.int64()), ("end_us", pa.int64())])
ACCUMULATOR = "accumulator"

# Columns around the configurable ones (keys, aggregates). The ``*_CORE`` lists are what the
# operator emits; the timestamp columns are derived from the ``*_us`` ones (DERIVED_TIMESTAMPS).
WINDOW_CORE: list[Field] = [("window_start_us", pa.int64()), ("window_end_us", pa.int64())]
WINDOW_FIELDS: list[Field] = [
    *WINDOW_CORE,
    ("window_start", TIMESTAMP_TYPE),
    ("window_end", TIMESTAMP_TYPE),
]
PANE_CORE: list[Field] = [
    ("timestamp_us", pa.int64()),
    ("pane_index", pa.int64()),
    ("nonspeculative_index", pa.int64()),
    ("timing", pa.string()),
    ("is_first", pa.bool_()),
    ("is_last", pa.bool_()),
    ("is_retraction", pa.bool_()),
    ("supersedes", pa.list_(WINDOW_REF)),
    ("watermark_us", pa.int64()),
    ("processing_time_us", pa.int64()),
    (ACCUMULATOR, pa.string()),
]
PANE_FIELDS: list[Field] = [PANE_CORE[0], ("timestamp", TIMESTAMP_TYPE), *PANE_CORE[1:]]
DERIVED_TIMESTAMPS = {
    "window_start": "window_start_us",
    "window_end": "window_end_us",
    "timestamp": "timestamp_us",
}
BATCH_FIELDS: list[Field] = [("batch_id", pa.int64()), ("pane_id", pa.string())]
FIXED_NAMES = ["pipeline_id"] + [n for n, _ in WINDOW_FIELDS + PANE_FIELDS + BATCH_FIELDS]
NOT_NULL = frozenset(
    {
        "pipeline_id",
        "window_start_us",
        "window_end_us",
        "timestamp_us",
        "pane_index",
        "nonspeculative_index",
        "timing",
        "is_first",
        "is_last",
        "is_retraction",
        "batch_id",
        "pane_id",
    }
)
# What a table needs to be read as a pane log.
PANE_LOG_REQUIRED = (
    "pipeline_id",
    "window_start_us",
    "window_end_us",
    "pane_index",
    "is_retraction",
    "supersedes",
    "batch_id",
)

# -- view columns ---------------------------------------------------------------------------------

VIEW_META: list[Field] = [
    ("pane_index", pa.int64()),
    ("timing", pa.string()),
    ("is_last", pa.bool_()),
    ("timestamp_us", pa.int64()),
    ("timestamp", TIMESTAMP_TYPE),
    ("pane_log_version", pa.int64()),
    ("absorbed", pa.list_(WINDOW_REF)),
]
VIEW_NOT_NULL = frozenset({"window_start_us", "window_end_us", "pane_index", "pane_log_version"})
# The view is partitioned by the UTC day its windows start on (null: the global window), so a
# MERGE rewrites only the days its changes touch: the recent ones, in a streaming pipeline.
WINDOW_DAY = "window_day"

# -- the view's change feed (Delta's change data feed columns) ------------------------------------

CHANGE_TYPE = "_change_type"  # one of CHANGE_TYPES
COMMIT_VERSION = "_commit_version"  # the view version whose commit made the change
COMMIT_TIMESTAMP = "_commit_timestamp"  # that commit's time
# In the order a consumer applies the rows of one (key, window) within a version.
CHANGE_TYPES = ("delete", "update_preimage", "update_postimage", "insert")
CHANGE_FIELDS: list[Field] = [
    (CHANGE_TYPE, pa.string()),
    (COMMIT_VERSION, pa.int64()),
    (COMMIT_TIMESTAMP, TIMESTAMP_TYPE),
]

# -- columns of the materializer's intermediate tables --------------------------------------------

PANE_LOG_VERSION = "_version"  # the pane-log version of a pane row (added when reading)
OP = "_op"  # what a change-table row does to the view: UPSERT or DELETE
UPSERT, DELETE = "upsert", "delete"


def check_format(what: str, path: str, configuration: Mapping[str, str] | None) -> None:
    """Refuse a table whose recorded lake format is not :data:`FORMAT_VERSION`."""
    found = (configuration or {}).get(FORMAT_PROPERTY)
    if found != FORMAT_VERSION:
        written = "no panestore format" if found is None else f"lake format {found}"
        raise FormatMismatch(
            f"{what} at {path} has {written}; this panestore reads lake format "
            f"{FORMAT_VERSION} only. Nothing was written. Rerun the pipeline into a new lake "
            f"directory (or use the panestore version that wrote it)."
        )
