"""Scenarios of ``tests/scenarios`` on the Spark job: each step's panes and dropped elements
equal what the scenario lists (in any order: the pane log has no order within a batch).

Runs on Spark (``tests/scenarios/on_spark.py`` says how steps become landed files, control rows
and scheduled runs):

* ``a_merged_window_names_what_it_supersedes_in_every_mode__retracting``: sessions merge;
  retractions of the merged windows' panes, and the merged pane lists what it supersedes.
* ``sessions_latest_merge_two_keys``: sessions of two keys merge; the LATEST timestamp; on-time
  panes when the watermark passes them.
* ``sliding_partially_expired``: sliding windows; an element dropped as expired from one of its
  windows (the late table) and accepted, late, into the other.

The other scenarios do not run here, for one of these reasons: processing-time steps or
triggers (the paper's example, several Beam and hand-written ones) need a processing time the
test controls, while the job's is Spark's batch timestamp; most hand-written scenarios move the
watermark by microseconds, while Spark's watermark is in milliseconds; the global window closes
only at the drain. Of those that could run, each step costs a Spark run of a few seconds: three
short scenarios (nine steps) keep this test near a minute, and the job's equality with the
simulator over longer runs is tested by ``test_job.py``.
"""

from __future__ import annotations

import pytest

from tests.scenarios import on_spark
from tests.scenarios.format import load_all

pytestmark = pytest.mark.spark

ON_SPARK = [
    "a_merged_window_names_what_it_supersedes_in_every_mode__retracting",
    # other Spark tests cover several keys: in the slow run only (./dev test --run-slow)
    pytest.param("sessions_latest_merge_two_keys", marks=pytest.mark.slow),
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
