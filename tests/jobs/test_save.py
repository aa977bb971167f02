"""jobs.config.save: a pipeline built in Python is saved as a configuration file that loads
back as the same pipeline, so the ``panestore`` command can work on the lake it runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jobs.config.aggregates import Aggregate
from jobs.config.load import load_pipeline, pipeline_from_dict
from jobs.config.pipeline import Pipeline
from jobs.config.save import pipeline_to_dict, pipeline_to_toml, save_pipeline
from jobs.config.source import Source
from jobs.config.values import PipelineConfigError
from jobs.config.watermark import Watermark
from panes import AccumulationMode, AfterCount, AfterWatermark, FixedWindows, combiners

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _in_code(tmp_path: Path) -> Pipeline:
    return Pipeline(
        name="clicks",
        lake=str(tmp_path / "lake"),
        keys=("user", "shard"),
        event_time="at",
        window=FixedWindows(60_000_000),
        trigger=AfterWatermark(early=AfterCount(3), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
        allowed_lateness=1_500,  # µs
        source=Source(
            path=str(tmp_path / "landing"),
            schema=(("user", "string"), ("shard", "int"), ("at", "long"), ("v", "double")),
            epoch_unit="s",
            max_files_per_trigger=7,
        ),
        watermark=Watermark(delay=90_000_000),
        aggregates=(
            Aggregate("n", combiners.Count()),
            Aggregate("total", combiners.Sum("v")),
            Aggregate("low", combiners.Min("v")),
            Aggregate("top", combiners.max_by("user", "v")),
            Aggregate("latest", combiners.last("v")),
        ),
        state_buckets=8,
    )


def _reloaded(pipeline: Pipeline, tmp_path: Path) -> Pipeline:
    path = save_pipeline(pipeline, tmp_path / "saved.toml")
    return load_pipeline(path, defaults=None)


def test_a_pipeline_built_in_code_loads_back_the_same(tmp_path):
    pipeline = _in_code(tmp_path)
    assert _reloaded(pipeline, tmp_path) == pipeline
    text = (tmp_path / "saved.toml").read_text()
    assert 'allowed_lateness = "1500us"' in text and 'delay = "90s"' in text
    assert 'top = "max_by(user, v)"' in text and 'latest = "last(v)"' in text


@pytest.mark.parametrize("conf", ["demo.toml", "demo_hourly.toml", "demo_ctr.toml"])
def test_the_shipped_configurations_load_back_the_same(tmp_path, monkeypatch, conf):
    monkeypatch.chdir(ROOT)  # demo_hourly names its upstream's file relative to the project
    pipeline = load_pipeline(ROOT / "conf" / conf)
    assert pipeline_from_dict(tomllib.loads(pipeline_to_toml(pipeline)), defaults={}) == pipeline
    assert _reloaded(pipeline, tmp_path) == pipeline


def test_a_window_function_a_file_cannot_name_is_refused_naming_the_setting(tmp_path):
    class Hourly(FixedWindows):  # a user's own window function: prints as FixedWindows(1h)
        def __init__(self) -> None:
            super().__init__(3_600_000_000)

    pipeline = _in_code(tmp_path)
    hourly = Pipeline(**{**pipeline.__dict__, "window": Hourly()})
    with pytest.raises(PipelineConfigError, match=r"^window: "):
        pipeline_to_dict(hourly)
    assert not (tmp_path / "saved.toml").exists()


def test_the_command_checks_a_saved_pipeline(tmp_path, capsys):
    from jobs.cli import main

    (tmp_path / "landing").mkdir()
    path = save_pipeline(_in_code(tmp_path), tmp_path / "clicks.toml")
    assert main(["check", str(path)]) == 0
    assert "pipeline clicks" in capsys.readouterr().out
