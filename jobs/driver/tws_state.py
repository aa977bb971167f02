"""The operator's bucket states as a checkpoint last committed them, read without the query.

The stateful operator of state layout formats 1 and 2 (a ``transformWithStateInPandas``
processor) kept one ValueState per key bucket, ``bucket_state`` = ``(blob, timer_ms)``: the
bucket's engine states (:mod:`jobs.executor.bucket_state`) and the event-time timer it had
registered (None: none), in the RocksDB state store of the checkpoint
(``state/<operator>/<partition>``). :func:`read_bucket_states` reads it back through Spark's state
data source (``spark.read.format("statestore")``, a batch read) to move it into the operator's
shard files (:mod:`jobs.driver.state_upgrade`): what a restarted query would have resumed from,
with no streaming query, Python worker or processor involved.

The reader needs the state variable's name (``stateVarName``: a ``transformWithState`` operator
keeps several column families in one store, among them its timers) and the operator's id: the
query has one stateful operator, so 0. Without ``batchId`` it reads the state as of the last batch
in the checkpoint's commit log (a batch that started but did not commit is not seen), including
the trailing no-data batch that fired timers. The key and value schemas, the partition count and
the state store provider come from the checkpoint itself (its state schema file, operator
metadata and offset log), not from the session. Rows are ``key`` (struct ``pst_bucket int``),
``value`` (struct ``blob binary, timer_ms bigint``) and ``partition_id``; a bucket whose state
was cleared has no row.

A session that has started no streaming query has no state store coordinator yet, and the RocksDB
provider's load fails with ``[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED]`` (caused by
``RpcEndpointNotFoundException: Cannot find endpoint: spark://StateStoreCoordinator``; Spark
issue SPARK-58973): asking for ``spark.streams`` first registers the coordinator. A checkpoint
with no committed batch (or no checkpoint at the path) fails with
``[STDS_COMMITTED_BATCH_UNAVAILABLE]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.executor.operator_input import BUCKET

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STATE_FORMAT = "statestore"
STATE_NAME = "bucket_state"
"""The value state's name (the operator of state layout formats 1 and 2)."""
OPERATOR_ID = 0
"""The operator's id in the checkpoint: the query's one stateful operator."""


def read_bucket_states(
    spark: SparkSession, checkpoint_path: str, *, batch_id: int | None = None
) -> dict[int, tuple[bytes, int | None]]:
    """bucket -> ``(blob, timer_ms)`` of the operator's ``bucket_state`` in the checkpoint at
    ``checkpoint_path`` (the query's checkpoint location, not its ``state`` directory), as of
    batch ``batch_id`` (committed; None: the last committed batch)."""
    _ = spark.streams  # registers the state store coordinator the reader reports to
    reader = (
        spark.read.format(STATE_FORMAT)
        .option("stateVarName", STATE_NAME)
        .option("operatorId", OPERATOR_ID)
    )
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    rows = (
        reader.load(checkpoint_path)
        .selectExpr(f"key.`{BUCKET}` AS bucket", "value.blob AS blob", "value.timer_ms AS timer")
        .collect()
    )
    return {r.bucket: (bytes(r.blob), r.timer) for r in rows}
