"""Control files do not pile up: after a run, those a committed batch took are deleted (but the
newest), and a name is never used twice (jobs.driver.control)."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.driver.control import clean_control, write_control
from tests.pipelines import small_pipeline


def _taken(pipeline, files: list[Path], batches: int) -> None:
    """A checkpoint whose ``batches`` query batches are planned and committed and whose control
    source (the last file source) took ``files``."""
    ckpt = Path(pipeline.checkpoint_path)
    for log in ("offsets", "commits"):
        (ckpt / log).mkdir(parents=True, exist_ok=True)
        for b in range(batches):
            (ckpt / log / str(b)).write_text("v1\n{}\n")
    (ckpt / "sources" / "0").mkdir(parents=True, exist_ok=True)  # the landing's
    control = ckpt / "sources" / "1"
    control.mkdir(parents=True, exist_ok=True)
    body = [json.dumps({"path": f.as_uri(), "timestamp": 1, "batchId": 0}) for f in files]
    (control / "0").write_text("\n".join(["v1", *body]))


def test_taken_control_files_go_but_the_newest_and_names_are_never_reused(tmp_path):
    pipeline = small_pipeline("c", tmp_path / "lake", tmp_path / "landing")
    written = [Path(write_control(pipeline, "writers", 1000 * i)) for i in range(4)]
    _taken(pipeline, written[:3], batches=2)  # the fourth is not taken yet
    assert clean_control(pipeline) == 3
    left = sorted(Path(pipeline.control_path).iterdir())
    assert left == [written[3]]
    _taken(pipeline, written, batches=2)
    assert clean_control(pipeline) == 0  # the newest stays
    later = Path(write_control(pipeline, "tick", 0))
    assert later.name not in {w.name for w in written}  # Spark takes a path once
    assert later.name == "tick-4.json"


def test_nothing_goes_while_a_batch_waits_for_its_replay(tmp_path):
    pipeline = small_pipeline("c", tmp_path / "lake", tmp_path / "landing")
    written = [Path(write_control(pipeline, "writers", 1000 * i)) for i in range(3)]
    _taken(pipeline, written, batches=2)
    (Path(pipeline.checkpoint_path) / "offsets" / "2").write_text("v1\n{}\n")  # planned only
    assert clean_control(pipeline) == 0
    assert sorted(Path(pipeline.control_path).iterdir()) == written
