"""Reading a micro-batch's input files back from Spark's checkpoint (jobs.checkpoint.logs)."""

from __future__ import annotations

import json

import pytest

from jobs.checkpoint.logs import batch_input, local_path


def _offsets(ckpt, batch_id: int, timestamp_ms: int, *offsets) -> None:
    lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": timestamp_ms})]
    lines += ["-" if o is None else json.dumps({"logOffset": o}) for o in offsets]
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(batch_id)).write_text("\n".join(lines))


def _source_log(ckpt, source: int, name: str, entries: list[tuple[str, int]]) -> None:
    folder = ckpt / "sources" / str(source)
    folder.mkdir(parents=True, exist_ok=True)
    body = [json.dumps({"path": p, "timestamp": 1, "batchId": b}) for p, b in entries]
    (folder / name).write_text("\n".join(["v1", *body]))


def test_a_batch_reads_the_source_logs_between_its_offsets_and_the_previous_ones(tmp_path):
    ckpt = tmp_path / "ckpt"
    _source_log(ckpt, 0, "0", [("file:///l/a.jsonl", 0)])
    _source_log(ckpt, 0, "1", [("file:///l/b.jsonl", 1), ("file:///l/c%20d.jsonl", 1)])
    _source_log(ckpt, 0, "2", [("file:///l/e.jsonl", 2)])
    _source_log(ckpt, 1, "0", [("file:///lake/_control/drain-0.json", 0)])
    _offsets(ckpt, 0, 1000, 0, None)
    _offsets(ckpt, 1, 2000, 2, 0)  # two source-log batches in one query batch
    _offsets(ckpt, 2, 3000, 2, 0)  # a no-data batch: offsets unchanged

    assert batch_input(ckpt, 0).files == ("file:///l/a.jsonl",)
    got = batch_input(ckpt, 1)
    assert got.timestamp_ms == 2000
    assert got.files == (
        "file:///l/b.jsonl",
        "file:///l/c%20d.jsonl",
        "file:///l/e.jsonl",
        "file:///lake/_control/drain-0.json",
    )
    assert batch_input(ckpt, 2).files == ()


def test_a_compacted_source_log_is_filtered_to_the_batch(tmp_path):
    ckpt = tmp_path / "ckpt"
    # Spark compacts every tenth log into <n>.compact (all entries so far) and deletes the rest
    entries = [(f"file:///l/{n}.jsonl", n) for n in range(10)]
    _source_log(ckpt, 0, "9.compact", entries)
    _offsets(ckpt, 8, 1, 8)
    _offsets(ckpt, 9, 2, 9)
    assert batch_input(ckpt, 9).files == ("file:///l/9.jsonl",)


def test_a_batch_without_offsets_or_source_logs_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        batch_input(tmp_path, 0)
    _offsets(tmp_path, 0, 1, 0)
    with pytest.raises(FileNotFoundError, match="no file-source log"):
        batch_input(tmp_path, 0)


def test_local_paths_of_uris():
    assert local_path("file:///l/c%20d.jsonl") == "/l/c d.jsonl"
    assert local_path("/plain/path") == "/plain/path"
    assert local_path("s3a://bucket/key.jsonl") is None


def _commit(ckpt, batch_id: int, body: str = '{"nextBatchWatermarkMs":0}') -> None:
    (ckpt / "commits").mkdir(parents=True, exist_ok=True)
    (ckpt / "commits" / str(batch_id)).write_text(f"v1\n{body}")


def test_a_checkpoint_behind_the_tables_is_refused(tmp_path):
    from jobs.checkpoint.logs import CheckpointBehind, check_not_behind

    ckpt = tmp_path / "ckpt"
    check_not_behind(ckpt, None)  # a new lake
    with pytest.raises(CheckpointBehind, match="is missing, but the lake's tables hold batches"):
        check_not_behind(ckpt, 3)  # deleted: new input would be numbered 0.. and skipped
    for b in range(3):
        _offsets(ckpt, b, 1, b)
    with pytest.raises(CheckpointBehind, match=r"ends at batch 2, .* up to 3"):
        check_not_behind(ckpt, 3)  # restored from an older copy
    check_not_behind(ckpt, 2)
    _offsets(ckpt, 3, 1, 3)
    check_not_behind(ckpt, 3)
    check_not_behind(ckpt, 2)  # one batch ahead of the tables: the replay of a killed run


def test_tables_behind_the_checkpoint_are_refused_naming_both_places(tmp_path):
    from jobs.checkpoint.logs import TablesBehind, check_tables_not_behind

    ckpt = tmp_path / "ckpt"
    aside = "move its lake and its checkpoint aside"
    check_tables_not_behind(ckpt, {"lake/panes": None}, aside)  # a new lake
    for b in range(3):
        _offsets(ckpt, b, 1, b)
        _commit(ckpt, b)
    check_tables_not_behind(ckpt, {"lake/panes": 2, "lake/late": 2}, aside)
    # a killed run: batch 3 committed to the pane log only, not yet to the checkpoint
    _offsets(ckpt, 3, 1, 3)
    check_tables_not_behind(ckpt, {"lake/panes": 3, "lake/late": 2}, aside)
    with pytest.raises(TablesBehind) as refused:  # the late table restored from a backup
        check_tables_not_behind(ckpt, {"lake/panes": 2, "lake/late": 0}, aside)
    message = str(refused.value)
    assert f"the checkpoint {ckpt} has committed batches up to 2" in message
    assert "lake/late ends at batch 0" in message and "lake/panes" not in message
    assert aside in message and "\n" not in message
    with pytest.raises(TablesBehind, match="lake/panes holds no batch"):  # deleted
        check_tables_not_behind(ckpt, {"lake/panes": None, "lake/late": 2}, aside)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda c: (c / "metadata").write_text("nonsense"), "metadata is damaged"),
        (lambda c: (c / "offsets" / "1").write_text("garbage\n"), "offsets/1 is damaged"),
        (lambda c: (c / "commits" / "1").write_text("v1\n{broken"), "commits/1 is damaged"),
        (lambda c: (c / "commits" / "1").write_bytes(b"\xff\xfe"), "commits/1 is damaged"),
        (lambda c: (c / "state").rmdir(), "has committed batches but no operator state"),
    ],
)
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, damage, message):
    from jobs.checkpoint.logs import CheckpointError, check_readable

    ckpt = tmp_path / "ckpt"
    check_readable(ckpt)  # none yet
    (ckpt / "state").mkdir(parents=True)
    (ckpt / "metadata").write_text('{"id":"q"}')
    for b in range(2):
        _offsets(ckpt, b, 1, b)
        _commit(ckpt, b)
    check_readable(ckpt)
    damage(ckpt)
    with pytest.raises(CheckpointError, match=message) as refused:
        check_readable(ckpt)
    assert "Restore the checkpoint" in str(refused.value) and "move the lake aside" in str(
        refused.value
    )
