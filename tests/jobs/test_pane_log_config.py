"""A configuration whose source is another pipeline's pane log: what is resolved and refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jobs.config.aggregates import Aggregate
from jobs.config.load import load_pipeline
from jobs.config.values import PipelineConfigError
from panes.combiners import CombineFn

UPSTREAM = """
name = "sessions"
lake = "{lake}"
keys = ["device_id", "country"]
event_time = "ts"
window = "Sessions(30m)"
trigger = "AfterWatermark(early=AfterCount(2), late=AfterCount(1))"
accumulation_mode = "{mode}"
allowed_lateness = "2h"
[source]
path = "{landing}"
schema = {{ device_id = "string", country = "string", ts = "timestamp", seconds = "double" }}
[aggregates]
plays = "count()"
watched = "sum(seconds)"
"""

DOWNSTREAM = """
name = "hourly"
lake = "{lake}"
keys = {keys}
window = "FixedWindows(1h)"
trigger = "AfterWatermark(late=AfterCount(1))"
accumulation_mode = "{mode}"
allowed_lateness = "4h"
{extra}
[source]
format = "pane_log"
path = "{upstream}"
{source}
[aggregates]
{aggregates}
"""


def configs(
    tmp_path: Path,
    *,
    up_mode="accumulating_and_retracting",
    keys='["country"]',
    mode="accumulating_and_retracting",
    extra="",
    source="",
    aggregates='sessions = "count()"\nwatched = "sum(watched)"',
):
    up = tmp_path / "up.toml"
    up.write_text(UPSTREAM.format(lake=tmp_path / "up", landing=tmp_path / "in", mode=up_mode))
    down = tmp_path / "down.toml"
    text = DOWNSTREAM.format(
        lake=tmp_path / "down",
        keys=keys,
        mode=mode,
        extra=extra,
        upstream=up,
        source=source,
        aggregates=aggregates,
    )
    down.write_text(text)
    return down


def error(path: Path) -> PipelineConfigError:
    with pytest.raises(PipelineConfigError) as e:
        load_pipeline(path)
    return e.value


def test_the_upstreams_key_and_aggregate_columns_are_the_source_columns(tmp_path):
    p = load_pipeline(configs(tmp_path))
    up = p.source.upstream
    assert (up.name, up.pane_log) == ("sessions", str(tmp_path / "up" / "panes"))
    assert p.source.types == {
        "device_id": "string",
        "country": "string",
        "plays": "long",
        "watched": "double",
    }
    assert p.weighted and p.engine().weighted
    assert p.value_columns == ("watched",)
    assert "the pane log of sessions" in p.describe()


@pytest.mark.parametrize(
    ("over", "field", "fragment"),
    [
        ({"keys": '["ad_id"]'}, "keys", "not a column of the upstream pane log"),
        (
            {"aggregates": 'x = "sum(seconds)"'},
            "aggregates.x",
            "keys device_id string, country string; aggregates plays long, watched double",
        ),
        ({"aggregates": 'longest = "max(watched)"'}, "aggregates.longest", "cannot withdraw"),
        ({"aggregates": 'top = "max_by(country, watched)"'}, "aggregates.top", "cannot withdraw"),
        ({"aggregates": 'recent = "last(watched)"'}, "aggregates.recent", "cannot withdraw"),
        ({"mode": "accumulating"}, "accumulation_mode", "accumulating_and_retracting"),
        ({"extra": 'event_time = "ts"'}, "event_time", "output timestamp"),
        ({"extra": '[watermark]\ndelay = "5m"'}, "watermark", "upstream's watermark"),
        ({"source": 'schema = { country = "string" }'}, "source.schema", "remove the schema"),
        ({"source": 'pipeline = "other"'}, "source.pipeline", "not 'other'"),
    ],
)
def test_what_a_downstream_cannot_read_is_refused_naming_the_field(tmp_path, over, field, fragment):
    e = error(configs(tmp_path, **over))
    assert e.field == field
    assert fragment in e.message


def test_over_an_accumulating_upstream_elements_only_add_so_any_aggregate_is_accepted(tmp_path):
    p = load_pipeline(
        configs(
            tmp_path,
            up_mode="accumulating",
            mode="discarding",
            aggregates='longest = "max(watched)"',
        )
    )
    assert not p.weighted


def test_an_upstream_path_that_is_neither_a_configuration_nor_a_lake(tmp_path):
    down = configs(tmp_path)
    down.write_text(down.read_text().replace(str(tmp_path / "up.toml"), str(tmp_path / "nowhere")))
    e = error(down)
    assert e.field == "source.path" and "does not exist" in e.message
    assert "an upstream that has not run yet has no lake: name its configuration file" in e.message


def test_an_upstream_lake_without_a_pane_log_is_refused(tmp_path):
    down = configs(tmp_path)
    (tmp_path / "empty-lake").mkdir()
    down.write_text(
        down.read_text().replace(str(tmp_path / "up.toml"), str(tmp_path / "empty-lake"))
    )
    e = error(down)
    assert e.field == "source.path" and "the upstream has no pane log yet" in e.message
    assert "Os {" not in e.message and "\n" not in e.message  # not delta-rs' own error


class _Latest(CombineFn):
    """A combiner of a user's own without ``retract`` (and without a ``repr``)."""

    output_type = "double"
    fields = ("watched",)

    def create(self):
        return 0.0

    def add(self, acc, value):
        return value["watched"]

    def merge(self, accs):
        return accs[-1]

    def extract(self, acc):
        return acc


def test_a_users_combiner_that_cannot_withdraw_is_named_by_its_class(tmp_path):
    """The refusal names the combiner by its class, not by a ``repr`` with an address."""
    p = load_pipeline(configs(tmp_path))
    with pytest.raises(PipelineConfigError) as e:
        dataclasses.replace(p, aggregates=(Aggregate("latest", _Latest()),))
    assert e.value.field == "aggregates.latest"
    assert "tests.jobs.test_pane_log_config._Latest(watched) cannot withdraw" in e.value.message
    assert " at 0x" not in e.value.message
