"""Scenarios of ``tests/scenarios`` on the Spark job: each step's panes and dropped elements
equal what the scenario lists (in any order: the pane log has no order within a batch).

Runs on Spark (``tests/scenarios/on_spark.py`` says how steps become landed files, control rows
and scheduled runs):

* ``sessions_latest_merge_two_keys``: sessions of two keys merging, the LATEST timestamp.
* ``sessions_merge_fired_windows_accumulating``: sessions that already fired early panes merge;
  the merged pane lists what it supersedes.
* ``sliding_partially_expired``: sliding windows; an element dropped as expired from one of its
  windows (the late table) and accepted into the other.

The other scenarios do not run here: the hand-written ones (``triggers.toml``, ``merging.toml``)
have sub-millisecond watermarks (Spark's watermark is in ms); the paper's example and every
scenario with processing-time steps or triggers need a processing time the test controls, while
the job's is Spark's batch timestamp; the global window closes only at the drain. And each step
is a Spark run of a few seconds: three short scenarios (ten steps) keep this test near a minute.
"""

from __future__ import annotations

import pytest

from tests.scenarios import on_spark
from tests.scenarios.format import load_all

pytestmark = pytest.mark.spark

ON_SPARK = [
    "sessions_latest_merge_two_keys",
    "sessions_merge_fired_windows_accumulating",
    "sliding_partially_expired",
]


@pytest.mark.parametrize("name", ON_SPARK)
def test_scenario_on_the_spark_job(spark, tmp_path, name):
    sc = load_all()[name]
    observed = on_spark.run(sc, tmp_path, spark)
    for i, (step, (panes, dropped)) in enumerate(zip(sc.steps, observed, strict=True)):
        where = f"{name}, step {i} {step.inputs()}"
        assert panes == sorted(step.panes), f"{where}: panes"
        assert dropped == sorted(step.dropped), f"{where}: dropped"
