"""Several inputs in a configuration (jobs.config.inputs): ``[inputs.NAME]`` tables, each a
full source with its own event time, watermark and dedup; what they must agree on, refused
naming the input and the column; the fingerprint covering them; ``[source]`` as the one-input
case of the same checks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from jobs.cli.commands import main
from jobs.config.inputs import SINGLE, Input
from jobs.config.load import load_pipeline, pipeline_from_dict
from jobs.config.save import pipeline_to_dict, pipeline_to_toml
from jobs.config.source import Source
from jobs.config.values import PipelineConfigError
from jobs.config.watermark import Watermark
from jobs.driver.fingerprint import (
    Fingerprint,
    bind_lake_configuration,
    check_lake_configuration,
)
from panes import FixedWindows, combiners
from tests.jobs.test_fingerprint import config as one_input_config

DEFAULTS = Path(__file__).resolve().parents[2] / "jobs" / "config" / "defaults.toml"


def config(tmp_path: Path) -> dict[str, Any]:
    """Impressions and clicks meeting by campaign: click-through rate and cost per hour."""
    (tmp_path / "imp").mkdir(exist_ok=True)
    (tmp_path / "clk").mkdir(exist_ok=True)
    return {
        "name": "ctr",
        "lake": str(tmp_path / "lake"),
        "keys": ["campaign"],
        "window": "FixedWindows(1h)",
        "idle_timeout": "10m",
        "dedup": {"clicks": "click_id"},
        "state_buckets": 4,
        "inputs": {
            "impressions": {
                "path": str(tmp_path / "imp"),
                "schema": {"campaign": "string", "ts": "timestamp"},
                "event_time": "ts",
                "watermark": {"delay": "1m"},
            },
            "clicks": {
                "path": str(tmp_path / "clk"),
                "schema": {
                    "campaign": "string",
                    "click_ts": "long",
                    "click_id": "string",
                    "cost": "double",
                },
                "epoch_unit": "s",
                "event_time": "click_ts",
            },
        },
        "aggregates": {
            "impressions": "count() filter (input = 'impressions')",
            "clicks": "count() filter (input = 'clicks')",
            "cost": "sum(cost)",
        },
    }


def load(conf: dict[str, Any]):
    """The pipeline of ``conf`` over the shipped defaults, as ``panestore`` loads a file."""
    from jobs.config.load import _read_toml

    return pipeline_from_dict(conf, defaults=_read_toml(DEFAULTS))


def test_several_inputs_each_a_source_with_its_own_clock(tmp_path):
    p = load(config(tmp_path))
    assert [i.name for i in p.inputs] == ["impressions", "clicks"] == [i.name for i in p.input_list]
    imp, clk = p.inputs
    assert (imp.event_time, imp.watermark.delay, imp.source.format) == ("ts", 60_000_000, "jsonl")
    assert (clk.event_time, clk.watermark.delay, clk.source.epoch_unit) == ("click_ts", 0, "s")
    assert (imp.dedup, clk.dedup) == ((), ("click_id",))
    assert p.idle_timeout == 600_000_000
    # the elements' columns: every input's, each once, and the input's name
    assert p.source.schema == (
        ("campaign", "string"),
        ("ts", "timestamp"),
        ("click_ts", "long"),
        ("click_id", "string"),
        ("cost", "double"),
        ("input", "string"),
    )
    assert p.value_columns == ("input", "cost")
    text = p.describe()
    assert "input impressions: jsonl files in" in text and "duplicates by click_id" in text
    assert "the inputs' minimum (idle after 10m)" in text


def test_source_is_the_one_input_of_the_same_checks(tmp_path):
    p = pipeline_from_dict(one_input_config(tmp_path))
    (only,) = p.input_list
    assert only == Input(SINGLE, p.source, p.event_time, p.watermark, p.dedup)
    assert not p.several_inputs and p.inputs == ()
    # the errors keep the one-input spelling's setting names
    conf = one_input_config(tmp_path, event_time="nope")
    with pytest.raises(PipelineConfigError, match=r"^event_time: column 'nope' is not in source"):
        pipeline_from_dict(conf)


def test_a_pipeline_of_several_inputs_built_in_python(tmp_path):
    clicks = Input(
        "clicks",
        Source(str(tmp_path), (("ad", "string"), ("ts", "timestamp")), create_path=True),
        event_time="ts",
    )
    views = Input(
        "views",
        Source(str(tmp_path), (("ad", "string"), ("t", "long")), create_path=True),
        event_time="t",
        watermark=Watermark(delay="5m"),
    )
    from jobs.config.aggregates import Aggregate
    from jobs.config.pipeline import Pipeline

    aggs = (Aggregate("n", combiners.count()),)
    p = Pipeline.with_inputs(
        (clicks, views), ("ad",), name="ads", lake=str(tmp_path / "l"), aggregates=aggs,
        window=FixedWindows(60_000_000),
    )  # fmt: skip
    assert p.source.types["input"] == "string"
    with pytest.raises(PipelineConfigError, match=r"^event_time: with several inputs each"):
        Pipeline(**{**p.__dict__, "event_time": "ts"})
    with pytest.raises(PipelineConfigError, match=r"^source: a pipeline of several inputs"):
        Pipeline(**{**p.__dict__, "source": clicks.source})


def edit(conf: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``conf`` with the setting at dotted ``path`` set (None: removed)."""
    conf = copy.deepcopy(conf)
    *tables, last = path.split(".")
    table = conf
    for t in tables:
        table = table[t]
    if value is None:
        del table[last]
    else:
        table[last] = value
    return conf


REFUSED = [
    (  # a key every input must have
        "inputs.clicks.schema",
        {"click_ts": "long", "cost": "double"},
        "keys: key 'campaign' is not a column of input 'clicks'",
    ),
    (  # a key of another type in one input
        "inputs.clicks.schema.campaign",
        "long",
        "inputs.clicks.schema.campaign: column 'campaign' is long in input 'clicks' and string "
        "in input 'impressions'",
    ),
    (  # any column of several inputs has one type
        "inputs.clicks.schema.ts",
        "string",
        "inputs.clicks.schema.ts: column 'ts' is string in input 'clicks' and timestamp",
    ),
    (
        "inputs.clicks.schema.input",
        "string",
        "inputs.clicks.schema.input: the column 'input' names each element's input",
    ),
    (
        "inputs.clicks.event_time",
        "ts",
        "inputs.clicks.event_time: column 'ts' is not a column of input 'clicks'",
    ),
    ("inputs.clicks.event_time", None, "inputs.clicks.event_time: is required (or use inputs"),
    ("inputs.clicks.watermark", {"delay": "soon"}, "inputs.clicks.watermark.delay: "),
    ("inputs.clicks.pathh", "x", "inputs.clicks.pathh: unknown setting (did you mean 'path'?)"),
    ("inputs.clicks.format", "xml", "inputs.clicks.format: 'xml' is not one of"),
    ("inputs.clicks.path", "/no/such/dir", "inputs.clicks.path: /no/such/dir does not exist"),
    ("dedup", {"views": "id"}, "dedup.views: no input 'views': the inputs are"),
    ("dedup", {"impressions": "click_id"}, "dedup.impressions: column 'click_id' is not a col"),
    ("dedup", "click_id", "dedup: with several inputs, per input: dedup = { NAME"),
    ("aggregates.spend", "sum(price)", "aggregates.spend: column 'price' is not a column of any"),
    ("idle_timeout", "0s", "idle_timeout: must be a positive duration"),
    ("source", {"path": "x"}, "source: with [inputs.NAME] tables each input has its own"),
    ("event_time", "ts", "event_time: with [inputs.NAME] tables each input has its own"),
    ("inputs.2x", {"path": "x"}, "inputs: an input's name is an identifier"),
]


@pytest.mark.parametrize(("setting", "value", "error"), REFUSED, ids=[r[2][:40] for r in REFUSED])
def test_what_several_inputs_must_agree_on_is_refused_naming_input_and_column(
    tmp_path, setting, value, error, capsys
):
    from jobs.config.save import _value

    conf = edit(config(tmp_path), setting, value)
    lines = []
    for k, v in conf.items():  # as a file: [inputs.NAME] tables, their watermark tables
        if k == "inputs":
            for name, table in v.items():
                lines.append(f'[inputs."{name}"]')
                lines += [f"{s} = {_value(x)}" for s, x in table.items() if s != "watermark"]
                if "watermark" in table:
                    lines.append(f'[inputs."{name}".watermark]')
                    lines += [f"{s} = {_value(x)}" for s, x in table["watermark"].items()]
        elif k != "aggregates":
            lines.insert(0, f"{k} = {_value(v)}")
    lines.append("[aggregates]")
    lines += [f"{n} = {_value(t)}" for n, t in conf["aggregates"].items()]
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"panestore: invalid configuration {path}: {error}"), err


def test_idle_timeout_is_a_setting_of_several_inputs(tmp_path):
    conf = one_input_config(tmp_path, idle_timeout="1m")
    with pytest.raises(PipelineConfigError, match=r"^idle_timeout: is a setting of several"):
        pipeline_from_dict(conf)


def test_saved_and_loaded_back_the_same(tmp_path):
    p = load(config(tmp_path))
    assert pipeline_from_dict(pipeline_to_dict(p), defaults={}) == p
    saved = tmp_path / "saved.toml"
    saved.write_text(pipeline_to_toml(p))
    assert "[inputs.clicks.watermark]" in saved.read_text()
    assert load_pipeline(saved) == p


def test_the_fingerprint_covers_every_input(tmp_path):
    p = load(config(tmp_path))
    settings = dict(Fingerprint.of(p).settings)
    assert settings["inputs"] == "impressions, clicks"
    assert settings["inputs.clicks.event_time"] == "click_ts"
    assert settings["inputs.clicks.epoch_unit"] == "s"
    assert settings["inputs.impressions.watermark.policy"] == "bounded_out_of_orderness"
    assert settings["inputs.clicks.schema.cost"] == "double"
    assert settings["dedup.clicks"] == "click_id"
    bind_lake_configuration(p)
    Path(p.checkpoint_path).mkdir()  # the lake has run
    # a watermark delay may change on a live lake; an input's event time may not
    delay = edit(config(tmp_path), "inputs.impressions.watermark.delay", "5m")
    assert check_lake_configuration(load(delay)) is None
    changed = edit(config(tmp_path), "inputs.clicks.epoch_unit", "ms")
    with pytest.raises(PipelineConfigError, match=r"^inputs.clicks.epoch_unit: the lake .*unit"):
        check_lake_configuration(load(changed))
    removed = edit(config(tmp_path), "inputs.clicks", None)
    removed = edit(removed, "dedup", [])
    removed["aggregates"] = {"impressions": "count()"}
    with pytest.raises(PipelineConfigError, match=r"^inputs: the lake .* with impressions, clicks"):
        check_lake_configuration(load(removed))


def test_adding_an_input_to_a_live_lake_of_one_source_is_refused(tmp_path):
    one = pipeline_from_dict(one_input_config(tmp_path))
    bind_lake_configuration(one)
    Path(one.checkpoint_path).mkdir()
    conf = config(tmp_path)
    conf["lake"] = one.lake
    with pytest.raises(
        PipelineConfigError, match=r"^inputs: the lake .* with one input, \[source\], the config"
    ):
        check_lake_configuration(load(conf))


def test_define_several_inputs_from_code(tmp_path):
    from jobs import api
    from jobs.api.pipelines import dataframe_source

    views = dataframe_source({"ad": "string", "ts": "timestamp"})
    clicks = dataframe_source({"ad": "string", "at": "long", "id": "string", "cost": "double"})
    common: dict[str, Any] = {
        "lake": str(tmp_path / "lake"),
        "keys": "ad",
        "window": "FixedWindows(1h)",
        "aggregates": {"clicks": "count() filter (input = 'clicks')", "cost": "sum(cost)"},
    }
    ctr = api.define(
        "ctr",
        sources={"views": views, "clicks": clicks},
        event_time={"views": "ts", "clicks": "at"},
        watermark={"clicks": Watermark(delay="2m")},
        dedup={"clicks": ["id"]},
        idle_timeout="5m",
        **common,
    )
    assert [(i.name, i.event_time, i.watermark.delay, i.dedup) for i in ctr.inputs] == [
        ("views", "ts", 0, ()),
        ("clicks", "at", 120_000_000, ("id",)),
    ]
    assert ctr.idle_timeout == 300_000_000
    # as a file and back: the same pipeline
    assert pipeline_from_dict(pipeline_to_dict(ctr), defaults={}) == ctr
    refused = [
        ({"source": views}, "^source: give source \\(one input\\) or sources, not both"),
        ({"event_time": "ts"}, "^event_time: with several inputs, a mapping by input name"),
        ({"event_time": {"views": "ts", "shows": "ts"}}, "^event_time.shows: no input 'shows'"),
        ({"dedup": {"views": "id"}}, "^dedup.views: column 'id' is not a column of input"),
        ({"event_time": {"views": "ts"}}, "^inputs.clicks.event_time: is required"),
    ]
    for changes, error in refused:
        settings = {
            "sources": {"views": views, "clicks": clicks},
            "event_time": {"views": "ts", "clicks": "at"},
            **common,
            **changes,
        }
        with pytest.raises(PipelineConfigError, match=error):
            api.define("ctr", **settings)
    with pytest.raises(PipelineConfigError, match=r"^event_time: a mapping by input is for sev"):
        api.define("one", source=views, event_time={"views": "ts"}, **common)
    # an input of a DataFrame defined without one: refused naming the input, nothing run
    refused = r"^inputs.views: input 'views' reads a DataFrame: define it with a streaming"
    with pytest.raises(PipelineConfigError, match=refused):
        api.run(ctr)


def test_a_writer_notes_into_the_landing_directory_of_its_input(tmp_path, capsys):
    p = load(config(tmp_path))
    path = tmp_path / "ctr.toml"
    path.write_text(pipeline_to_toml(p))
    note = ["note-watermark", str(path), "--writer", "w", "--time", "2024-01-01T00:00:00Z"]
    assert main(note) == 2
    assert "name the one whose writer notes with --input (impressions, clicks)" in (
        capsys.readouterr().err
    )
    assert main([*note, "--input", "clicks"]) == 0
    assert capsys.readouterr().out.strip().startswith(str(tmp_path / "clk" / "_watermarks"))
    assert sorted(x.name for x in tmp_path.iterdir()) == ["clk", "ctr.toml", "imp"]


def test_verify_reads_each_inputs_records_by_its_own_event_time_and_dedup(tmp_path):
    """The configuration's pipeline: impressions by ISO text, clicks by epoch seconds, the
    clicks' copies by click_id; each element names its input (the batch over them:
    tests/jobs/test_verify_inputs.py)."""
    from jobs.inspection.source_elements import load_source_elements
    from sinks.verification import DEDUP_GROUP

    p = load(config(tmp_path))
    (tmp_path / "imp" / "1.jsonl").write_text(
        '{"campaign": "a", "ts": "2026-01-01T00:00:01Z"}\n{"campaign": "b", "ts": "x"}\n'
    )
    click = '{"campaign": "a", "click_ts": 1767225602, "click_id": "c1", "cost": 0.5}\n'
    (tmp_path / "clk" / "1.jsonl").write_text(click * 2)
    rows = load_source_elements(p).to_pylist()
    s = 1_767_225_600_000_000
    assert [(r["input"], r["ts_us"], r["cost"]) for r in rows] == [
        ("impressions", s + 1_000_000, None),
        ("clicks", s + 2_000_000, 0.5),
        ("clicks", s + 2_000_000, 0.5),
    ]
    assert [r[DEDUP_GROUP] for r in rows] == [None, 1, 1]  # the copies: one group, clicks'
