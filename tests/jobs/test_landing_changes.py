"""jobs.sources.files.changes: a landing file changed after the job read it is found from Spark's
file-source log, reported once, and bound to one batch so a replay records the same rows.
(The run's side: tests/spark/test_landing_files.py.)"""

from __future__ import annotations

import json
import os

from jobs.sources.files.changes import bind_changes, note_changes, taken_files
from tests.pipelines import small_pipeline


def _pipeline(tmp_path):
    return small_pipeline("changes", tmp_path / "lake", tmp_path / "land [1]")


def _take(pipeline, source: int, log: str, paths) -> None:
    """Write a Spark file-source log file taking ``paths`` at their current modification time."""
    folder = os.path.join(pipeline.checkpoint_path, "sources", str(source))
    os.makedirs(folder, exist_ok=True)
    entries = [
        {"path": p.as_uri(), "timestamp": os.stat(p).st_mtime_ns // 10**6, "batchId": 0}
        for p in paths
    ]
    with open(os.path.join(folder, log), "w") as f:
        f.write("v1\n" + "".join(json.dumps(e) + "\n" for e in entries))


def _touch(path, seconds: float) -> None:
    os.utime(path, (seconds, seconds))


def test_a_changed_file_is_noted_once_and_bound_to_one_batch(tmp_path):
    pipeline = _pipeline(tmp_path)
    landing = tmp_path / "land [1]"
    (landing / "gw-1").mkdir(parents=True)
    files = [landing / "a.jsonl", landing / "gw-1" / "b.jsonl", landing / "c.jsonl"]
    for i, f in enumerate(files):
        f.write_text("{}\n")
        _touch(f, 1_700_000_000 + i)
    control = tmp_path / "lake" / "_control" / "tick-0.json"
    control.parent.mkdir(parents=True)
    control.write_text("{}\n")
    # the newest compacted log and the plain log after it are read; older logs are superseded
    _take(pipeline, 0, "9.compact", files[:2])
    _take(pipeline, 0, "10", files[2:])
    _take(pipeline, 1, "0", [control])  # the control source: not a landing file
    assert set(taken_files(pipeline.checkpoint_path, pipeline.source.path)) == {
        f.as_uri() for f in files
    }
    assert note_changes(pipeline) == []

    with open(files[1], "a") as f:  # a writer appends after the read
        f.write("{}\n")
    _touch(files[1], 1_800_000_000)
    files[2].unlink()  # gone: the sink reports a vanished file, not this module
    noted = note_changes(pipeline)
    assert [(c.uri, c.read_modified_ms, c.modified_ms) for c in noted] == [
        (files[1].as_uri(), 1_700_000_001_000, 1_800_000_000_000)
    ]
    assert note_changes(pipeline) == []  # noted once

    assert bind_changes(pipeline, 7) == noted
    assert bind_changes(pipeline, 7) == noted  # a replay of batch 7 records the same files
    assert bind_changes(pipeline, 8) == []  # bound to batch 7 only
    assert note_changes(pipeline) == []  # still reported, once bound

    _touch(files[1], 1_900_000_000)  # changed again: a new change
    assert [c.modified_ms for c in note_changes(pipeline)] == [1_900_000_000_000]
    assert [c.modified_ms for c in bind_changes(pipeline, 9)] == [1_900_000_000_000]
