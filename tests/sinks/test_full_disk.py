"""A lake on a full filesystem: appends and the materializer fail without a partial commit, and
resume once space is freed.

The lake lives on a small tmpfs this test mounts (root only; skipped where mounting is not
permitted) and fills with a ballast file, so the writes meet a real ENOSPC.
"""

from __future__ import annotations

import os
import random
import subprocess

import pytest
from deltalake import DeltaTable

from sinks.fold.materializer import Materializer
from tests.sinks.lakes import chunked, random_run, view_dict, write_batches


@pytest.fixture
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount) -> None:
    """Write a ballast file until the filesystem is full (ever smaller writes: to the last byte)."""
    fd = os.open(mount / "ballast", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 64 << 10, 4 << 10, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def free(mount) -> None:
    (mount / "ballast").unlink()


def test_a_full_lake_fails_without_a_partial_commit_and_resumes(small_fs):
    run = random_run(5, str(small_fs / "lake"))
    batches = chunked(run, random.Random(5))
    assert len(batches) >= 3
    log = write_batches(run, batches[:1])
    panes = run.spec.table_path("panes")
    before = DeltaTable(panes).version()

    fill(small_fs)
    with pytest.raises(Exception, match=r"(?i)no space|space left|os error 28"):
        log.append(1, batches[1])
    assert DeltaTable(panes).version() == before  # no partial commit
    assert log.committed_batch_id() == 0

    free(small_fs)
    assert log.append(1, batches[1])  # resumes: the batch is committed once
    for i, b in enumerate(batches[2:], start=2):
        log.append(i, b)
    assert not log.append(1, batches[1])  # a replay is still skipped

    fill(small_fs)
    with pytest.raises(Exception, match=r"(?i)no space|space left|os error 28"):
        Materializer(run.spec).run()
    current_log = os.path.join(run.spec.table_path("current"), "_delta_log")
    commits = (
        [f for f in os.listdir(current_log) if f.endswith(".json")]
        if os.path.isdir(current_log)
        else []
    )
    assert commits in ([], ["00000000000000000000.json"])  # created at most, nothing merged
    free(small_fs)
    Materializer(run.spec).run()
    assert view_dict(run.spec) == run.expected()
