"""The run's directory through one reader (jobs.checkpoint.files): on the local filesystem and in
a bucket of the GCS emulator through the Python filesystem, the same answers; the checkpoint's
logs read back (jobs.checkpoint.logs) from a bucket as from a local folder."""

from __future__ import annotations

import json

import pytest

from jobs.checkpoint.clocks import Clocks
from jobs.checkpoint.files import CheckpointFiles, LocalStore, is_local, join, local_path


def _exercise(files: CheckpointFiles) -> None:
    """What the run does with its directory, asserted the same on any store."""
    assert files.names("offsets") == [] and not files.exists("offsets/0")
    assert files.read_if_any("_fingerprint.json") is None
    assert files.create("offsets/0", "v1\n{}\n")
    assert not files.create("offsets/0", "v1\nother\n")  # write-once: the first stays
    assert files.read_text("offsets/0") == "v1\n{}\n"
    files.replace("_fingerprint.json", '{"a": 1}')
    files.replace("_fingerprint.json", '{"a": 2}')  # whole, in place of the old
    assert json.loads(files.read_text("_fingerprint.json")) == {"a": 2}
    files.create("offsets/1", b"v1\n{}\n")
    assert sorted(files.names("offsets")) == ["0", "1"] and files.is_dir("offsets")
    assert not files.is_dir("offsets/0") and files.exists("offsets/0")
    assert files.modified_ms("offsets/1") > 1_600_000_000_000
    files.remove("offsets/0")
    files.remove("offsets/0")  # nothing when there is none
    assert files.names("offsets") == ["1"]
    with pytest.raises(FileNotFoundError):
        files.read_text("offsets/0")
    assert files.sub("offsets").read_text("1") == "v1\n{}\n"


def test_local_files_answer_as_the_run_needs(tmp_path):
    files = CheckpointFiles.at(str(tmp_path / "run"))
    assert isinstance(files.store, LocalStore) and files.local
    _exercise(files)
    assert not [p for p in (tmp_path / "run").rglob("*.tmp")]  # no temporary left behind
    uri = (tmp_path / "run").as_uri()  # file:///...
    assert is_local(uri) and local_path(uri) == str(tmp_path / "run")
    assert CheckpointFiles.at(uri).read_text("offsets/1") == "v1\n{}\n"


def test_join_keeps_a_uri_whole():
    assert join("gs://b/ck/", "state", "shard-0") == "gs://b/ck/state/shard-0"
    assert join("/tmp/x", "a/") == "/tmp/x/a"
    assert not is_local("gs://b/x") and is_local("/x") and is_local("file:///x")


def test_files_in_a_gcs_bucket_answer_as_local_ones_without_spark(gcs_bucket):
    files = CheckpointFiles.at(f"{gcs_bucket}/runs/p")
    assert not files.local and type(files.store).__name__ == "ArrowStore"
    _exercise(files)


def test_the_checkpoints_logs_read_from_a_bucket_as_from_a_folder(gcs_bucket, tmp_path):
    from jobs.checkpoint.logs import (
        batch_clocks,
        batch_input,
        committed_clock,
        last_batch,
        last_commit,
    )

    where = [CheckpointFiles.at(f"{gcs_bucket}/ck"), CheckpointFiles.at(str(tmp_path / "ck"))]
    for files in where:
        meta = {"batchWatermarkMs": 5, "batchTimestampMs": 7}
        for b in (0, 1):
            files.create(f"offsets/{b}", f'v1\n{json.dumps(meta)}\n{{"logOffset":{b}}}\n')
            files.create(
                f"sources/0/{b}",
                "v1\n" + json.dumps({"path": f"file:///in/f{b}", "timestamp": b, "batchId": b}),
            )
        files.create("commits/0", 'v1\n{"nextBatchWatermarkMs": 9}\n')
    answers = [
        (
            last_batch(f),
            last_commit(f),
            batch_input(f, 1).files,
            batch_clocks(f, 1),
            committed_clock(f).watermark_ms,  # type: ignore[union-attr]
        )
        for f in where
    ]
    assert answers[0] == answers[1] == (1, 0, ("file:///in/f1",), Clocks(5, 7), 9)
    assert last_batch(where[0].root) == 1  # a URI alone reads the same bucket


def test_a_checkpoint_in_a_missing_bucket_is_refused_in_one_line_before_spark(
    gcs_bucket, tmp_path, capsys
):
    from jobs.cli.commands import main

    (tmp_path / "in").mkdir()
    conf = tmp_path / "p.toml"
    for checkpoint, says in (
        (f"{gcs_bucket}-missing/ck", "does not exist (or these credentials cannot see it)"),
        (f"{gcs_bucket}/ck", None),
    ):
        conf.write_text(
            f'name = "p"\nlake = "{tmp_path / "lake"}"\ncheckpoint = "{checkpoint}"\n'
            'keys = ["k"]\nevent_time = "ts"\nwindow = "FixedWindows(1h)"\n'
            '[aggregates]\nn = "count()"\n[source]\n'
            f'path = "{tmp_path / "in"}"\nschema = {{ k = "string", ts = "timestamp" }}\n'
        )
        code = main(["check", str(conf)])
        err = capsys.readouterr().err
        if says is None:
            assert code == 0, err
        else:
            assert code == 2 and says in err and err.count("\n") == 1, err
            assert err.startswith(f"panestore: invalid configuration {conf}: checkpoint: ")
