"""Landing files that changed after the job read them: detected, recorded once, never silent.

Files must land atomically (docs/running.md), and the job reads each landing file once: data
appended to a file after that read (a copy still in progress, a writer that appends) is never
read. This module makes that visible instead of silent.

Spark's file-source log (:mod:`jobs.checkpoint.logs`) records every file the job took with its
modification time as Spark listed it. At the start of a run, :func:`note_changes` compares that
time with each file's current one (one ``stat`` per file still present); a file whose time
differs changed after it was read. The changes not reported before are written to
``<checkpoint>/_landing_changes/pending.json``, and the run makes sure a batch follows (a tick).

The next batch that commits its rejected rows *binds* the pending changes to itself, writing them
to ``<checkpoint>/_landing_changes/<batch id>.json`` (whole, if absent) and then deleting the
pending file, before its commit (a pending change already bound to a batch, left by a run killed
between the two, is not bound again), and records
one rejected row per file (reason :data:`CHANGED`). A replay of that batch reads the same bound
file, so it produces the same rows (exactly once with the table's transaction). A change is reported
once: the bound files and the pending one are the record of what was reported, keyed by the file and
its new modification time (a file that changes again is reported again).

Cost per run: reading the landing source's log (the newest compacted file and the few after it,
one entry per file ever taken, as Spark itself does when a query starts) and one ``stat`` per
taken file. Measured on this machine for 100,000 taken files: see docs/running.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from urllib.parse import unquote

from jobs.checkpoint.files import CheckpointFiles
from jobs.checkpoint.logs import SOURCES, Checkpoint, files_of, local_path, log_files
from jobs.config.pipeline import Pipeline
from jobs.reading.files.paths import has_scheme

CHANGES_DIR = "_landing_changes"
PENDING = "pending.json"
CHANGED = (
    "file changed after it was read (grew or was rewritten: its modification time moved): what "
    "was written after the read is not in the tables; land new data as new files"
)


@dataclass(frozen=True)
class ChangedFile:
    """A landing file whose modification time moved after the job took it."""

    uri: str  # as Spark's file-source log names it
    read_modified_ms: int  # its modification time when Spark listed it for the batch
    modified_ms: int  # its modification time when the change was noticed


def changes_dir(pipeline: Pipeline) -> CheckpointFiles:
    """The folder of the noted changes, beside the checkpoint (on its filesystem)."""
    return pipeline.run_files.sub(CHANGES_DIR)


def _local(uri: str) -> str | None:
    """The local path of a ``file:`` URI of Spark's log (fast for the common forms)."""
    for prefix in ("file:///", "file:/"):
        if uri.startswith(prefix):
            path = "/" + uri[len(prefix) :]
            return unquote(path) if "%" in path else path
    return local_path(uri)


def taken_files(
    checkpoint: Checkpoint, landing: str, through_batch: int | None = None
) -> dict[str, tuple[str, int]]:
    """Every file below ``landing`` that the checkpoint's file sources took: URI -> (its local
    path, its modification time in ms as Spark listed it). ``through_batch``: only the files of
    batches up to that id (Spark logs a batch's files before it runs it: those of a batch that
    failed and was never committed are still to be read); -1: none."""
    inside = os.path.join(os.path.abspath(landing), "")
    out: dict[str, tuple[str, int]] = {}
    sources = files_of(checkpoint).sub(SOURCES)
    for name in sorted(sources.names()):
        for log in log_files(sources.sub(name)):
            for line in log.read_text(encoding="utf-8").splitlines()[1:]:
                if not line.strip():
                    continue
                entry = json.loads(line)
                if through_batch is not None and int(entry.get("batchId", -1)) > through_batch:
                    continue
                local = _local(entry["path"])
                if local is not None and local.startswith(inside):
                    out[entry["path"]] = (local, int(entry.get("timestamp", 0)))
    return out


def find_changes(taken: dict[str, tuple[str, int]]) -> list[ChangedFile]:
    """The taken files (URI -> (local path, listed modification ms)) whose modification time is
    another now; files no longer present are left out (the sink reports a vanished file)."""
    changed = []
    for uri, (local, listed_ms) in taken.items():
        try:
            now_ms = os.stat(local).st_mtime_ns // 1_000_000
        except OSError:
            continue
        if now_ms != listed_ms:
            changed.append(ChangedFile(uri, listed_ms, now_ms))
    return changed


def _read(folder: CheckpointFiles, name: str) -> list[ChangedFile]:
    return [ChangedFile(**c) for c in json.loads(folder.read_text(name))]


def _text(changes: list[ChangedFile]) -> str:
    return json.dumps([asdict(c) for c in changes])


def reported(pipeline: Pipeline, *, bound_only: bool = False) -> set[tuple[str, int]]:
    """(URI, modification ms) of every change already recorded (bound to a batch or pending;
    ``bound_only``: bound to a batch)."""
    folder = changes_dir(pipeline)
    names = [n for n in folder.names() if n.endswith(".json")]
    names = [n for n in names if not (bound_only and n == PENDING)]
    return {(c.uri, c.modified_ms) for n in names for c in _read(folder, n)}


def note_changes(pipeline: Pipeline) -> list[ChangedFile]:
    """Find the taken landing files that changed since they were read and were not reported
    yet, and add them to the pending changes; returns them (empty: nothing new). Local landing
    directories (every input's) and lakes only. Call it under the run lock, before the run's
    query."""
    landings = [
        one.source.path
        for one in pipeline.input_list  # each input's landing directory
        if one.source.is_landing and not has_scheme(one.source.path)
    ]
    if has_scheme(pipeline.lake) or not landings:
        return []
    seen = reported(pipeline)
    new = [
        c
        for landing in landings
        for c in find_changes(taken_files(pipeline.checkpoint_path, landing))
        if (c.uri, c.modified_ms) not in seen
    ]
    if new:
        folder = changes_dir(pipeline)
        before = _read(folder, PENDING) if folder.exists(PENDING) else []
        folder.replace(PENDING, _text(before + new))
    return new


def bind_changes(pipeline: Pipeline, batch_id: int) -> list[ChangedFile]:
    """The changes batch ``batch_id`` records: those bound to it before (a replay), else the
    pending ones not bound to a batch yet, bound to it now (written whole, then the pending
    file deleted). Call it only for a batch whose rejected rows are still to commit."""
    if has_scheme(pipeline.lake):
        return []
    folder = changes_dir(pipeline)
    bound = f"{batch_id}.json"
    if not folder.exists(bound):
        if not folder.exists(PENDING):
            return []
        done = reported(pipeline, bound_only=True)  # a kill between the write and the delete
        new = [c for c in _read(folder, PENDING) if (c.uri, c.modified_ms) not in done]
        if new:
            folder.create(bound, _text(new))
        folder.remove(PENDING)
        if not new:
            return []
    return _read(folder, bound)
