"""The dedup settings (docs/running.md, "Duplicates"): parsed from a file or the Python API,
refused naming the setting when wrong, saved and loaded back the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobs.config.load import pipeline_from_dict
from jobs.config.save import pipeline_to_dict
from jobs.config.values import PipelineConfigError


def conf(**changes: Any) -> dict[str, Any]:
    return {
        "name": "p",
        "lake": "/tmp/unused",
        "keys": ["device_id"],
        "event_time": "ts",
        "window": "FixedWindows(1h)",
        "aggregates": {"plays": "count()"},
        "source": {
            "path": "/tmp/unused",
            "schema": {
                "device_id": "string",
                "ts": "timestamp",
                "producer": "string",
                "seq": "long",
            },
        },
        **changes,
    }


def test_one_id_column_or_several_and_a_horizon_are_read_and_saved_back():
    one = pipeline_from_dict(conf(dedup="seq"))
    assert one.dedup == ("seq",) and one.dedup_horizon is None
    several = pipeline_from_dict(conf(dedup=["producer", "seq"], dedup_horizon="2h"))
    assert several.dedup == ("producer", "seq") and several.dedup_horizon == 7_200_000_000
    for p in (one, several, pipeline_from_dict(conf())):
        assert pipeline_from_dict(pipeline_to_dict(p)) == p
    assert several.describe().splitlines()[-1] == (
        "  duplicates dropped by key and producer, seq, horizon 2h"
    )
    assert "duplicates" not in pipeline_from_dict(conf()).describe()


def test_the_python_api_takes_the_horizon_as_a_timedelta_or_text():
    from jobs.api import dataframe_source, define

    source = dataframe_source({"device_id": "string", "ts": "timestamp", "seq": "long"})
    common: dict[str, Any] = dict(
        source=source, lake="/tmp/unused", keys="device_id", event_time="ts",
        window="FixedWindows(1h)", aggregates={"n": "count()"},
    )  # fmt: skip
    a = define("p", dedup="seq", dedup_horizon=timedelta(hours=2), **common)
    b = define("p", dedup=["seq"], dedup_horizon="2h", **common)
    assert a.dedup == b.dedup == ("seq",) and a.dedup_horizon == b.dedup_horizon == 7_200_000_000


@pytest.mark.parametrize(
    "changes, setting, says",
    [
        ({"dedup": "nope"}, "dedup", "'nope' is not in source.schema"),
        ({"dedup": ["seq", "seq"]}, "dedup", "duplicated column"),
        ({"dedup_horizon": "1h"}, "dedup_horizon", "without dedup"),
        ({"dedup": "seq", "dedup_horizon": "soon"}, "dedup_horizon", ""),
        ({"dedup": 3}, "dedup", "column name"),
    ],
)
def test_a_wrong_dedup_setting_is_refused_naming_it(changes, setting, says):
    with pytest.raises(PipelineConfigError) as error:
        pipeline_from_dict(conf(**changes))
    assert error.value.field == setting and says in str(error.value)
    assert "\n" not in str(error.value)
