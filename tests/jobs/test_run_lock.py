"""One run per lake: a second ``panestore run`` of a lake refuses, writing nothing."""

from __future__ import annotations

import pytest

from sinks.lake.errors import LakeBusy
from tests.lock_holder import lock_held
from tests.pipelines import small_pipeline


def pipeline(tmp_path):
    return small_pipeline("locked", tmp_path / "lake", tmp_path / "landing", create_path=True)


def test_a_second_run_of_a_lake_is_refused_before_spark_and_writes_nothing(tmp_path):
    from jobs.driver.runs import run

    p = pipeline(tmp_path)
    with lock_held(tmp_path / "lake", "run") as pid:
        with pytest.raises(
            LakeBusy,
            match=rf"another run of pipeline 'locked' is running \(pid "
            rf"{pid} on ",
        ):
            run(p, spark=None)  # refused before a Spark session is asked for
        assert sorted(x.name for x in (tmp_path / "lake").iterdir()) == ["_locks"]
