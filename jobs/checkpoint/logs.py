"""What Spark's streaming checkpoint says a micro-batch read: its input files, its clocks.

Spark's file source keeps, per source ``i``, a metadata log of the files each of *its own*
batches takes (``sources/<i>/<n>``: a ``v1`` line, then one JSON entry per file with its URI
``path``, modification ``timestamp`` and ``batchId``; every tenth log is compacted into
``<n>.compact``, which holds every entry up to ``n``). The query's offset log
(``offsets/<batch>``: a ``v1`` line, the batch metadata with ``batchTimestampMs``, then one
offset line per source) maps a query batch to each source's log offset, so batch ``b`` of the
query read the entries of source logs ``(offset(b - 1), offset(b)]``.

:func:`batch_input` reads that back, so the job can tell which listed files a batch could not
read (Spark skips a file that vanished between its listing and the read with only a log warning)
and report them instead of losing them silently. Checkpoint files are immutable once written,
so a replayed batch gets the same answer. :func:`recorded_offsets` reads the offsets of a source
read by version (a pane log, a Delta table) back, for their checks before the query starts.

The checkpoint is read through :class:`jobs.checkpoint.files.CheckpointFiles`, so it may be on
any filesystem Spark writes one to (a local path, ``gs://``, ``s3a://``, ``abfss://``,
``hdfs://``, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from jobs.checkpoint.clocks import Clocks
from jobs.checkpoint.files import CheckpointFiles
from jobs.checkpoint.files import local_path as local_path
from jobs.checkpoint.offsets import TableOffset
from sinks.lake import LakeError

OFFSETS, COMMITS, SOURCES = "offsets", "commits", "sources"


@dataclass(frozen=True)
class BatchInput:
    """The files one query batch read from its file sources, in source and log order."""

    batch_id: int
    timestamp_ms: int
    files: tuple[str, ...]
    modified_ms: tuple[int, ...] = ()  # each file's modification time as Spark listed it


Checkpoint = str | os.PathLike[str] | CheckpointFiles
"""A checkpoint: its location (a path or a URI) or its files (:mod:`jobs.checkpoint.files`)."""


def files_of(checkpoint: Checkpoint) -> CheckpointFiles:
    """The files of ``checkpoint`` (on the store its location is on)."""
    if isinstance(checkpoint, CheckpointFiles):
        return checkpoint
    return CheckpointFiles.at(os.fspath(checkpoint))


def _named(checkpoint: Checkpoint) -> str:
    """The checkpoint as messages name it."""
    return checkpoint.root if isinstance(checkpoint, CheckpointFiles) else os.fspath(checkpoint)


@dataclass(frozen=True)
class LogFile:
    """One file of a checkpoint log folder: its name, read through the folder's store."""

    folder: CheckpointFiles
    name: str

    def read_text(self, encoding: str = "utf-8") -> str:
        """The file's text."""
        return self.folder.read_bytes(self.name).decode(encoding)

    def __str__(self) -> str:
        return self.folder.uri(self.name)


def _lines(files: CheckpointFiles, name: str) -> list[str]:
    return files.read_text(name).splitlines()


def _source_offsets(checkpoint: CheckpointFiles, batch_id: int) -> tuple[int, list[int | None]]:
    """(batch timestamp ms, each source's log offset) of ``batch_id``; -1 before the first."""
    lines = _lines(checkpoint, f"{OFFSETS}/{batch_id}")
    timestamp_ms = int(json.loads(lines[1]).get("batchTimestampMs", 0))
    offsets: list[int | None] = []
    for line in lines[2:]:
        line = line.strip()
        offset = json.loads(line).get("logOffset") if line.startswith("{") else None
        offsets.append(None if offset is None else int(offset))
    return timestamp_ms, offsets


def _log_entries(source_log: CheckpointFiles, n: int) -> list[tuple[str, int]]:
    """(file URI, modification time ms) of source-log batch ``n`` (from its own file or a
    compacted one)."""
    own, compact = str(n), f"{n}.compact"
    if source_log.exists(own):
        entries = [json.loads(x) for x in _lines(source_log, own)[1:] if x.strip()]
    elif source_log.exists(compact):
        entries = [
            e
            for e in (json.loads(x) for x in _lines(source_log, compact)[1:] if x.strip())
            if e.get("batchId") == n
        ]
    else:
        raise FileNotFoundError(
            f"the checkpoint has no file-source log {source_log.uri(own)} (nor "
            f"{source_log.uri(compact)})"
        )
    return [(e["path"], int(e.get("timestamp", 0))) for e in entries]


def batch_input(checkpoint: Checkpoint, batch_id: int) -> BatchInput:
    """The files query batch ``batch_id`` took from every file source of the checkpoint.

    Sources whose offset is not a file-source offset (no ``logOffset``) contribute nothing.
    Raises ``FileNotFoundError`` if the checkpoint has no offsets for the batch.
    """
    ckpt = files_of(checkpoint)
    timestamp_ms, upto = _source_offsets(ckpt, batch_id)
    before: list[int | None] = [None] * len(upto)
    if batch_id > 0 and ckpt.exists(f"{OFFSETS}/{batch_id - 1}"):
        before = _source_offsets(ckpt, batch_id - 1)[1]
        before += [None] * (len(upto) - len(before))
    files: list[tuple[str, int]] = []
    for i, (end, start) in enumerate(zip(upto, before, strict=True)):
        if end is None:
            continue
        first = -1 if start is None else start
        for n in range(first + 1, end + 1):
            files.extend(_log_entries(ckpt.sub(f"{SOURCES}/{i}"), n))
    return BatchInput(
        batch_id, timestamp_ms, tuple(f for f, _ in files), tuple(t for _, t in files)
    )


def batch_clocks(checkpoint: Checkpoint, batch_id: int) -> Clocks:
    """The watermark and timestamp (ms) Spark's offset log records for batch ``batch_id``
    (fixed before the batch runs: a replay gets the same)."""
    metadata = json.loads(_lines(files_of(checkpoint), f"{OFFSETS}/{batch_id}")[1])
    return Clocks(int(metadata.get("batchWatermarkMs", 0)), int(metadata["batchTimestampMs"]))


RECOVERY = (
    "Restore the checkpoint that belongs to these tables, or rebuild: move the lake aside and "
    "run again, which reprocesses every file still in the landing directory (docs/running.md, "
    "'Recovering a lake')."
)


class CheckpointError(LakeError):
    """The checkpoint cannot be used with the lake's tables; the message says how to recover."""


class CheckpointBehind(CheckpointError):
    """The lake's tables hold batches the checkpoint does not know: a run would lose data."""


class TablesBehind(CheckpointError):
    """The checkpoint has committed batches a table of the lake does not hold (the table was
    restored from an older copy, or deleted): a run would go on after them and lose them."""


def log_files(folder: Checkpoint) -> list[LogFile]:
    """The files of a checkpoint log folder that hold all its entries, oldest first, as Spark
    reads them when a query starts: the newest compacted file (``n.compact``, every entry up to
    ``n``) and the plain ``n`` files after it (empty if there is no such folder)."""
    files = files_of(folder)
    names = files.names()
    compact = max((int(n.split(".")[0]) for n in names if n.endswith(".compact")), default=None)
    plain = sorted(int(n) for n in names if n.isdigit() and (compact is None or int(n) > compact))
    head = [LogFile(files, f"{compact}.compact")] if compact is not None else []
    return head + [LogFile(files, str(n)) for n in plain]


def _log_ids(folder: CheckpointFiles) -> list[int]:
    """The batch ids of a checkpoint log folder, ascending (empty if there is none)."""
    return sorted(int(n) for n in folder.names() if n.isdigit())


def _check_json_file(files: CheckpointFiles, name: str, versioned: bool) -> None:
    """Raise ValueError/OSError unless ``name`` is a JSON (``versioned``: log) file Spark
    reads."""
    lines = _lines(files, name)
    if versioned:
        if not (lines and lines[0].startswith("v")):
            raise ValueError("no log version line")
        lines = lines[1:]
    json.loads(lines[0] if lines else "")


def check_readable(checkpoint: Checkpoint) -> None:
    """Refuse a damaged checkpoint before Spark reads it, naming the damaged file.

    Checks what Spark reads first: the query ``metadata`` (JSON), the newest two files of the
    offset and commit logs (a version line, then JSON), and the operator state folder once a
    batch has been committed. Raises :class:`CheckpointError`.
    """
    ckpt = files_of(checkpoint)
    files = [("metadata", False)] if ckpt.exists("metadata") else []
    for log in (OFFSETS, COMMITS):
        files += [(f"{log}/{i}", True) for i in _log_ids(ckpt.sub(log))[-2:]]
    for name, versioned in files:
        try:
            _check_json_file(ckpt, name, versioned)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise CheckpointError(
                f"the checkpoint file {ckpt.uri(name)} is damaged ({e}). {RECOVERY}"
            ) from None
    if _log_ids(ckpt.sub(COMMITS)) and not ckpt.is_dir("state"):
        raise CheckpointError(
            f"the checkpoint {ckpt.root} has committed batches but no operator state "
            f"({ckpt.uri('state')} is missing). {RECOVERY}"
        )


def log_entry(files: CheckpointFiles, name: str) -> dict[str, Any]:
    """The JSON object after the version line of the checkpoint log file ``name`` (empty if
    none); a damaged file raises :class:`CheckpointError` naming it."""
    try:
        lines = _lines(files, name)
        data = json.loads(lines[1]) if len(lines) > 1 and lines[1].strip() else {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(
            f"the checkpoint file {files.uri(name)} is damaged ({e}). {RECOVERY}"
        ) from None
    return data if isinstance(data, dict) else {}


def last_batch(checkpoint: Checkpoint) -> int | None:
    """The highest batch id in the checkpoint's offset log, or None (no checkpoint yet)."""
    ids = _log_ids(files_of(checkpoint).sub(OFFSETS))
    return ids[-1] if ids else None


def last_commit(checkpoint: Checkpoint) -> int | None:
    """The highest batch id in the checkpoint's commit log, or None (no batch committed)."""
    ids = _log_ids(files_of(checkpoint).sub(COMMITS))
    return ids[-1] if ids else None


class CommittedClock(NamedTuple):
    """The last committed batch of a checkpoint: its id, when Spark committed it (ms, the commit
    log file's time) and the watermark after it (ms; None: not recorded)."""

    batch_id: int
    committed_ms: int
    watermark_ms: int | None


def committed_clock(checkpoint: Checkpoint) -> CommittedClock | None:
    """The last committed batch's clock (None: no batch committed): the watermark is the commit
    log's ``nextBatchWatermarkMs``, else the offset log's ``batchWatermarkMs``."""
    ckpt = files_of(checkpoint)
    last = last_commit(ckpt)
    if last is None:
        return None
    commit_file = f"{COMMITS}/{last}"
    committed_ms = ckpt.modified_ms(commit_file)
    watermark = log_entry(ckpt, commit_file).get("nextBatchWatermarkMs")
    if watermark is None and ckpt.exists(f"{OFFSETS}/{last}"):
        watermark = log_entry(ckpt, f"{OFFSETS}/{last}").get("batchWatermarkMs")
    return CommittedClock(last, committed_ms, None if watermark is None else int(watermark))


def check_tables_not_behind(
    checkpoint: Checkpoint, committed: Mapping[str, int | None], set_aside: str
) -> None:
    """Refuse tables that lack batches the checkpoint has committed (``committed``: each
    table's path -> the highest batch it holds, None for none).

    Spark writes a batch to its commit log after the batch sink has committed it to every table,
    so each table holds at least the checkpoint's last committed batch. A table restored from
    an older copy, or deleted, under a checkpoint that survived would otherwise be continued at
    the checkpoint's next batch, and the batches in between would be missing from it for good.
    Raises :class:`TablesBehind` naming both places and how to rebuild (``set_aside``: how to
    move the lake and its checkpoint aside)."""
    done = last_commit(checkpoint)
    if done is None:
        return
    behind = {path: have for path, have in committed.items() if have is None or have < done}
    if not behind:
        return
    said = "; ".join(
        f"{path} {'holds no batch' if have is None else f'ends at batch {have}'}"
        for path, have in behind.items()
    )
    raise TablesBehind(
        f"the checkpoint {_named(checkpoint)} has committed batches up to {done}, but {said}: the "
        "tables were restored from an older copy or deleted, and a run would go on after "
        f"batch {done} without the batches they lack. Restore the tables that belong to this "
        f"checkpoint, or rebuild: {set_aside} and run again, which reprocesses the input "
        "still there (docs/running.md, 'Recovering a lake')."
    )


def check_not_behind(checkpoint: Checkpoint, committed: int | None) -> None:
    """Refuse a checkpoint that is missing or older than the tables' last committed batch.

    The tables skip every batch id they hold (exactly-once), so a checkpoint that starts over
    (deleted) or was restored from an older copy would number new input with ids the tables
    already have, and that input would be skipped: silent loss. Raises :class:`CheckpointBehind`
    saying how to recover.
    """
    if committed is None:
        return
    have = last_batch(checkpoint)
    if have is not None and have >= committed:
        return
    state = "is missing" if have is None else f"ends at batch {have}"
    raise CheckpointBehind(
        f"the checkpoint {_named(checkpoint)} {state}, but the lake's tables hold batches up to "
        f"{committed}: a run would number new input as batches the tables already have and skip "
        f"it. {RECOVERY}"
    )


@dataclass(frozen=True)
class RecordedOffset:
    """An offset of a source read by version (:mod:`jobs.checkpoint.offsets`) in the offset log:
    the batch it ends, the offset, and when Spark wrote it (the offset file's modification
    time, ms)."""

    batch_id: int
    offset: TableOffset
    written_ms: int


def recorded_offsets(checkpoint: Checkpoint) -> list[RecordedOffset]:
    """The offsets of a source read by version (end offsets: a pane log's, a Delta table's) in
    the checkpoint's offset log, by batch id; planned batches that were not committed included.
    Empty without a checkpoint."""
    folder = files_of(checkpoint).sub(OFFSETS)
    out = []
    for batch_id in _log_ids(folder):
        name = str(batch_id)
        try:
            lines = _lines(folder, name)[2:]
            offsets = [json.loads(x) for x in lines if x.strip().startswith("{")]
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise CheckpointError(
                f"the checkpoint file {folder.uri(name)} is damaged ({e}). {RECOVERY}"
            ) from None
        written_ms = folder.modified_ms(name)
        for o in offsets:
            if isinstance(o, dict) and "version" in o and "logOffset" not in o:
                out.append(RecordedOffset(batch_id, TableOffset.from_json(o), written_ms))
    return out
