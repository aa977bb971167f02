"""The Python API's definitions (no Spark): a pipeline defined in code is the pipeline its saved
configuration loads to, settings are checked naming the setting, DataFrame and Delta schemas."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pytest

from jobs import api
from jobs.config import PipelineConfigError, load_pipeline
from panes import (
    AccumulationMode,
    AfterCount,
    AfterProcessingTime,
    AfterWatermark,
    FixedWindows,
    Sessions,
    combiners,
)
from panes.combiners import CombineFn, text_of

S = 1_000_000

CONF = """\
name = "spend"
lake = "{lake}"
keys = ["user"]
event_time = "ts"
window = "Sessions(30m)"
trigger = "AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))"
accumulation_mode = "accumulating_and_retracting"
allowed_lateness = "2h"

[source]
format = "dataframe"
schema = {{ user = "string", ts = "timestamp", amount = "double" }}

[watermark]
delay = "5m"

[aggregates]
total = "sum(amount)"
n = "count()"
"""


def spend(lake, **overrides):
    settings = dict(
        source=api.dataframe_source({"user": "string", "ts": "timestamp", "amount": "double"}),
        lake=str(lake),
        keys="user",
        event_time="ts",
        window=Sessions(30 * 60 * S),
        trigger=AfterWatermark(early=AfterProcessingTime(60 * S), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
        allowed_lateness=2 * 3600 * S,
        watermark=api.Watermark(delay=5 * 60 * S),
        aggregates={"total": combiners.sum("amount"), "n": combiners.count()},
    )
    settings.update(overrides)
    return api.define("spend", **settings)


def test_a_pipeline_defined_in_code_is_the_one_its_configuration_file_loads(tmp_path):
    conf = tmp_path / "spend.toml"
    conf.write_text(CONF.format(lake=tmp_path / "lake"))
    assert spend(tmp_path / "lake") == load_pipeline(conf)


def test_settings_may_be_given_as_their_configuration_text(tmp_path):
    as_text = spend(
        tmp_path / "lake",
        window="Sessions(30m)",
        trigger="AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))",
        accumulation_mode="accumulating_and_retracting",
        allowed_lateness="2h",
        keys=["user"],
        aggregates={"total": "sum(amount)", "n": "count()"},
    )
    assert as_text == spend(tmp_path / "lake")


@pytest.mark.heavy
def test_a_saved_code_pipeline_loads_back_and_the_command_checks_it(tmp_path):
    pipeline = spend(tmp_path / "lake")
    conf = api.save(pipeline, tmp_path / "conf" / "spend.toml")
    assert load_pipeline(conf) == pipeline
    check = subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "check", str(conf)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    assert "a streaming DataFrame" in check.stdout


@pytest.mark.heavy
def test_the_command_refuses_to_run_a_dataframe_pipeline_naming_the_api(tmp_path):
    conf = api.save(spend(tmp_path / "lake"), tmp_path / "spend.toml")
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "run", str(conf)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "jobs.api.run" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "override, setting",
    [
        ({"window": "Sessions(soon)"}, "window"),
        ({"allowed_lateness": "-1h"}, "allowed_lateness"),
        ({"keys": "nobody"}, "keys"),
        ({"aggregates": {"total": "sum(nothing)"}}, "aggregates.total"),
        ({"aggregates": {"total": "median(amount)"}}, "aggregates.total"),
        ({"accumulation_mode": "sometimes"}, "accumulation_mode"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(tmp_path, override, setting):
    with pytest.raises(PipelineConfigError) as e:
        spend(tmp_path / "lake", **override)
    assert e.value.field == setting


def test_durations_are_taken_as_a_configuration_file_takes_them(tmp_path):
    # README and docs/sources.md: api.Watermark(delay="5m"), allowed_lateness="2h"
    text = api.Watermark(delay="5m", idle_timeout="1h30m")
    assert text == api.Watermark(delay=5 * 60 * S, idle_timeout=90 * 60 * S)
    assert text.delay == 300_000_000
    pipeline = spend(tmp_path / "lake", watermark=api.Watermark(delay="5m"))
    conf = tmp_path / "spend.toml"
    conf.write_text(CONF.format(lake=tmp_path / "lake"))
    assert pipeline == load_pipeline(conf) == spend(tmp_path / "lake")
    assert api.Watermark("writer_noted", idle_timeout="10m").idle_timeout == 10 * 60 * S


@pytest.mark.parametrize(
    "settings, setting, message",
    [
        ({"delay": "5 minutes"}, "watermark.delay", "not a duration"),
        ({"delay": -1}, "watermark.delay", "negative"),
        ({"delay": 1.5}, "watermark.delay", "expected a duration"),
        ({"delay": True}, "watermark.delay", "expected a duration"),
        ({"idle_timeout": "soon"}, "watermark.idle_timeout", "not a duration"),
        ({"policy": "writer_noted", "delay": "1m"}, "watermark.delay", "be 0"),
        ({"policy": "perfect"}, "watermark.policy", "not one of"),
    ],
)
def test_a_bad_watermark_is_refused_naming_the_setting(settings, setting, message):
    with pytest.raises(PipelineConfigError) as e:
        api.Watermark(**settings)
    assert e.value.field == setting and message in e.value.message


def test_a_runs_interval_is_a_duration_checked_before_spark(tmp_path):
    with pytest.raises(PipelineConfigError) as e:
        api.run(spend(tmp_path / "lake"), follow=True, interval="10 seconds")
    assert e.value.field == "interval" and "not a duration" in e.value.message
    assert not (tmp_path / "lake").exists()


def test_a_dataframes_columns_of_readable_types_are_its_schema():
    from pyspark.sql.types import (
        BinaryType,
        DateType,
        DecimalType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    struct = StructType(
        [
            StructField("user", StringType()),
            StructField("n", IntegerType()),
            StructField("big", LongType()),
            StructField("ts", TimestampType()),
            StructField("local", TimestampNTZType()),
            StructField("price", DecimalType(10, 2)),
            StructField("day", DateType()),
            StructField("payload", BinaryType()),
        ]
    )
    assert api.schema_of(struct) == (
        ("user", "string"),
        ("n", "int"),
        ("big", "long"),
        ("ts", "timestamp"),
        ("local", "timestamp"),
        ("price", "decimal(10,2)"),
        ("day", "date"),
    )
    assert api.dataframe_source(struct).schema == api.schema_of(struct)


def test_a_delta_source_takes_the_tables_columns(tmp_path):
    from deltalake import write_deltalake

    table = tmp_path / "bronze"
    write_deltalake(
        table,
        pa.table(
            {
                "user": ["a"],
                "ts": pa.array([1], pa.timestamp("us", "UTC")),
                "amount": [1.5],
                "price": pa.array([1], pa.decimal128(10, 2)),
            }
        ),
    )
    source = api.delta_source(table, starting_version=0)
    assert source.schema == (
        ("user", "string"),
        ("ts", "timestamp"),
        ("amount", "double"),
        ("price", "decimal(10,2)"),
    )
    pipeline = spend(tmp_path / "lake", source=source)
    conf = api.save(pipeline, tmp_path / "spend.toml")
    assert load_pipeline(conf) == pipeline
    # the same in a configuration file that names no schema
    text = CONF.format(lake=tmp_path / "lake").replace(
        'format = "dataframe"\nschema = { user = "string", ts = "timestamp", amount = "double" }',
        f'format = "delta"\npath = "{table}"\nstarting_version = 0',
    )
    (tmp_path / "delta.toml").write_text(text)
    assert load_pipeline(tmp_path / "delta.toml") == pipeline


@pytest.mark.parametrize(
    "source, setting",
    [
        ({"format": "jsonl", "path": "x", "starting_version": 3}, "source.starting_version"),
        ({"format": "delta", "path": "x", "starting_version": -1}, "source.starting_version"),
        (
            {"format": "delta", "path": "x", "starting_version": 1, "starting_timestamp": "2024"},
            "source.starting_timestamp",
        ),
        (
            {"format": "delta", "path": "x", "starting_timestamp": "soon"},
            "source.starting_timestamp",
        ),
        ({"format": "delta", "path": "/no/such/table"}, "source.path"),
    ],
)
def test_delta_settings_are_checked(tmp_path, source, setting):
    from jobs.config import pipeline_from_dict

    conf = {
        "name": "p",
        "lake": str(tmp_path / "lake"),
        "keys": ["user"],
        "event_time": "ts",
        "window": "FixedWindows(1m)",
        "aggregates": {"n": "count()"},
        "source": source,
    }
    if "schema" not in source and source.get("path") != "/no/such/table":
        source["schema"] = {"user": "string", "ts": "timestamp"}
    with pytest.raises(PipelineConfigError) as e:
        pipeline_from_dict(conf)
    assert e.value.field == setting


@pytest.mark.parametrize(
    "module",
    [
        "jobs.api.pipelines",
        "jobs.config.load",
        "jobs.config.values",
        "jobs.config.watermark",
        "jobs.driver.runs",
        "jobs.executor.bucket_state",
        "jobs.executor.operator",
        "panes.columnar.wide",
        "jobs.sources",
        "jobs.reading.columns",
        "jobs.sources.delta_table",
        "jobs.sources.files",
        "jobs.sources.pane_log",
    ],
)
def test_the_documented_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_the_environment_is_left_as_found_however_a_call_ends(tmp_path, monkeypatch):
    """The API takes the AWS shared files' credentials into the environment while it runs
    (delta-rs reads only the environment) and gives the caller's environment back."""
    import os

    from jobs.api.caller_state import as_found
    from tests.pipelines import small_pipeline

    credentials = tmp_path / "aws-credentials"
    credentials.write_text("[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PANESTORE_TEST_CHANGED", "before")
    monkeypatch.setenv("PANESTORE_TEST_REMOVED", "before")
    before = dict(os.environ)

    p = small_pipeline("p", tmp_path / "lake", tmp_path / "landing")
    with pytest.raises(Exception, match="pane log not found"):  # after taking the credentials
        api.materialize(p)
    assert dict(os.environ) == before

    def change() -> None:
        os.environ["PANESTORE_TEST_ADDED"] = "during"
        os.environ["PANESTORE_TEST_CHANGED"] = "during"
        del os.environ["PANESTORE_TEST_REMOVED"]

    with as_found(None):
        change()
    assert dict(os.environ) == before
    for ending in (ValueError, KeyboardInterrupt):
        with pytest.raises(ending), as_found(None):
            change()
            raise ending
        assert dict(os.environ) == before, ending


class _Own(CombineFn):
    """A combiner of a user's own, reading two columns."""

    fields = ("amount", "n")

    def create(self):
        return 0

    def add(self, acc, value):
        return acc + (value["amount"] or 0) * (value["n"] or 0)

    def merge(self, accs):
        return sum(accs)

    def extract(self, acc):
        return acc


def _own_pipeline(lake, aggregates):
    return api.define(
        "own",
        source=api.dataframe_source(
            {"k": "string", "ts": "timestamp", "amount": "double", "n": "long"}
        ),
        lake=str(lake),
        keys="k",
        event_time="ts",
        window=FixedWindows(60_000_000),
        aggregates=aggregates,
    )


@pytest.mark.parametrize(
    ("declared", "column_type"),
    [
        ("double", "double"),
        (pa.float64(), "double"),
        ("list<string>", "list<string>"),
        (pa.list_(pa.int64()), "list<long>"),
    ],
)
def test_a_combiner_of_the_users_own_has_its_declared_column_type(tmp_path, declared, column_type):
    fn = _Own()
    fn.output_type = declared
    p = _own_pipeline(tmp_path, {"weighted": fn, "count": "count()"})
    assert p.aggregate_types == {"weighted": column_type, "count": "long"}
    assert p.value_columns == ("amount", "n")
    assert text_of(fn) == "tests.jobs.test_api._Own(amount, n)"  # the same in every process
    with pytest.raises(PipelineConfigError) as e:  # code only: no text for it in a TOML file
        api.save(p, tmp_path / "own.toml")
    assert e.value.field == "aggregates.weighted"
    assert "tests.jobs.test_api._Own(amount, n) has no text" in str(e.value)
    assert " at 0x" not in str(e.value)  # named by its class, not an address


def test_a_combiner_of_the_users_own_without_a_declared_type_is_refused_naming_it(tmp_path):
    with pytest.raises(PipelineConfigError) as e:
        _own_pipeline(tmp_path, {"weighted": _Own()})
    assert e.value.field == "aggregates.weighted"
    assert "declare its output_type" in str(e.value)
    assert "tests.jobs.test_api._Own(amount, n) is not a built-in" in str(e.value)
    assert " at 0x" not in str(e.value)


class _Box:
    def __init__(self, n: int) -> None:
        self.n = n


class _Boxed(_Own):
    """A combiner whose accumulator is an object the pane log has no text for."""

    output_type = "long"

    def create(self):
        return _Box(0)

    def extract(self, acc):
        return acc.n


def test_a_combiner_whose_accumulator_cannot_be_stored_is_refused_naming_it(tmp_path):
    """With a mean beside it the pane log stores every accumulator: one of no text is refused
    when the pipeline is defined (and by ``panestore check``), not written as null."""
    with pytest.raises(PipelineConfigError) as e:
        _own_pipeline(tmp_path, {"boxed": _Boxed(), "avg": "mean(amount)"})
    assert e.value.field == "aggregates.boxed"
    assert "tests.jobs.test_api._Box" in str(e.value) and "accumulator_to_data" in str(e.value)

    class Stored(_Boxed):
        def accumulator_to_data(self, acc):
            return acc.n

        def accumulator_from_data(self, data):
            return _Box(data)

    assert _own_pipeline(tmp_path, {"boxed": Stored(), "avg": "mean(amount)"}).aggregate_types


class _BoxedLater(_Own):
    """Storable when empty (None), an object of no text once it holds a value."""

    output_type = "long"

    def create(self):
        return None

    def add(self, acc, value):
        return _Box((0 if acc is None else acc.n) + 1)

    def extract(self, acc):
        return 0 if acc is None else acc.n


class _Tally(_Own):
    """A tally of ``n`` values in a ``collections.Counter``, merged with ``update`` (which adds
    a Counter's counts, and replaces a plain dict's)."""

    output_type = "long"

    def create(self):
        return Counter()

    def add(self, acc, value):
        return acc + Counter({value["n"]: 1})

    def merge(self, accs):
        merged = accs[0].copy()
        for acc in accs[1:]:
            merged.update(acc)
        return merged

    def extract(self, acc):
        return max(acc.values(), default=0)


@pytest.mark.parametrize(
    ("fn", "holds"),
    [
        (_BoxedLater(), "tests.jobs.test_api._Box"),  # only after one input: not create()'s
        (_Tally(), "collections.Counter (a subclass of dict"),  # would come back a plain dict
    ],
)
def test_an_accumulator_of_no_exact_text_after_one_input_is_refused_naming_it(tmp_path, fn, holds):
    """Before, such an accumulator was written as null (or, a Counter, read back as a plain
    dict that its ``merge`` then summed wrongly); now ``define`` (and ``panestore check``)
    refuses it on one line naming the aggregate, the combiner's class and the type."""
    with pytest.raises(PipelineConfigError) as e:
        _own_pipeline(tmp_path, {"own": fn, "avg": "mean(amount)"})
    assert e.value.field == "aggregates.own"
    message = str(e.value)
    assert holds in message and type(fn).__qualname__ in message, message
    assert "\n" not in message and " at 0x" not in message
    # alone, its value is not its accumulator either: the pane log stores it all the same
    with pytest.raises(PipelineConfigError):
        _own_pipeline(tmp_path, {"own": fn})


class _Frame:
    """What the API reads of a PySpark DataFrame: its schema, columns, whether it streams."""

    def __init__(self, streaming: bool) -> None:
        from pyspark.sql.types import DoubleType, StringType, StructField, StructType
        from pyspark.sql.types import TimestampType as Ts

        self.schema = StructType(
            [
                StructField("user", StringType()),
                StructField("ts", Ts()),
                StructField("amount", DoubleType()),
            ]
        )
        self.columns = [f.name for f in self.schema.fields]
        self.isStreaming = streaming


def test_the_dataframe_is_given_once_to_define_and_the_run_reads_it(tmp_path):
    from jobs.api.streams import _events

    events = _Frame(streaming=True)
    pipeline = spend(tmp_path / "lake", source=events)
    assert pipeline.source.frame is events and pipeline.source.schema == spend("x").source.schema
    assert _events(pipeline, None) is events  # api.run(pipeline)
    other = _Frame(streaming=True)
    assert _events(pipeline, other) is other  # a new stream of the same events
    # the frame is not a setting: the saved configuration loads to the same pipeline
    assert load_pipeline(api.save(pipeline, tmp_path / "spend.toml")) == pipeline
    declared = spend(tmp_path / "lake")  # a schema declared, the stream given at the run
    with pytest.raises(PipelineConfigError, match=r"run\(pipeline, events\)"):
        _events(declared, None)


def test_a_batch_dataframe_is_refused_as_a_source_naming_it(tmp_path):
    with pytest.raises(PipelineConfigError) as e:
        spend(tmp_path / "lake", source=_Frame(streaming=False))
    assert e.value.field == "source" and "streaming DataFrame" in e.value.message


def test_a_pipeline_holding_its_dataframe_pickles_without_it(tmp_path):
    import pickle

    pipeline = spend(tmp_path / "lake", source=_Frame(streaming=True))
    copy = pickle.loads(pickle.dumps(pipeline))  # as Spark ships the operator's closures
    assert copy == pipeline and copy.source.frame is None
