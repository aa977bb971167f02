"""The operator's state: one file per shard and version, in the run's checkpoint directory.

The operator's tasks (:mod:`jobs.executor.operator`) run over a batch's input repartitioned by key
bucket into a fixed number of *shards* (recorded in the lake's state layout); the task of shard
``p`` owns the buckets Spark's hash partitioning sends to ``p``, and keeps their state in
``<root>/shard-<p>/<version>.arrow``: one Arrow IPC file, a row per bucket (its grouping value, the
bucket's state bytes as :mod:`jobs.executor.bucket_state` makes them, its timer in Spark ms or
null). A task reads the newest version *before* its own and, when its visits changed a bucket,
writes its own version whole (:meth:`jobs.checkpoint.files.CheckpointFiles.replace`: on a local
filesystem a temporary name, then a rename; in a bucket one upload), so:

* a retried or replayed step reads what its first attempt read and writes the same file again
  (the step's input comes from Spark's offset log and is the same on replay);
* a version a killed run wrote for a batch it never committed is read by no step before it, and
  its batch's replay overwrites it (versions grow with the batch: :func:`batch_versions`).

Older versions are deleted once :data:`KEEP_VERSIONS` newer ones exist, so a run killed anywhere
still finds the version its replay needs.

The checkpoint may be on any filesystem Spark writes one to: the tasks read and write the
state files through :class:`jobs.checkpoint.files.CheckpointFiles` (a Python filesystem where
the checkpoint is a URI: Spark's Python workers have no JVM of their own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import pyarrow as pa

from jobs.checkpoint.files import CheckpointFiles, join

FOLDER = "state"
"""The state's folder in the run's checkpoint directory (:func:`state_root`)."""
KEEP_VERSIONS = 4
"""Versions a shard keeps (the newest): a replay needs at most the two before its batch."""
SUFFIX = ".arrow"
SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("state", pa.binary(), nullable=False),
        pa.field("timer_ms", pa.int64()),
    ]
)


class Stored(NamedTuple):
    """A bucket's stored state: its bytes and its timer (Spark ms; None: no wake-up)."""

    blob: bytes
    timer_ms: int | None


def state_root(checkpoint: str) -> str:
    """Where the operator keeps its shards' state files in the run's ``checkpoint`` directory.

    >>> state_root("/lake/_checkpoint")
    '/lake/_checkpoint/state'
    """
    return join(checkpoint, FOLDER)


def batch_versions(batch_id: int) -> tuple[int, int]:
    """(the version below which batch ``batch_id`` reads the newest, the version it writes):
    ``2 * batch id`` and ``2 * batch id + 1`` (lakes of releases that ran a batch's firing as a
    second step also hold the data step's ``2 * batch id``, which no later batch reads once the
    batch wrote its own)."""
    return 2 * batch_id, 2 * batch_id + 1


@dataclass(frozen=True)
class ShardStore:
    """The state files of one shard (the module doc).

    >>> import tempfile
    >>> store = ShardStore(tempfile.mkdtemp(), 0)
    >>> store.save(4, {7: Stored(b"x", 12)})
    >>> store.load(5)
    {7: Stored(blob=b'x', timer_ms=12)}
    >>> store.load(4)
    {}
    """

    root: str
    shard: int

    @property
    def directory(self) -> str:
        return join(self.root, f"shard-{self.shard}")

    @cached_property
    def files(self) -> CheckpointFiles:
        """The shard's folder, on the checkpoint's filesystem."""
        return CheckpointFiles.at(self.directory)

    def versions(self) -> list[int]:
        names = self.files.names()
        return sorted(int(n[: -len(SUFFIX)]) for n in names if _is_version(n))

    def load(self, before: int) -> dict[int, Stored]:
        """The buckets' states of the newest version below ``before`` (empty: none)."""
        older = [v for v in self.versions() if v < before]
        if not older:
            return {}
        if self.files.local:
            with pa.memory_map(self.files.uri(_name(older[-1]))) as source:
                table = pa.ipc.open_file(source).read_all()
        else:
            table = pa.ipc.open_file(pa.py_buffer(self.files.read_bytes(_name(older[-1]))))
            table = table.read_all()
        buckets, states, timers = (table.column(c).to_pylist() for c in SCHEMA.names)
        return {b: Stored(s, t) for b, s, t in zip(buckets, states, timers, strict=True)}

    def save(self, version: int, buckets: Mapping[int, Stored]) -> None:
        """Write ``version`` (whole, or not at all) and delete versions no replay needs."""
        ordered = sorted(buckets.items())
        table = pa.table(
            [
                pa.array([b for b, _ in ordered], pa.int32()),
                pa.array([s.blob for _, s in ordered], pa.binary()),
                pa.array([s.timer_ms for _, s in ordered], pa.int64()),
            ],
            schema=SCHEMA,
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, SCHEMA) as writer:
            writer.write_table(table)
        self.files.replace(_name(version), sink.getvalue().to_pybytes())
        for old in self.versions()[:-KEEP_VERSIONS]:
            if old < version:
                self.files.remove(_name(old))


def _name(version: int) -> str:
    return f"{version:020d}{SUFFIX}"


def _is_version(name: str) -> bool:
    return name.endswith(SUFFIX) and name[: -len(SUFFIX)].isdigit()
