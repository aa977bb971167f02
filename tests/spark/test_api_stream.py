"""The Python API over a user's streaming DataFrame (a Python data source of the tests): a job
killed at several points and run again writes the pane log an uninterrupted job writes, and a
record the DataFrame cannot type is a rejected row with its reason."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.spark.counter_source import counter_stream, event, pipeline
from tests.spark.support import norm_pane

pytestmark = pytest.mark.spark

EVENTS = 300
SCHEMA = "user string, ts timestamp, amount string"


def tables(p):
    from deltalake import DeltaTable

    return {
        t: DeltaTable(p.table_path(t)).to_pyarrow_table().to_pylist()
        for t in ("panes", "late", "rejected")
    }


def job(lake, counter, *args):
    return subprocess.run(
        [sys.executable, "-m", "tests.spark.counter_source", str(lake), str(counter), *args],
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )


def test_a_killed_api_job_run_again_writes_the_uninterrupted_pane_log(spark, tmp_path, request):
    from jobs import api

    counter = tmp_path / "counter"
    counter.write_text(str(EVENTS))
    base = pipeline(tmp_path / "base")
    api.run(base, counter_stream(spark, counter), progress=None)
    api.run(base, counter_stream(spark, counter), drain=True, progress=None)
    want = tables(base)

    lake = tmp_path / "killed"
    # the data batch between its table commits; with --run-slow first before them (state and
    # files written: the command line's kill at that point is tests/spark/test_kill_safety.py's)
    slow = request.config.getoption("--run-slow")
    for kill_at in ("before_commit:0",) * slow + ("between_tables:0",):
        proc = job(lake, counter, "--kill-at", kill_at)
        assert proc.returncode == -signal.SIGKILL, (kill_at, proc.stderr[-3000:])
    killed = pipeline(lake)
    result = api.run(killed, counter_stream(spark, counter), progress=None)
    assert result.committed(), "the rerun replays the batch the kill left"
    api.run(killed, counter_stream(spark, counter), drain=True, progress=None)
    got = tables(killed)

    panes = got["panes"]
    assert len({p["pane_id"] for p in panes}) == len(panes), "duplicate panes"
    same = set(panes[0]) - {"processing_time_us"}
    assert sorted(norm_pane(r, same) for r in panes) == sorted(
        norm_pane(r, same) for r in want["panes"]
    )
    for t, key in (("late", "timestamp_us"), ("rejected", "raw")):
        assert sorted(r[key] for r in got[t]) == sorted(r[key] for r in want[t]), t
    bad = [i for i in range(EVENTS) if event(i)[2] == "n/a"]
    assert len(got["rejected"]) == len(bad) > 0
    assert {r["reason"] for r in got["rejected"]} == {"unparseable value (amount)"}
    batch = spark.createDataFrame([event_row(i) for i in range(EVENTS)], SCHEMA)
    report = api.verify(killed, batch)
    assert report.ok, str(report)


def event_row(i):
    import datetime as dt

    user, ts, amount = event(i)
    return (user, dt.datetime.fromtimestamp(ts / 1e6, tz=dt.timezone.utc), amount)


def test_events_that_do_not_fit_the_pipeline_are_refused_naming_the_setting(spark, tmp_path):
    from jobs import api
    from jobs.config import PipelineConfigError

    counter = tmp_path / "counter"
    counter.write_text("3")
    p = pipeline(tmp_path / "lake")
    with pytest.raises(PipelineConfigError, match="streaming DataFrame"):
        api.run(p, spark.createDataFrame([event_row(0)], SCHEMA))
    with pytest.raises(PipelineConfigError) as e:
        api.run(p, counter_stream(spark, counter).drop("amount"))
    assert e.value.field == "source.schema.amount"
    assert not (tmp_path / "lake").exists(), "nothing written"


@pytest.mark.parametrize(("beside", "path"), [("sum", "per element"), ("count", "lifted")])
def test_a_combiner_of_the_users_own_runs_folds_and_verifies(spark, tmp_path, beside, path):
    """A code pipeline's own ``CombineFn`` (declared output type and columns, JSON accumulator),
    in discarding mode beside a built-in: its panes are in the pane log as its declared type,
    the view folds them back to each window's answer, ``verify`` agrees, and a second run finds
    the same pipeline (its text is stable across processes). Beside a float sum it is added
    element by element; beside a count, lifted (each window's values of a batch at once)."""
    from deltalake import DeltaTable

    from jobs import api
    from jobs.driver.plan import operator_config
    from tests.spark.counter_source import spread_pipeline

    counter = tmp_path / "counter"
    counter.write_text(str(EVENTS))
    p = spread_pipeline(tmp_path / "lake", beside)
    config = operator_config(p)
    assert config.engines().kind.value == path
    api.run(p, counter_stream(spark, counter), progress=None)
    api.run(p, counter_stream(spark, counter), drain=True, progress=None)
    panes = DeltaTable(p.table_path("panes")).to_pyarrow_table()
    assert str(panes.schema.field("spread").type) == "double"
    view = DeltaTable(p.table_path("current")).to_pyarrow_table().to_pylist()
    windows: dict[tuple, list[float]] = {}
    for i in range(EVENTS):
        user, ts, amount = event(i)
        if amount == "n/a":
            continue
        start = ts - ts % 60_000_000
        windows.setdefault((user, start), []).append(float(amount))
    late = {(r["user"], r["window_start_us"]) for r in tables(p)["late"] if "user" in r}
    got = {(r["user"], r["window_start_us"]): r["spread"] for r in view}
    for (user, start), amounts in windows.items():
        if (user, start) in got:
            assert got[(user, start)] == max(amounts) - min(amounts) or (user, start) in late
    assert got, "windows were folded"
    batch = spark.createDataFrame([event_row(i) for i in range(EVENTS)], SCHEMA)
    report = api.verify(p, batch)
    assert report.ok, str(report)


def test_an_accumulator_of_no_text_stops_the_run_with_one_line_naming_it(spark, tmp_path):
    """A user's combiner whose accumulator becomes an object of no text once a window adds an
    amount of 12 (the definition's probe, with small values, cannot see it): the run fails with
    one line naming the window, the aggregate and the type, and commits nothing. Before, the
    accumulator was written as null and the discarding view could never fold it."""
    from deltalake import DeltaTable

    from jobs import api
    from panes import combiners
    from sinks.lake.errors import AccumulatorNotStorable
    from tests.spark.counter_source import CappedFn

    counter = tmp_path / "counter"
    counter.write_text("40")  # event 12 has amount 12
    p = pipeline(
        tmp_path / "lake",
        "capped",
        accumulation_mode="discarding",
        aggregates={"capped": CappedFn(), "total": combiners.sum("amount")},
    )
    with pytest.raises(AccumulatorNotStorable) as raised:
        api.run(p, counter_stream(spark, counter), drain=True, progress=None)
    message = str(raised.value)
    assert "\n" not in message and "window [2024-01-01T" in message, message
    assert "aggregate capped" in message and "combiners_of_your_own.Opaque" in message
    assert DeltaTable(p.table_path("panes")).to_pyarrow_table().num_rows == 0
