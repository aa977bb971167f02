"""Moving a lake's state out of Spark's ``transformWithState`` store into the operator's shards.

Lakes of state layout formats 1 and 2 kept each bucket's state (and its one timer) in a
``transformWithStateInPandas`` value state in the checkpoint's RocksDB store. The operator now
keeps it in shard files (:mod:`jobs.executor.state_store`). :func:`upgrade_state` reads every
bucket's value as of the last committed batch (:func:`jobs.driver.tws_state.read_bucket_states`)
and writes it as the version that batch would have written, in the shard Spark's
hash partitioning sends the bucket to; the run then records the new format. Killed before that,
the next run does it again from the same committed state.

The ``transformWithState`` store itself (``<checkpoint>/state/0``) is then moved aside, to
``<checkpoint>/state-format-2``, before the run records the new format: Spark compares the
stateful operators its checkpoint's state metadata names with the query's at the first batch of a
restarted query, and refuses a query without the operator its metadata names
(``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``). An upgrade killed after the move
moves it back first.

The older job fired the timers of a batch's watermark advance in a separate no-data batch; when
the last run stopped before it, a tick makes the next run's first batch fire them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.config.pipeline import Pipeline
from jobs.driver.checkpoint import last_commit
from jobs.driver.control import pending_watermark, write_tick
from jobs.driver.tws_state import OPERATOR_ID, read_bucket_states
from jobs.executor.operator_input import spark_partition_of_int
from jobs.executor.state_store import ShardStore, Stored, batch_versions

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


RETIRED_STATE = "state-format-2"
"""Where the upgrade moves the ``transformWithState`` operator's store, in the checkpoint."""


def upgrade_state(spark: SparkSession, pipeline: Pipeline, shards: int) -> int:
    """Write the buckets' states of the checkpoint's ``transformWithState`` store as shard files
    (the module doc); the number of buckets moved."""
    checkpoint = Path(pipeline.checkpoint_path)
    store, retired = checkpoint / "state" / str(OPERATOR_ID), checkpoint / RETIRED_STATE
    if retired.exists() and not store.exists():  # a killed upgrade moved it: read it again
        retired.rename(store)
    last = last_commit(checkpoint)
    if last is None:
        _retire(store, retired)
        return 0
    states = read_bucket_states(spark, str(checkpoint))
    by_shard: dict[int, dict[int, Stored]] = {s: {} for s in range(shards)}
    for bucket, (blob, timer) in states.items():
        by_shard[spark_partition_of_int(bucket, shards)][bucket] = Stored(blob, timer)
    root = os.path.join(pipeline.checkpoint_path, "state")
    for shard, buckets in by_shard.items():
        ShardStore(root, shard).save(batch_versions(last)[1], buckets)
    if pending_watermark(pipeline):
        write_tick(pipeline)
    _retire(store, retired)
    return len(states)


def _retire(store: Path, retired: Path) -> None:
    """Move the operator's store out of Spark's sight (the module doc)."""
    if store.exists():
        store.rename(retired)
