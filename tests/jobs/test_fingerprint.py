"""jobs.driver.fingerprint: a lake is bound to the settings whose change would corrupt it; a run or
a check with one of them changed is refused before Spark, naming it; the others may change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs.config.load import pipeline_from_dict
from jobs.config.pipeline import Pipeline
from jobs.config.values import PipelineConfigError
from jobs.driver.fingerprint import (
    FINGERPRINT_FILE,
    Fingerprint,
    bind_lake_configuration,
    check_lake_configuration,
)


def config(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """A pipeline configuration (TOML structure); ``changes`` replace top-level settings and are
    merged into ``source`` / ``watermark``."""
    conf: dict[str, Any] = {
        "name": "views",
        "lake": str(tmp_path / "lake"),
        "keys": ["device_id"],
        "event_time": "ts",
        "window": "FixedWindows(1h)",
        "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
        "allowed_lateness": "1h",
        "source": {
            "path": str(tmp_path / "landing"),
            "create_path": True,
            "schema": {"device_id": "string", "ts": "timestamp", "seconds": "long", "ad": "string"},
        },
        "watermark": {"delay": "5m"},
        "aggregates": {"plays": "count()", "watched": "sum(seconds)"},
        "state_buckets": 4,
    }
    for name, value in changes.items():
        if name in ("source", "watermark"):
            conf[name] = {**conf[name], **value}
        else:
            conf[name] = value
    return conf


def pipeline(tmp_path: Path, **changes: Any) -> Pipeline:
    return pipeline_from_dict(config(tmp_path, **changes))


def schema(**columns: str) -> dict[str, Any]:
    types = {"device_id": "string", "ts": "timestamp", "seconds": "long", "ad": "string"}
    return {"schema": {**types, **columns}}


@pytest.fixture
def lake(tmp_path) -> Pipeline:
    """A lake that has run under :func:`config` (its fingerprint recorded, a checkpoint)."""
    first = pipeline(tmp_path)
    bind_lake_configuration(first)
    Path(first.checkpoint_path).mkdir()
    return first


REFUSED = {
    "a value column's type": ({"source": schema(seconds="double")}, "source.schema.seconds"),
    "a key column's type": ({"source": schema(device_id="long")}, "source.schema.device_id"),
    "the event time's type": (
        {"source": schema(ts="long")},
        "source.schema.ts",
    ),
    "the keys": ({"keys": ["device_id", "ad"]}, "keys"),
    "the event-time column": (
        {"source": schema(ts2="timestamp"), "event_time": "ts2"},
        "event_time",
    ),
    "the watermark policy": (
        {"watermark": {"policy": "writer_noted", "delay": "0s"}},
        "watermark.policy",
    ),
    "a new aggregate": (
        {"aggregates": {"plays": "count()", "watched": "sum(seconds)", "top": "max(seconds)"}},
        "aggregates",
    ),
    "an aggregate's expression": (
        {"aggregates": {"plays": "count()", "watched": "max(seconds)"}},
        "aggregates.watched",
    ),
    "the aggregates' order": (
        {"aggregates": {"watched": "sum(seconds)", "plays": "count()"}},
        "aggregates",
    ),
    "the window": ({"window": "FixedWindows(2h)"}, "window"),
    "the trigger": (
        {"trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))"},
        "trigger",
    ),
    "the accumulation mode": ({"accumulation_mode": "accumulating"}, "accumulation_mode"),
    "the allowed lateness": ({"allowed_lateness": "2h"}, "allowed_lateness"),
    "the timestamp combiner": ({"timestamp_combiner": "earliest"}, "timestamp_combiner"),
    "the on-time behavior": ({"on_time_behavior": "fire_if_non_empty"}, "on_time_behavior"),
    "the closing behavior": ({"closing_behavior": "fire_always"}, "closing_behavior"),
    "state_buckets": ({"state_buckets": 8}, "state_buckets"),
    "the pipeline's name": ({"name": "views2"}, "name"),
    "the source format": ({"source": {"format": "parquet"}}, "source.format"),
    "deduplication added": ({"dedup": "ad"}, "dedup"),
}


def test_a_changed_dedup_setting_is_refused_naming_it(tmp_path):
    first = pipeline(tmp_path, dedup="ad")
    bind_lake_configuration(first)
    Path(first.checkpoint_path).mkdir()
    for changes, setting in (
        ({"dedup": ["ad", "seconds"]}, "dedup"),
        ({"dedup": "ad", "dedup_horizon": "2h"}, "dedup_horizon"),
        ({"dedup": "ad", "source": schema(ad="long")}, "source.schema.ad"),
        ({}, "dedup"),  # deduplication removed
    ):
        with pytest.raises(PipelineConfigError) as error:
            check_lake_configuration(pipeline(tmp_path, **changes))
        assert error.value.field == setting
    check_lake_configuration(pipeline(tmp_path, dedup="ad"))  # the same: accepted


@pytest.mark.parametrize("what", REFUSED)
def test_a_changed_setting_that_binds_the_lake_is_refused_naming_it(tmp_path, lake, what):
    changes, setting = REFUSED[what]
    recorded = (lake.lake_path / FINGERPRINT_FILE).read_text()
    changed = pipeline(tmp_path, **changes)
    for step in (check_lake_configuration, bind_lake_configuration):
        with pytest.raises(PipelineConfigError) as error:
            step(changed)
        assert error.value.field == setting
        assert "\n" not in str(error.value) and "'Recovering a lake'" in str(error.value)
    assert (lake.lake_path / FINGERPRINT_FILE).read_text() == recorded  # nothing written


def test_the_refusal_says_what_the_lake_was_written_with(tmp_path, lake):
    with pytest.raises(PipelineConfigError) as error:
        check_lake_configuration(pipeline(tmp_path, source=schema(seconds="double")))
    assert str(error.value).startswith(
        f"source.schema.seconds: the lake {lake.lake_path} was written with long, the "
        "configuration says double"
    )
    assert "keep source.schema.seconds = long, or rebuild the lake" in str(error.value)


ALLOWED = {
    "max_files_per_trigger": {"source": {"max_files_per_trigger": 3}},
    "the landing directory": {"source": {"path": "/elsewhere/landing"}},
    "the csv options": {"source": {"format": "jsonl", "csv_header": True, "csv_delimiter": ";"}},
    "bounded and create_path": {"source": {"bounded": True, "create_path": False}},
    "the watermark delay": {"watermark": {"delay": "1h", "idle_timeout": "1m"}},
    "a new column no aggregate reads": {"source": schema(campaign="string")},
    "an unread column's type": {"source": schema(ad="long")},
    "allow_finishing_trigger": {"allow_finishing_trigger": True},
    "the same settings spelled otherwise": {
        "source": schema(seconds="bigint"),
        "aggregates": {"plays": "count( )", "watched": "sum( seconds )"},
        "trigger": "AfterWatermark(early = AfterCount(2),late=AfterCount(1))",
        "allowed_lateness": "60m",
    },
}


@pytest.mark.parametrize("what", ALLOWED)
def test_a_setting_that_may_change_on_a_live_lake_is_accepted(tmp_path, lake, what):
    changed = pipeline(tmp_path, **ALLOWED[what])
    assert check_lake_configuration(changed) is None
    bind_lake_configuration(changed)


def test_a_new_lake_records_its_fingerprint_and_a_lake_that_holds_nothing_is_rebound(tmp_path):
    first = pipeline(tmp_path)
    bind_lake_configuration(first)
    recorded = json.loads((first.lake_path / FINGERPRINT_FILE).read_text())
    assert recorded["settings"]["source.schema.seconds"] == "long"
    assert recorded["digest"] == Fingerprint.of(first).digest
    # the first run stopped before it wrote anything (no checkpoint, no table): not bound yet
    second = pipeline(tmp_path, source=schema(seconds="double"))
    bind_lake_configuration(second)
    assert Fingerprint.read(first.lake_path / FINGERPRINT_FILE) == Fingerprint.of(second)


def test_an_unreadable_fingerprint_is_refused_naming_the_lake(tmp_path, lake):
    (lake.lake_path / FINGERPRINT_FILE).write_text('{"format": 1, "settings": ')
    with pytest.raises(PipelineConfigError, match="cannot be read") as error:
        check_lake_configuration(lake)
    assert error.value.field == "lake"
    (lake.lake_path / FINGERPRINT_FILE).write_text('{"format": 1, "settings": ["window"]}')
    with pytest.raises(PipelineConfigError, match="cannot be read"):
        check_lake_configuration(lake)
    (lake.lake_path / FINGERPRINT_FILE).write_text('{"format": 7, "settings": {}}')
    with pytest.raises(PipelineConfigError, match="fingerprint format 7"):
        check_lake_configuration(lake)


def test_a_lake_written_before_fingerprints_adopts_an_agreeing_configuration(tmp_path):
    from jobs.driver.batch_sink import BatchSink
    from jobs.driver.preflight import check_state_layout

    older = pipeline(tmp_path)
    check_state_layout(older)  # what an older version's first run left: layout and tables
    BatchSink(older).create_tables()
    Path(older.checkpoint_path).mkdir()
    refusals = {
        "source.schema.seconds": pipeline(tmp_path, source=schema(seconds="double")),
        "state_buckets": pipeline(tmp_path, state_buckets=8),
        "lake": pipeline(tmp_path, window="FixedWindows(2h)"),  # the table properties say
    }
    for setting, changed in refusals.items():
        with pytest.raises(PipelineConfigError) as error:
            bind_lake_configuration(changed)
        assert error.value.field == setting
        assert not (older.lake_path / FINGERPRINT_FILE).exists()
    bind_lake_configuration(older)
    assert Fingerprint.read(older.lake_path / FINGERPRINT_FILE) == Fingerprint.of(older)


def toml(value: Any) -> str:
    """``value`` (a :func:`config` structure) as TOML: tables inline, None settings left out."""
    if isinstance(value, dict):
        items = ", ".join(f"{k} = {toml(v)}" for k, v in value.items() if v is not None)
        return f"{{ {items} }}"
    if isinstance(value, list):
        return f"[{', '.join(toml(v) for v in value)}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def test_panestore_check_reports_a_changed_setting_of_an_existing_lake(tmp_path, lake, capsys):
    from jobs.cli.commands import main

    conf = tmp_path / "changed.toml"
    for changes, status in [
        ({"source": schema(seconds="double")}, 2),
        ({"watermark": {"delay": "1h"}}, 0),
    ]:
        conf.write_text(
            "\n".join(f"{k} = {toml(v)}" for k, v in config(tmp_path, **changes).items())
        )
        assert main(["check", str(conf)]) == status
    out = capsys.readouterr()
    err = out.err.strip()
    assert err.startswith(f"panestore: invalid configuration {conf}: source.schema.seconds: ")
    assert len(err.splitlines()) == 1 and out.out.rstrip().endswith("ok")


def test_the_fingerprint_tells_the_picked_aggregates_apart(tmp_path):
    texts = [
        "max_by(ad, seconds)",
        "min_by(ad, seconds)",
        "max_by(ad, ts2)",
        "first(ad)",
        "last(ad)",
    ]
    digests = {
        Fingerprint.of(pipeline(tmp_path, aggregates={"x": t}, source=schema(ts2="long"))).digest
        for t in texts
    }
    assert len(digests) == len(texts)


def test_a_lake_remembering_older_double_ids_is_refused_others_are_not(tmp_path):
    """A deduplicating lake whose layout file predates the exact text of a double in a record's
    id (no ``dedup_id`` in it) is refused when its ids hold a double: a duplicate of a record
    seen before the upgrade would get another id and be counted again. Ids without a double
    are written as before: such a lake runs on."""
    from jobs.driver.preflight import DEDUP_ID_FORMAT, STATE_LAYOUT_FILE, check_state_layout

    by_double = pipeline(tmp_path, dedup=["ad", "seconds"], source=schema(seconds="double"))
    check_state_layout(by_double)  # a new lake records the ids' form
    layout_file = by_double.run_path / STATE_LAYOUT_FILE
    layout = json.loads(layout_file.read_text())
    assert layout["dedup_id"] == DEDUP_ID_FORMAT
    check_state_layout(by_double)  # and runs on

    del layout["dedup_id"]  # as an older version wrote it
    layout_file.write_text(json.dumps(layout))
    with pytest.raises(PipelineConfigError) as error:
        check_state_layout(by_double)
    assert error.value.field == "dedup"
    assert "'seconds'" in str(error.value) and "rebuild it" in str(error.value)
    check_state_layout(pipeline(tmp_path, dedup="ad", source=schema(seconds="double")))
    check_state_layout(pipeline(tmp_path, source=schema(seconds="double")))
