"""What the operator's stored state holds, read without Spark: its keys, its windows, the oldest
and the largest open windows (``panestore status``, the run report).

The state is the shard files of :mod:`jobs.executor.state_store`; each bucket is decoded by the
operator's own loader for the pipeline's path (:meth:`jobs.executor.operator.BucketProcessor.held`:
a deduplicated pipeline's ids first, :mod:`jobs.executor.dedup_state`; then a table of windows,
:mod:`jobs.executor.window_store`, or the keys' engine states, :mod:`jobs.executor.bucket_state`
and :class:`panes.state.KeyState`). Of each shard the version read is the one the batch after
the last committed batch would read (:func:`committed_version`): a version a killed run wrote
for a batch it never committed is not read.

A window *held* is one the state keeps: *open* ones, and *closed* ones (their trigger finished;
kept, without their accumulator, only to drop later elements until the watermark passes their
end plus the allowed lateness). A window the watermark closed for good is no longer in the
state, nor is a key with no window left.

Cost (``benchmarks/state_summary.py``: CPU time of one core of a shared 2-core machine, where
wall time ran 2-3 times longer; keys of 2 one-minute windows): the columnar path is read
column by column, exact whatever its size (0.04 s for 100,000 keys, 0.15 s for 400,000). The
lifted and per-element paths decode each key's engine state
(:meth:`panes.state.KeyState.from_bytes`), about 1.2 µs a key plus 1 µs a window (0.33 s for
100,000 keys); so they decode whole buckets only until :data:`MAX_DECODED_BYTES` of key states
were decoded (about 200,000 such keys, 0.5-0.7 s) and only count the keys of the others (0.02 s
per 100,000): the keys and the ids stay exact, the windows, the oldest and the largest are
those of the decoded keys (a key's bucket is its hash: a spread of keys), and
:attr:`StateSummary.complete` is False. A deduplicated pipeline's ids add about 0.2 s per
million.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from jobs.executor.bucket_state import BucketState
from jobs.executor.operator import BucketProcessor, OperatorConfig, output_arrow_schema
from jobs.executor.state_store import ShardStore, batch_versions
from jobs.executor.task_files import TaskOutput
from panes.columnar import Windows
from panes.columnar.keys import engine_keys, key_ids
from panes.columnar.windows import CLOSED, FRESH, INDEX, START
from panes.state import KeyState

LARGEST = 10
"""How many of the largest open windows a summary names."""
MAX_DECODED_BYTES = 32 << 20
"""How many bytes of keys' engine states (the lifted and per-element paths) a summary decodes:
whole buckets, until this much was decoded (:func:`summarize`)."""


@dataclass(frozen=True)
class OpenWindow:
    """An open window held in the state: its key as text (the key column's value; several key
    columns' values joined by ``,``, as ``--key`` takes them), its bounds (µs), the elements
    added to it since it last fired (all of its elements until its first pane: what both engines
    record of a window's size, the ``fresh`` count of :class:`panes.state.WindowState`; an
    accumulating window that fired counts only the elements since) and the panes it emitted."""

    key: str
    start_us: int
    end_us: int
    elements: int
    panes: int


@dataclass(frozen=True)
class StateSummary:
    """What the operator's state held after batch ``batch_id``, the last committed one.

    ``keys``: the keys with a window held (exact). ``decoded_keys``: of them, the keys whose
    windows were read; the counts of ``windows`` held (open and closed, the module doc) and of
    the ``closed`` ones, the ``oldest`` open window (earliest start, then earliest end, then
    smallest key; None: no open window) and the ``largest`` open windows (most
    :attr:`OpenWindow.elements` first, at most :data:`LARGEST`; ties by the earlier start and
    end, then the smaller key) are those of the decoded keys: all of them unless the state
    holds more keys than :func:`summarize` decodes (:attr:`complete`). ``dedup_ids``: the ids
    a deduplicated pipeline remembers (exact; 0 for other pipelines)."""

    batch_id: int
    keys: int
    decoded_keys: int
    windows: int
    closed: int
    dedup_ids: int
    oldest: OpenWindow | None
    largest: tuple[OpenWindow, ...]

    @property
    def open(self) -> int:
        """The open windows held (of the decoded keys)."""
        return self.windows - self.closed

    @property
    def complete(self) -> bool:
        """Whether every key's windows were read (else the window figures are a sample's)."""
        return self.decoded_keys == self.keys


def committed_version(committed_batch: int) -> int:
    """The newest state version a step of batch ``committed_batch`` may have written (a
    shard's newest version at or below it is its state after that batch).

    >>> committed_version(0), committed_version(7)
    (1, 15)
    """
    return batch_versions(committed_batch)[1]


def summarize(
    state_root: str,
    committed_batch: int | None,
    shards: int,
    config: OperatorConfig,
    *,
    largest: int = LARGEST,
    max_bytes: int = MAX_DECODED_BYTES,
) -> StateSummary | None:
    """The summary of the operator's state under ``state_root`` (``shards`` shard folders) after
    batch ``committed_batch``, the last batch the checkpoint committed (None: none, and then no
    summary); ``config``: the pipeline's operator (its path and key columns). ``largest``: how
    many of the largest open windows to name; ``max_bytes``: how many bytes of keys' engine
    states to decode on the lifted and per-element paths (the module doc, "Cost")."""
    if committed_batch is None:
        return None
    processor = BucketProcessor(config, TaskOutput(output_arrow_schema(config.layout), None))
    before = committed_version(committed_batch) + 1
    tally = _Tally(largest)
    for shard in range(shards):
        for stored in ShardStore(state_root, shard).load(before).values():
            held = processor.held(stored)
            tally.dedup_ids += held.ids
            if held.windows is not None:
                tally.add_table(held.windows)
            elif held.keys is not None:
                tally.add_bucket(held.keys, max_bytes)
    return tally.summary(committed_batch)


class _Tally:
    """Counts and candidates gathered bucket by bucket; a window is ordered by its elements,
    then the earlier start and end, then the smaller key (the engine's key value)."""

    def __init__(self, largest: int) -> None:
        self.largest = largest
        self.keys = self.decoded_keys = self.windows = self.closed = self.dedup_ids = 0
        self.decoded_bytes = 0
        self.oldest: tuple[int, int, Any, int, int] | None = None  # start, end, key, ...
        self.top: list[tuple[int, int, int, _Reversed, int]] = []  # a heap, smallest first

    def add_bucket(self, bucket: BucketState, max_bytes: int) -> None:
        """A bucket of the per-key engine: its keys counted, and decoded while fewer than
        ``max_bytes`` bytes of key states were."""
        self.keys += bucket.keys
        if self.decoded_bytes < max_bytes:
            states = bucket.all_states()
            self.decoded_keys += len(states)
            self.decoded_bytes += sum(map(len, states.values()))
            self.add_keys(states.items())

    def add_keys(self, states: Iterable[tuple[Any, bytes]]) -> None:
        """The per-key engine's keys: each key's windows from its :class:`KeyState`."""
        for key, data in states:
            windows = KeyState.from_bytes(data).windows
            for window, ws in windows.items():
                self.windows += 1
                if ws.closed:
                    self.closed += 1
                else:
                    self._open(window.start, window.end, key, ws.fresh, ws.index)

    def add_table(self, windows: Windows) -> None:
        """The columnar engine's table of windows, counted column by column; only its oldest
        open row and its largest open rows become Python values."""
        n = windows.rows
        if n == 0:
            return
        cols = windows.cols
        ids, _ = key_ids(windows.keys)  # ranks in the keys' order
        n_keys = int(ids.max()) + 1
        self.keys += n_keys
        self.decoded_keys += n_keys
        self.windows += n
        closed = np.asarray(cols[CLOSED], bool)
        self.closed += int(closed.sum())
        rows = np.flatnonzero(~closed)
        if rows.size == 0:
            return
        start, fresh, key = cols[START][rows], cols[FRESH][rows], ids[rows]
        oldest = rows[np.lexsort((key, start))[:1]]
        largest = rows[np.lexsort((key, start, -fresh))[: self.largest]]
        chosen = np.unique(np.concatenate([oldest, largest]))
        keys = windows.keys.take(pa.array(chosen, pa.int64()))
        values = engine_keys([keys.column(i).to_pylist() for i in range(keys.num_columns)])
        size, panes = windows.layout.size, cols[INDEX]
        for row, value in zip(chosen.tolist(), values, strict=True):
            at = int(cols[START][row])
            self._open(at, at + size, value, int(cols[FRESH][row]), int(panes[row]))

    def _open(self, start: int, end: int, key: Any, elements: int, panes: int) -> None:
        oldest = self.oldest
        if oldest is None or (start <= oldest[0] and (start, end, key) < oldest[:3]):
            self.oldest = (start, end, key, elements, panes)
        top = self.top
        if len(top) == self.largest and (not top or elements < top[0][0]):
            return  # smaller than every window kept (the common case, decided cheaply)
        entry = (elements, -start, -end, _Reversed(key), panes)
        if len(top) < self.largest:
            heapq.heappush(top, entry)
        elif entry > top[0]:
            heapq.heapreplace(top, entry)

    def summary(self, batch_id: int) -> StateSummary:
        oldest = None
        if self.oldest is not None:
            start, end, key, elements, panes = self.oldest
            oldest = OpenWindow(_key_text(key), start, end, elements, panes)
        largest = tuple(
            OpenWindow(_key_text(key.value), -start, -end, elements, panes)
            for elements, start, end, key, panes in sorted(self.top, reverse=True)
        )
        return StateSummary(
            batch_id,
            self.keys,
            self.decoded_keys,
            self.windows,
            self.closed,
            self.dedup_ids,
            oldest,
            largest,
        )


class _Reversed:
    """A key that orders in reverse: among windows of equal elements and bounds, the heap of
    the largest keeps the smaller key."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(self.value > other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and bool(self.value == other.value)

    __hash__ = None  # type: ignore[assignment]


def _key_text(key: Any) -> str:
    """An engine key as text: the value, or the values of several key columns joined by ``,``.

    >>> _key_text("u1"), _key_text(("u1", 7))
    ('u1', 'u1,7')
    """
    if isinstance(key, tuple):
        return ",".join(str(v) for v in key)
    return str(key)


__all__ = ["LARGEST", "OpenWindow", "StateSummary", "committed_version", "summarize"]
