"""Pipeline definitions: TOML and Python, validation naming the field, the model's traps."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields, replace
from pathlib import Path

import pytest

from jobs.config.aggregates import Aggregate
from jobs.config.load import DEFAULTS_FILE, load_pipeline, pipeline_from_dict
from jobs.config.pipeline import Pipeline
from jobs.config.source import Source
from jobs.config.values import PipelineConfigError
from jobs.config.watermark import Watermark
from panes import (
    AccumulationMode,
    AfterCount,
    ClosingBehavior,
    FixedWindows,
    GlobalWindows,
    OnTimeBehavior,
    Repeatedly,
    Sessions,
    SlidingWindows,
    TimestampCombiner,
    combiners,
    parse_trigger,
)

CONF = Path(__file__).resolve().parents[2] / "conf"


def base(**over):
    d = {
        "name": "ad_views",
        "lake": "lake",
        "keys": ["device_id"],
        "event_time": "ts",
        "window": "FixedWindows(1m)",
        "trigger": "AfterWatermark(late=AfterCount(1))",
        "source": {
            "path": "in",
            "schema": {"device_id": "string", "ts": "timestamp", "seconds": "double", "n": "long"},
        },
        "aggregates": {"plays": "count()", "watched": "sum(seconds)"},
    }
    for k, v in over.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def error(d) -> PipelineConfigError:
    with pytest.raises(PipelineConfigError) as e:
        pipeline_from_dict(d)
    return e.value


def test_demo_config_loads():
    p = load_pipeline(CONF / "demo.toml")
    assert p.name == "ad_views"
    assert p.window == Sessions(30 * 60_000_000)
    assert p.accumulation_mode is AccumulationMode.ACCUMULATING_AND_RETRACTING
    assert p.allowed_lateness == 2 * 3600 * 1_000_000
    assert p.watermark == Watermark("bounded_out_of_orderness", 5 * 60_000_000)
    assert p.aggregate_types == {"plays": "long", "watched": "double"}
    assert p.value_columns == ("seconds",)
    assert p.combine_fn().extract(
        p.combine_fn().add_all(p.combine_fn().create(), [{"seconds": 3.0}, {"seconds": 4.5}])
    ) == {"plays": 2, "watched": 7.5}


def test_defaults_file_matches_python_defaults():
    p = pipeline_from_dict(base(trigger=None))
    q = load_pipeline(CONF / "demo.toml")  # merged with defaults.toml
    assert p.trigger == parse_trigger("DefaultTrigger()")
    assert q.source.format == "jsonl" and q.source.epoch_unit == "ms"
    plain = pipeline_from_dict(base())
    import tomllib

    defaults = tomllib.loads(DEFAULTS_FILE.read_text())
    with_defaults = pipeline_from_dict(base(), defaults)
    assert with_defaults == plain


def test_python_and_toml_are_the_same():
    p = pipeline_from_dict(base())
    q = Pipeline(
        name="ad_views",
        lake="lake",
        keys=("device_id",),
        event_time="ts",
        window=FixedWindows(60_000_000),
        trigger=parse_trigger("AfterWatermark(late=AfterCount(1))"),
        source=Source(
            "in",
            (("device_id", "string"), ("ts", "timestamp"), ("seconds", "double"), ("n", "long")),
        ),
        aggregates=(
            Aggregate("plays", combiners.count()),
            Aggregate("watched", combiners.sum("seconds")),
        ),
    )
    assert p == q


NOT_A_SETTING = ("event_time", "source", "watermark", "upstream")  # or not compared (frame)
# the settings of several inputs ([inputs.NAME] tables): tests/jobs/test_inputs_config.py
SEVERAL_INPUTS = ("inputs", "idle_timeout")


def test_every_setting_is_parsed_into_its_typed_field():
    """Each setting of the TOML, given a value other than its default, becomes its field's
    parsed value (window function, trigger, enum, µs, aggregate): the parsed pipeline is the one
    built in Python from typed values."""
    toml = {
        "name": "every",
        "lake": "lk",
        "keys": "device_id",
        "event_time": "n",
        "window": "SlidingWindows(10m, 1m)",
        "trigger": "Repeatedly(AfterCount(3))",
        "accumulation_mode": "Accumulating",
        "allowed_lateness": "1h",
        "timestamp_combiner": "earliest",
        "on_time_behavior": "fire_if_non_empty",
        "closing_behavior": "fire_always",
        "allow_finishing_trigger": True,
        "state_buckets": 8,
        "checkpoint": "ckpt",
        "single_writer": True,
        "dedup": ["n", "seconds"],
        "dedup_horizon": "2h",
        "fold_memory": "64MiB",
        "source": {
            "path": "in",
            "schema": {"device_id": "STRING", "n": "long", "seconds": "double"},
            "format": "csv",
            "max_files_per_trigger": 5,
            "csv_header": True,
            "csv_delimiter": ";",
            "epoch_unit": "s",
            "bounded": True,
            "create_path": True,
            "pipeline": "up",
        },
        "watermark": {"policy": "ingestion_time", "delay": "30s", "idle_timeout": "1m"},
        "aggregates": {"plays": "count()", "longest": "max(seconds)"},
    }
    minute = 60_000_000
    typed = Pipeline(
        name="every",
        lake="lk",
        keys=("device_id",),
        event_time="n",
        window=SlidingWindows(10 * minute, minute),
        trigger=Repeatedly(AfterCount(3)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
        allowed_lateness=60 * minute,
        timestamp_combiner=TimestampCombiner.EARLIEST,
        on_time_behavior=OnTimeBehavior.FIRE_IF_NON_EMPTY,
        closing_behavior=ClosingBehavior.FIRE_ALWAYS,
        allow_finishing_trigger=True,
        state_buckets=8,
        checkpoint="ckpt",
        single_writer=True,
        dedup=("n", "seconds"),
        dedup_horizon=120 * minute,
        fold_memory=64 * 1024 * 1024,
        source=Source(
            "in",
            (("device_id", "string"), ("n", "long"), ("seconds", "double")),
            format="csv",
            max_files_per_trigger=5,
            csv_header=True,
            csv_delimiter=";",
            epoch_unit="s",
            bounded=True,
            create_path=True,
            pipeline="up",
        ),
        watermark=Watermark("ingestion_time", delay=minute // 2, idle_timeout=minute),
        aggregates=(
            Aggregate("plays", combiners.count()),
            Aggregate("longest", combiners.max("seconds")),
        ),
    )
    parsed = pipeline_from_dict(toml)
    assert parsed == typed
    # every setting the test gives differs from its default: none is left out of the parser
    required = ("name", "lake", "keys", "event_time", "window", "aggregates")
    default = pipeline_from_dict(
        {
            **{k: toml[k] for k in required},
            "source": {k: toml["source"][k] for k in ("path", "schema")},
        }
    )
    for part, default_part in (
        (parsed, default),
        (parsed.source, default.source),
        (parsed.watermark, default.watermark),
    ):
        for f in fields(part):
            has_default = f.default is not MISSING or f.default_factory is not MISSING
            if has_default and f.compare and f.name not in NOT_A_SETTING:
                if f.name in DELTA_SETTINGS or f.name in SEVERAL_INPUTS:
                    continue  # not of a csv source: test_delta_settings_are_parsed
                assert getattr(part, f.name) != getattr(default_part, f.name), f.name
    assert parsed.aggregate_types == {"plays": "long", "longest": "double"}
    assert "aggregates: plays = count(), longest = max(seconds)" in parsed.describe()


def test_picked_aggregates_output_the_type_of_the_column_they_pick():
    schema = {
        "device_id": "string",
        "ts": "timestamp",
        "seconds": "double",
        "n": "long",
        "small": "int",
        "ok": "boolean",
        "f": "float",
    }
    aggregates = {
        "page": "max_by(device_id, seconds)",
        "fewest": "min_by(small, n)",
        "flag": "last(ok)",
        "opening": "first(f)",
        "latest": "last(seconds)",
    }
    p = pipeline_from_dict(base(source={"path": "in", "schema": schema}, aggregates=aggregates))
    assert p.aggregate_types == {
        "page": "string",
        "fewest": "long",
        "flag": "boolean",
        "opening": "double",
        "latest": "double",
    }
    assert p.value_columns == ("device_id", "seconds", "small", "n", "ok", "f")
    assert p.aggregates[0].fn == combiners.max_by("device_id", "seconds")
    assert "page = max_by(device_id, seconds)" in p.describe()


def test_overrides_replace_the_list_of_aggregates_like_the_file_replaces_the_defaults(tmp_path):
    """One merge of the layers (defaults, file, overrides): tables of settings merge setting by
    setting, the list of aggregates is the last layer's whole."""
    p = load_pipeline(
        CONF / "demo.toml",
        overrides={"aggregates": {"n": "count()"}, "source": {"path": str(tmp_path)}},
    )
    assert p.aggregates == (Aggregate("n", combiners.count()),)
    assert p.source.path == str(tmp_path) and p.source.schema == (
        load_pipeline(CONF / "demo.toml").source.schema
    )
    assert p.source.format == "jsonl"  # from the defaults file


@pytest.mark.parametrize(
    ("over", "field", "fragment"),
    [
        ({"window": "Tumbling(1m)"}, "window", "not a window function"),
        ({"window": "FixedWindows(1 minute)"}, "window", "duration"),
        ({"window": "SlidingWindows(10m)"}, "window", "needs"),
        ({"trigger": "AfterWatermark(early=AfterCount(0)"}, "trigger", ""),
        ({"trigger": "AfterWatermark()"}, "trigger", "can finish"),
        ({"trigger": "AfterCount(10)"}, "trigger", "can finish"),
        ({"window": "GlobalWindows()", "trigger": "DefaultTrigger()"}, "trigger", "never fires"),
        (
            {"window": "GlobalWindows()", "trigger": "Repeatedly(AfterWatermark())"},
            "trigger",
            "never fires",
        ),
        ({"keys": ["nope"]}, "keys", "not in source.schema"),
        ({"keys": []}, "keys", "at least one"),
        ({"event_time": "nope"}, "event_time", "not in source.schema"),
        ({"event_time": "seconds"}, "event_time", "timestamp or an integral"),
        ({"event_time": None}, "event_time", "required"),
        ({"aggregates": {"x": "sum(nope)"}}, "aggregates.x", "not in source.schema"),
        ({"aggregates": {"x": "sum(device_id)"}}, "aggregates.x", "numeric"),
        ({"aggregates": {"x": "median(seconds)"}}, "aggregates.x", "unknown aggregate"),
        ({"aggregates": {"x": "sum()"}}, "aggregates.x", "needs a field"),
        ({"aggregates": {"x": "max_by(seconds, nope)"}}, "aggregates.x", "'nope' is not in"),
        ({"aggregates": {"x": "max_by(seconds)"}}, "aggregates.x", "needs two fields"),
        ({"aggregates": {"x": "last(ts)"}}, "aggregates.x", "a timestamp column cannot be"),
        ({"aggregates": {"x": "min_by(n, ts)"}}, "aggregates.x", "'ts': a timestamp column"),
        (
            {"aggregates": {"q": "approx_quantiles(device_id, [0.5])"}},
            "aggregates.q",
            "floating-point",
        ),
        ({"aggregates": {"u": "approx_count_distinct(seconds)"}}, "aggregates.u", "strings or"),
        ({"aggregates": {"t": "top_k(seconds, 3)"}}, "aggregates.t", "strings or integers"),
        ({"aggregates": {"t": "top_k(device_id)"}}, "aggregates.t", "top_k(page, 10)"),
        ({"aggregates": {}}, "aggregates", "at least one"),
        ({"aggregates": {"window_start": "count()"}}, "aggregates", "reserved"),
        ({"allowed_lateness": "2 hours"}, "allowed_lateness", "not a duration"),
        ({"accumulation_mode": "accumulate"}, "accumulation_mode", "not one of"),
        ({"timestamp_combiner": "first"}, "timestamp_combiner", "not one of"),
        ({"name": "ad views"}, "name", "identifier"),
        ({"lake": None}, "lake", "required"),
        ({"trigers": "x"}, "trigers", "did you mean 'trigger'"),
        ({"watermark": {"policy": "perfect"}}, "watermark.policy", "not one of"),
        ({"watermark": {"delay": "-5m"}}, "watermark.delay", "duration"),
        ({"watermark": {"dealy": "5m"}}, "watermark.dealy", "unknown"),
        ({"watermark": {"policy": "writer_noted", "delay": "1m"}}, "watermark.delay", "be 0"),
        (
            {"watermark": {"policy": "writer_noted", "idle_timeout": "0s"}},
            "watermark.idle_timeout",
            "positive",
        ),
        ({"watermark": {"idle_timeout": "soon"}}, "watermark.idle_timeout", "duration"),
    ],
)
def test_invalid_configs_name_the_field(over, field, fragment):
    e = error(base(**over))
    assert e.field == field
    assert fragment in e.message


@pytest.mark.parametrize(
    ("src", "field"),
    [
        ({"format": "xml"}, "source.format"),
        ({"path": ""}, "source.path"),
        ({"schema": {"device_id": "varchar", "ts": "timestamp"}}, "source.schema.device_id"),
        ({"schema": {"_x": "string"}}, "source.schema._x"),
        ({"max_files_per_trigger": 0}, "source.max_files_per_trigger"),
        ({"epoch_unit": "ns"}, "source.epoch_unit"),
        ({"maxFilesPerTrigger": 3}, "source.maxFilesPerTrigger"),
        # strict types: a string is no boolean, a number or a list no path
        ({"bounded": "yes"}, "source.bounded"),
        ({"csv_header": "true"}, "source.csv_header"),
        ({"create_path": 1}, "source.create_path"),
        ({"path": 5}, "source.path"),
        ({"path": ["a", "b"]}, "source.path"),
        ({"csv_delimiter": 44}, "source.csv_delimiter"),
    ],
)
def test_invalid_source(src, field):
    d = base()
    d["source"] = {**d["source"], **src}
    assert error(d).field == field


def test_traps_can_be_allowed_explicitly():
    p = pipeline_from_dict(base(trigger="AfterWatermark()", allow_finishing_trigger=True))
    assert p.trigger.may_finish
    d = base(window="GlobalWindows()", trigger="DefaultTrigger()")
    d["source"] = {**d["source"], "bounded": True}
    assert pipeline_from_dict(d).window == GlobalWindows()
    # early firings make the global window usable on an unbounded source
    ok = base(
        window="GlobalWindows()",
        trigger="AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))",
    )
    assert pipeline_from_dict(ok)


def test_writer_noted_reads_local_marks():
    p = pipeline_from_dict(base(watermark={"policy": "writer_noted", "idle_timeout": "90s"}))
    assert p.writer_noted and not p.ingestion_time and p.watermark.idle_timeout == 90_000_000
    remote = base(watermark={"policy": "writer_noted"})
    remote["source"] = {**remote["source"], "path": "s3://bucket/landing"}
    e = error(remote)
    assert e.field == "watermark.policy" and "local" in e.message


def test_ingestion_time_needs_no_event_time_column():
    p = pipeline_from_dict(base(event_time=None, watermark={"policy": "ingestion_time"}))
    assert p.ingestion_time and p.event_time is None
    # from Python, None stands for a setting left out
    conf = {**base(watermark={"policy": "ingestion_time"}), "event_time": None}
    conf["source"] = {**conf["source"], "max_files_per_trigger": None, "pipeline": None}
    assert pipeline_from_dict(conf) == p


def test_pipeline_pickles_and_builds_an_engine():
    import pickle

    p = load_pipeline(CONF / "demo.toml")
    q = pickle.loads(pickle.dumps(p))
    assert q == p
    engine = q.engine()
    state = engine.new_state()
    engine.add_elements(state, "d1", [({"seconds": 10.0}, 1_000_000)])
    out = engine.advance(state, "d1", 10**12, 10**12)
    assert [p.value for p in out.panes] == [{"plays": 1, "watched": 10.0}]


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(PipelineConfigError) as e:
        load_pipeline(tmp_path / "nope.toml")
    assert e.value.field == "config"
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(PipelineConfigError, match="not valid TOML"):
        load_pipeline(bad)


@pytest.mark.parametrize(("lake", "fragment"), [(5, "a path"), (["a"], "a path"), (True, "a path")])
def test_the_lake_is_a_path(lake, fragment):
    e = error(base(lake=lake))
    assert e.field == "lake" and fragment in e.message


@pytest.mark.parametrize("typ", ["double", "float", "timestamp", "boolean"])
def test_keys_are_of_a_type_the_job_groups_by(typ):
    d = base(keys=["k"])
    d["source"] = {**d["source"], "schema": {**d["source"]["schema"], "k": typ}}
    e = error(d)
    assert e.field == "keys" and f"key column 'k' is {typ}; keys are one of" in e.message


def test_paths_are_checked_on_the_filesystem_before_spark(tmp_path):
    from jobs.config.checks import check_paths

    def paths(landing, lake, **source):
        d = base(lake=str(lake))
        d["source"] = {**d["source"], "path": str(landing), **source}
        return pipeline_from_dict(d)

    def refused(p) -> PipelineConfigError:
        with pytest.raises(PipelineConfigError) as e:
            check_paths(p)
        return e.value

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    e = refused(paths(landing, lake))
    assert e.field == "source.path" and "does not exist (a typo?)" in e.message
    check_paths(paths(landing, lake, create_path=True))  # the run creates it
    landing.mkdir()
    check_paths(paths(landing, lake))  # the lake is created by the run
    a_file = tmp_path / "file"
    a_file.write_text("x")
    e = refused(paths(a_file, lake))
    assert e.field == "source.path" and "is a file, not a directory" in e.message
    e = refused(paths(landing, a_file))
    assert e.field == "lake" and "is a file, not a directory" in e.message
    e = refused(paths(landing, a_file / "lake"))
    assert e.field == "lake" and f"cannot be created: {a_file} is a file" in e.message
    check_paths(paths("s3://bucket/landing", lake))  # a remote landing: left to the storage layer


def test_panestore_check_and_run_exit_2_naming_a_bad_path(tmp_path, capsys):
    from jobs.cli.commands import main

    conf = tmp_path / "p.toml"
    conf.write_text(
        f'name = "p"\nlake = "{tmp_path / "lake"}"\nkeys = ["k"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1h)"\n[aggregates]\nn = "count()"\n[source]\n'
        f'path = "{tmp_path / "landnig"}"\nschema = {{ k = "string", ts = "timestamp" }}\n'
    )
    for command in ("check", "run"):
        assert main([command, str(conf)]) == 2
        err = capsys.readouterr().err
        assert f"source.path: {tmp_path / 'landnig'} does not exist (a typo?)" in err
    assert not (tmp_path / "lake").exists()  # nothing written, no Spark started


@pytest.mark.parametrize(
    ("lake", "says"),
    [
        ("gs://lakes/prod/x", "other schemes (gs, hdfs, ...) are not supported yet"),
        ("file:///tmp/lake", "other schemes (gs, hdfs, ...) are not supported yet"),
        ("s3:///prod/x", "s3://BUCKET/PREFIX"),
        ("adl://acct.azuredatalakestore.net/x", "adl:// is not supported: a lake on Azure"),
        ("wasbs://c@acct.blob.core.windows.net/x", "wasbs:// is not supported: a lake on Azure"),
        ("wasb://c@acct.blob.core.windows.net/x", "or abfss://CONTAINER@ACCOUNT.dfs.core"),
        ("abfs://c@acct.dfs.core.windows.net/x", "abfs:// is not supported: a lake on Azure"),
        ("az:///prod/x", "az:///prod/x: no container"),
        ("abfss://c/prod/x", "an abfss:// lake names its account"),
        ("lakes/a%20b", "contains '%'"),
        ("lakes/a#b", "contains '#'"),
        ("lakes/what?", "contains '?'"),
        ("lakes/[x]", "contains '['"),
        ("lakes/a:b", "contains ':'"),
        ("lakes/a\nb", "contains '\\n'"),
    ],
)
def test_panestore_check_and_run_refuse_a_lake_path_engines_read_elsewhere(
    tmp_path, monkeypatch, capsys, lake, says
):
    """Spark, Hadoop and delta-rs take these for URI or glob syntax (a run would fail after
    Spark started, or write tables its folds cannot read, or write ``s3://`` to a local folder
    ``s3:``): ``check`` and ``run`` refuse them before Spark, naming ``lake``."""
    from jobs.cli.commands import main
    from jobs.driver.runs import run

    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    conf = tmp_path / "p.toml"
    conf.write_text(
        f'name = "p"\nlake = {json.dumps(lake)}\nkeys = ["k"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1h)"\n[aggregates]\nn = "count()"\n[source]\n'
        'path = "in"\nschema = { k = "string", ts = "timestamp" }\n'
    )
    assert main(["check", str(conf)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"panestore: invalid configuration {conf}: lake: ") and says in err
    assert err.count("\n") == 1
    with pytest.raises(PipelineConfigError) as e:
        run(load_pipeline(conf), spark=object(), progress=None)  # refused before using Spark
    assert e.value.field == "lake" and says in e.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "p.toml"]  # nothing written


@pytest.mark.parametrize(
    ("checkpoint", "says"),
    [
        (None, "checkpoint: is required for a lake in an object store (s3://lakes/prod/x)"),
        ("s3://b/ckpt/x", "checkpoint: s3://b/ckpt/x: Spark keeps a checkpoint on a filesystem"),
        ("gs:///ckpt/x", "checkpoint: gs:///ckpt/x names no bucket, container or host"),
        ("ckpt/a#b", "contains '#'"),
    ],
)
def test_a_lake_in_a_bucket_needs_a_checkpoint_directory_on_a_filesystem(
    tmp_path, monkeypatch, capsys, checkpoint, says
):
    """Spark's checkpoint and the run's own files need a filesystem: a bucket lake without
    ``checkpoint`` (or with a URI of a scheme Spark keeps no checkpoint on, or without a
    bucket) is refused before anything starts."""
    from jobs.cli.commands import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    conf = tmp_path / "p.toml"
    where = "" if checkpoint is None else f"checkpoint = {json.dumps(checkpoint)}\n"
    conf.write_text(
        f'name = "p"\nlake = "s3://lakes/prod/x"\n{where}keys = ["k"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1h)"\n[aggregates]\nn = "count()"\n[source]\n'
        'path = "in"\nschema = { k = "string", ts = "timestamp" }\n'
    )
    for command in ("check", "run"):
        assert main([command, str(conf)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"panestore: invalid configuration {conf}: checkpoint: ")
        assert says in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "p.toml"]  # nothing written


def test_a_pipeline_built_in_python_with_text_for_a_parsed_setting_is_refused_naming_it():
    p = pipeline_from_dict(base())
    with pytest.raises(PipelineConfigError) as e:
        replace(p, window="FixedWindows(1m)")
    assert e.value.field == "window" and "pipeline_from_dict" in e.value.message
    with pytest.raises(PipelineConfigError) as e:
        replace(p, allowed_lateness="1h")
    assert e.value.field == "allowed_lateness"


DELTA_SETTINGS = ("starting_version", "starting_timestamp", "skip_change_commits")


def test_delta_settings_are_parsed():
    """The settings only a delta source has (the test above covers every other)."""
    schema = {"user": "string", "ts": "timestamp"}
    base = {"name": "p", "lake": "lake", "keys": ["user"], "event_time": "ts"}
    base |= {"window": "FixedWindows(1m)", "aggregates": {"n": "count()"}}
    by_version = pipeline_from_dict(
        {
            **base,
            "source": {
                "format": "delta",
                "path": "t",
                "schema": schema,
                "starting_version": 3,
                "skip_change_commits": True,
            },
        }
    )
    assert (by_version.source.starting_version, by_version.source.skip_change_commits) == (3, True)
    by_time = pipeline_from_dict(
        {
            **base,
            "source": {
                "format": "delta",
                "path": "t",
                "schema": schema,
                "starting_timestamp": "2024-05-01T00:00Z",
            },
        }
    )
    assert by_time.source.starting_timestamp == "2024-05-01T00:00Z"
    default = pipeline_from_dict(
        {**base, "source": {"format": "delta", "path": "t", "schema": schema}}
    )
    for name in DELTA_SETTINGS:
        assert getattr(default.source, name) in (None, False), name


def test_sketch_aggregates_load_from_toml_with_one_struct_column_each(tmp_path):
    """``[aggregates]`` takes the sketch aggregates' text; each is one struct column of its
    answer and the sketch's bytes (its Arrow type too), and its text is in the fingerprint."""
    import pyarrow as pa

    from jobs.config.sink_spec import view_spec
    from sinks.lake.column_types import arrow_type

    aggs = {
        "users": "approx_count_distinct(device_id)",
        "p95": "approx_percentile(seconds, 0.95)",
        "qs": "approx_quantiles(n, [0.5, 0.99])",
        "top": "top_k(n, 3)",
    }
    lines = [f'{k} = "{v}"' for k, v in aggs.items()]
    d = base()
    toml = "\n".join(
        [
            'name = "ad_views"',
            'lake = "lake"',
            'keys = ["device_id"]',
            'event_time = "ts"',
            'window = "FixedWindows(1m)"',
            "[source]",
            'path = "in"',
            "[source.schema]",
            *(f'{k} = "{v}"' for k, v in d["source"]["schema"].items()),
            "[aggregates]",
            *lines,
        ]
    )
    path = tmp_path / "p.toml"
    path.write_text(toml)
    p = load_pipeline(path)
    assert {a.name: str(a.fn) for a in p.aggregates} == aggs
    assert p.aggregate_types == {
        "users": "struct<estimate: long, sketch: binary>",
        "p95": "struct<quantile: double, sketch: binary>",
        "qs": "struct<quantiles: list<double>, sketch: binary>",
        "top": "struct<items: list<struct<item: long, count: long>>, sketch: binary>",
    }
    assert arrow_type(p.aggregate_types["top"]) == pa.struct(
        [
            ("items", pa.list_(pa.struct([("item", pa.int64()), ("count", pa.int64())]))),
            ("sketch", pa.binary()),
        ]
    )
    other = pipeline_from_dict(base(aggregates={**aggs, "top": "top_k(n, 4)"}))
    assert view_spec(other).fingerprint != view_spec(p).fingerprint
