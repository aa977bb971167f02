"""jobs.driver.lake_identity: a lake remembers where it was created and which landing directory it
reads; a copied or moved lake (whose checkpoint names files and state by absolute path) is
refused before Spark starts, naming the setting, both places and the fixes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jobs.config.load import load_pipeline
from jobs.config.values import PipelineConfigError
from jobs.driver.lake_identity import (
    IDENTITY_FILE,
    LakeIdentity,
    check_lake_identity,
    checkpoint_paths,
)

CONF = """\
name = "p"
lake = "lake"
keys = ["k"]
event_time = "ts"
window = "FixedWindows(1h)"
[aggregates]
n = "count()"
[source]
path = "landing"
schema = { k = "string", ts = "timestamp" }
"""


def project(root: Path) -> Path:
    """A project as users keep one: a configuration with relative paths, its landing directory."""
    (root / "landing").mkdir(parents=True)
    (root / "p.toml").write_text(CONF)
    return root


def pipeline_in(root: Path, monkeypatch, **overrides):
    """The project's pipeline as a run in ``root`` sees it (relative paths from there)."""
    monkeypatch.chdir(root)
    return load_pipeline(root / "p.toml", overrides=overrides)


def refused(pipeline) -> PipelineConfigError:
    with pytest.raises(PipelineConfigError) as e:
        check_lake_identity(pipeline, record=True)
    assert "\n" not in str(e.value)
    return e.value


def test_a_copied_or_moved_lake_is_refused_naming_both_places(tmp_path, monkeypatch):
    old = project(tmp_path / "proj")
    check_lake_identity(pipeline_in(old, monkeypatch), record=True)  # the first run records it
    recorded = json.loads((old / "lake" / IDENTITY_FILE).read_text())
    assert recorded["lake"] == str(old / "lake")
    assert recorded["landing"] == recorded["landing_resolved"] == str(old / "landing")
    check_lake_identity(pipeline_in(old, monkeypatch), record=True)  # same place: runs

    copy = tmp_path / "copy"
    shutil.copytree(old, copy, symlinks=True)  # cp -a
    e = refused(pipeline_in(copy, monkeypatch))
    assert e.field == "lake"
    assert f"the lake {copy / 'lake'} was created at {old / 'lake'}: it was copied or moved" in (
        e.message
    )
    assert f"Move it back to {old / 'lake'}, or rebuild it here" in e.message
    assert "'Recovering a lake'" in e.message
    assert sorted(p.name for p in (copy / "lake").iterdir()) == [IDENTITY_FILE]  # nothing new

    moved = tmp_path / "moved"
    old.rename(moved)  # mv
    assert refused(pipeline_in(moved, monkeypatch)).field == "lake"
    assert not old.exists()  # nothing created at the old place
    moved.rename(old)  # moved back: runs again
    check_lake_identity(pipeline_in(old, monkeypatch), record=True)


def test_another_path_to_the_same_lake_is_the_same_lake(tmp_path, monkeypatch):
    root = project(tmp_path / "proj")
    check_lake_identity(pipeline_in(root, monkeypatch), record=True)
    (tmp_path / "link").symlink_to(root / "lake")
    check_lake_identity(pipeline_in(root, monkeypatch, lake=str(tmp_path / "link")))


def test_a_changed_landing_directory_is_refused_naming_source_path(tmp_path, monkeypatch):
    root = project(tmp_path / "proj")
    (root / "b1").mkdir()
    (root / "b2").mkdir()
    (root / "in").symlink_to(root / "b1")
    check_lake_identity(pipeline_in(root, monkeypatch, source={"path": "in"}), record=True)

    # renamed (Spark would take every file again under its new path)
    e = refused(pipeline_in(root, monkeypatch, source={"path": "b1"}))
    assert e.field == "source.path"
    assert f"was created reading {root / 'in'} (-> {root / 'b1'}), source.path is now " in (
        e.message
    )
    assert f"Point source.path back to {root / 'in'} (-> {root / 'b1'})" in e.message
    # the same path leading elsewhere (a file named as one taken before would be skipped)
    (root / "in").unlink()
    (root / "in").symlink_to(root / "b2")
    e = refused(pipeline_in(root, monkeypatch, source={"path": "in"}))
    assert e.field == "source.path" and f"is now {root / 'in'} (-> {root / 'b2'})" in e.message


def test_a_landing_uri_is_the_same_from_any_working_directory(tmp_path, monkeypatch):
    root = project(tmp_path / "proj")
    remote = {"lake": str(root / "lake"), "source": {"path": "s3://bucket/landing"}}
    check_lake_identity(pipeline_in(root, monkeypatch, **remote), record=True)
    monkeypatch.chdir("/")  # cron runs it from elsewhere
    elsewhere = load_pipeline(root / "p.toml", overrides=remote)
    check_lake_identity(elsewhere)
    assert LakeIdentity.of(elsewhere).landing == "s3://bucket/landing"


def legacy_checkpoint(lake: Path, landing: Path) -> None:
    """A checkpoint as Spark writes it (file-source logs, operator metadata), no identity file."""
    ckpt = lake / "_checkpoint"
    entry = {"path": f"file://{landing}/f1.jsonl", "timestamp": 1, "batchId": 0}
    for log, lines in (
        (ckpt / "sources" / "0" / "0", [entry]),
        (ckpt / "sources" / "1" / "0", []),  # the control source: no file yet
        (ckpt / "sources" / "0" / "9.compact", [entry]),
    ):
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("v1\n" + "".join(json.dumps(x) + "\n" for x in lines))
    schema = f"file:{ckpt}/state/0/_stateSchema/default/0_x"
    meta = ckpt / "state" / "0" / "_metadata" / "v2" / "0"
    meta.parent.mkdir(parents=True)
    meta.write_text(
        "v2\n" + json.dumps({"stateStoreInfo": [{"stateSchemaFilePaths": [schema]}]}) + "\n"
    )
    (lake / "_state_layout.json").write_text("{}")


def test_a_lake_older_than_the_identity_file_is_adopted_only_where_its_checkpoint_was_written(
    tmp_path, monkeypatch
):
    old = project(tmp_path / "proj")
    legacy_checkpoint(old / "lake", old / "landing")
    shutil.copytree(old, tmp_path / "copy", symlinks=True)

    e = refused(pipeline_in(tmp_path / "copy", monkeypatch))
    assert e.field == "lake" and f"its checkpoint names {old / 'landing'}/f1.jsonl" in e.message
    assert not (tmp_path / "copy" / "lake" / IDENTITY_FILE).exists()

    check_lake_identity(pipeline_in(old, monkeypatch), record=True)  # adopted where it is
    recorded = LakeIdentity.from_json((old / "lake" / IDENTITY_FILE).read_text())
    lake = str(old / "lake")
    assert recorded == LakeIdentity(lake, str(old / "landing"), str(old / "landing"), lake)

    # the state schema paths alone tell a moved lake whose landing directory did not move
    lake_only = tmp_path / "elsewhere"
    shutil.copytree(old / "lake", lake_only, symlinks=True)
    (lake_only / IDENTITY_FILE).unlink()
    e = refused(pipeline_in(old, monkeypatch, lake=str(lake_only)))
    assert f"its checkpoint names {old / 'lake' / '_checkpoint'}/state/0/_stateSchema" in e.message


def test_unexpected_operator_metadata_contributes_no_path(tmp_path):
    """A state metadata file whose stateStoreInfo is not a list is unexpected: it names nothing
    (the file sources still count), as the function documents, rather than crashing."""
    legacy_checkpoint(tmp_path / "lake", tmp_path / "landing")
    meta = tmp_path / "lake" / "_checkpoint" / "state" / "0" / "_metadata" / "v2" / "0"
    meta.write_text("v2\n" + json.dumps({"stateStoreInfo": 5}) + "\n")
    assert checkpoint_paths(tmp_path / "lake" / "_checkpoint") == [
        str(tmp_path / "landing" / "f1.jsonl")
    ]


def test_a_damaged_identity_file_is_refused_naming_it(tmp_path, monkeypatch):
    root = project(tmp_path / "proj")
    (root / "lake").mkdir()
    (root / "lake" / IDENTITY_FILE).write_text('{"format": 1, "lake": ')
    e = refused(pipeline_in(root, monkeypatch))
    assert e.field == "lake" and f"{root / 'lake' / IDENTITY_FILE} is damaged" in e.message


def test_panestore_check_of_a_copied_project_exits_2_naming_the_lake(tmp_path, monkeypatch, capsys):
    from jobs.cli.commands import main

    old = project(tmp_path / "proj")
    check_lake_identity(pipeline_in(old, monkeypatch), record=True)
    shutil.copytree(old, tmp_path / "copy", symlinks=True)
    monkeypatch.chdir(tmp_path / "copy")
    assert main(["check", "p.toml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("panestore: invalid configuration p.toml: lake: the lake ")
    assert err.count("\n") == 1 and "was created at" in err
