"""``panestore status``: the lake's status read without Spark (the lake is written with the sinks
API under the demo configuration; Spark's checkpoint logs are written as Spark writes them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.inspection.status import SCHEMA
from tests.jobs.test_changes_cli import DEMO, demo_conf, demo_lake
from tests.lock_holder import lock_held


def new_lake(tmp_path: Path) -> str:
    """The demo configuration on a lake that was never run (nothing exists under it)."""
    return str(demo_conf(tmp_path))


def write_checkpoint(conf: str, batches: list[list[Path]], watermark_ms: int) -> None:
    """Spark's checkpoint logs after ``batches`` (each: the landing files it read), the last
    committed with ``watermark_ms`` as the next batch's watermark."""
    ckpt = Path(load_pipeline(conf).checkpoint_path)
    for d in ("offsets", "commits", "sources/0"):
        (ckpt / d).mkdir(parents=True, exist_ok=True)
    for b, files in enumerate(batches):
        entries = [
            json.dumps({"path": f.as_uri(), "timestamp": 0, "batchId": b, "action": "add"})
            for f in files
        ]
        (ckpt / "sources" / "0" / str(b)).write_text("\n".join(["v1", *entries]) + "\n")
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1000 * b}
        offsets = ["v1", json.dumps(meta), json.dumps({"logOffset": b})]
        (ckpt / "offsets" / str(b)).write_text("\n".join(offsets))
        commit = {"nextBatchWatermarkMs": watermark_ms if b == len(batches) - 1 else 0}
        (ckpt / "commits" / str(b)).write_text("v1\n" + json.dumps(commit))


def status_json(conf: str, capsys, *args: str) -> tuple[int, dict]:
    code = main(["status", conf, "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_a_lake_never_run_says_so_and_is_healthy(tmp_path, capsys):
    conf = new_lake(tmp_path)
    assert main(["status", conf]) == 0
    out = capsys.readouterr().out
    assert "never run" in out
    code, data = status_json(conf, capsys, "--max-lag", "1m")
    assert code == 0 and data["state"] == "never_run" and data["tables"] == {}
    assert data["last_batch_id"] is None and data["watermark"] is None


def test_a_lake_with_panes_reports_tables_and_the_views_fold(tmp_path, capsys):
    conf, _ = demo_lake(tmp_path)
    code, data = status_json(conf, capsys)
    assert code == 0 and data["state"] == "ok"
    assert data["schema"] == SCHEMA == 1
    assert data["pane_log_version"] == 3 and data["view_folded_version"] == 3
    assert data["view_versions_behind"] == 0
    panes = data["tables"]["panes"]
    assert panes["version"] == 3 and panes["files"] == 3 and panes["bytes"] > 0
    assert data["tables"]["late"]["files"] == 0
    assert data["watermark_from"] == "pane_log" and data["watermark"].startswith("1970-01-01T01:")


def test_the_json_schema_keys(tmp_path, capsys):
    conf, _ = demo_lake(tmp_path)
    _, data = status_json(conf, capsys)
    assert set(data) == {
        "schema",
        "pipeline",
        "lake",
        "checked_at",
        "state",
        "watermark",
        "watermark_from",
        "watermark_lag_s",
        "last_batch_id",
        "last_batch_at",
        "backlog",
        "source_version_read",
        "source_versions_behind",
        "pane_log_version",
        "view_folded_version",
        "view_versions_behind",
        "tables",
        "locks",
        "last_run",
        "running",
        "last_24h",
        "operator_state",
        "not_reported",
        "view_fold_error",
        "view_fold_failed_at",
        "inputs",  # a pipeline of several inputs': each input's (empty for one input)
    }
    assert data["inputs"] == []
    assert set(data["backlog"]) == {"files", "bytes", "oldest_modified"}
    assert set(data["tables"]["panes"]) == {"version", "committed_at", "files", "bytes"}
    assert set(data["locks"]) == {"run", "materializer"}
    assert set(data["locks"]["run"]) == {"held", "holder"}
    assert data["operator_state"] is None  # the demo lake's tables, written without a run


def test_backlog_is_the_landing_files_the_checkpoint_has_not_read(tmp_path, capsys):
    conf, _ = demo_lake(tmp_path)
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    read = [landing / "a.jsonl", landing / "b.jsonl"]
    for f in read:
        f.write_text("{}\n")
    new = landing / "day=2" / "c.jsonl"
    new.parent.mkdir()
    new.write_text("{}\n{}\n")
    (landing / "_watermarks").mkdir()
    (landing / "_watermarks" / "m.json").write_text("{}")  # hidden: not input
    write_checkpoint(conf, [read[:1], read[1:]], watermark_ms=5_000)
    _, data = status_json(conf, capsys)
    assert data["backlog"]["files"] == 1 and data["backlog"]["bytes"] == new.stat().st_size
    assert data["last_batch_id"] == 1
    assert data["watermark_from"] == "checkpoint"
    assert data["watermark"] == "1970-01-01T00:00:05.000Z"
    assert main(["status", conf]) == 0
    assert "1 files" in capsys.readouterr().out


@pytest.mark.heavy
def test_max_lag_exits_1_when_the_watermark_lags(tmp_path, capsys):
    conf, _ = demo_lake(tmp_path)
    recent = int(time.time() * 1000) - 60_000  # a minute ago
    write_checkpoint(conf, [[]], watermark_ms=recent)
    code, data = status_json(conf, capsys, "--max-lag", "10m")
    assert code == 0 and data["state"] == "ok" and 55 < data["watermark_lag_s"] < 600
    code, data = status_json(conf, capsys, "--max-lag", "30s")
    assert code == 1 and data["state"] == "lagging"
    drained = tmp_path / "drained"
    drained.mkdir()
    conf2, _ = demo_lake(drained)
    write_checkpoint(conf2, [[]], watermark_ms=253_402_300_799_999)  # a drain's end of time
    code, data = status_json(conf2, capsys, "--max-lag", "30s")
    assert code == 0 and data["watermark_lag_s"] == 0
    with pytest.raises(SystemExit) as exited:  # misuse: argparse's one line, exit status 2
        main(["status", conf, "--max-lag", "soon"])
    assert exited.value.code == 2
    assert "soon" in capsys.readouterr().err


@pytest.mark.heavy
def test_a_held_lock_is_reported_with_its_holder(tmp_path, capsys):
    conf, spec = demo_lake(tmp_path)
    with lock_held(spec.lake, "run") as pid:
        _, data = status_json(conf, capsys)
        assert data["locks"]["run"]["held"] is True
        assert f"pid {pid}" in data["locks"]["run"]["holder"]
        assert data["locks"]["materializer"] == {"held": False, "holder": None}
        assert main(["status", conf]) == 0
        assert f"held by pid {pid}" in capsys.readouterr().out
    _, data = status_json(conf, capsys)
    assert data["locks"]["run"]["held"] is False  # its holder was killed: the lock is free


def test_a_bad_configuration_is_misuse_on_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 1\n")
    assert main(["status", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.heavy
def test_a_pane_log_source_reports_the_upstream_versions_not_read(tmp_path, capsys):
    (tmp_path / "up").mkdir()
    upstream_conf, _ = demo_lake(tmp_path / "up")  # its pane log is at version 3
    conf = tmp_path / "hourly.toml"
    text = (DEMO.parent / "demo_hourly.toml").read_text()
    text = text.replace('"demo-data/lake-hourly"', repr(str(tmp_path / "hourly")))
    conf.write_text(text.replace('"conf/demo.toml"', repr(upstream_conf)))
    ckpt = Path(load_pipeline(conf).checkpoint_path)
    for d in ("offsets", "commits"):
        (ckpt / d).mkdir(parents=True)
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0})
    (ckpt / "offsets" / "0").write_text(f"v1\n{meta}\n" + json.dumps({"version": 1}))
    (ckpt / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    _, data = status_json(str(conf), capsys)
    assert data["source_version_read"] == 1 and data["source_versions_behind"] == 2
    assert data["backlog"] is None and "backlog" in data["not_reported"]


@pytest.mark.heavy
def test_a_damaged_checkpoint_file_is_named_on_one_line(tmp_path, capsys):
    conf, _ = demo_lake(tmp_path)
    write_checkpoint(conf, [[]], watermark_ms=5_000)
    commit = Path(load_pipeline(conf).checkpoint_path) / "commits" / "0"
    commit.write_text("v1\n{not json")
    assert main(["status", conf]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(commit) in err and "damaged" in err


@pytest.mark.heavy
def test_a_file_a_failed_batch_read_is_still_backlog_and_status_names_the_error(tmp_path, capsys):
    """Spark logs a batch's files before it runs it: batch 1 took c.jsonl and failed (no
    commit). c.jsonl is what every run stops on: it is the backlog, and status names the
    failed run's error."""
    from jobs.driver.run_record import recording
    from jobs.driver.runs import RunResult

    conf, _ = demo_lake(tmp_path)
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    read, failed = landing / "a.jsonl", landing / "c.jsonl"
    read.write_text("{}\n")
    failed.write_text("{}\n{}\n")
    write_checkpoint(conf, [[read], [failed]], watermark_ms=5_000)
    ckpt = Path(load_pipeline(conf).checkpoint_path)
    (ckpt / "commits" / "1").unlink()  # batch 1 never committed
    with (
        pytest.raises(RuntimeError),
        recording(load_pipeline(conf), RunResult(), "scheduled", print),
    ):
        raise RuntimeError("the pane of k='a' has total = 1E+37, beyond its column")
    code, data = status_json(conf, capsys)
    assert code == 1 and data["state"] == "failed" and data["last_batch_id"] == 0
    assert data["backlog"]["files"] == 1 and data["backlog"]["bytes"] == failed.stat().st_size
    assert "beyond its column" in data["last_run"]["error"]
    assert main(["status", conf]) == 1
    out = capsys.readouterr().out
    assert "failed (started" in out and "beyond its column" in out
