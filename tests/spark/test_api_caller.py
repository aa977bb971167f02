"""The Python API leaves the caller's session and process as it found them: the session's
runtime configuration, log4j's levels, the environment, and the garbage-collector thresholds of
the Python workers the caller's later jobs reuse; after a run that returns and after one
interrupted (KeyboardInterrupt)."""

from __future__ import annotations

import os
from collections.abc import Iterable

import pytest

from tests.pipelines import small_pipeline
from tests.spark.counter_source import counter_stream, pipeline
from tests.spark.support import put

pytestmark = pytest.mark.spark

AVAILABLE_NOW_WRAPPER = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"


def _log4j(spark):
    jvm = spark.sparkContext._jvm
    return jvm, jvm.org.apache.logging.log4j.LogManager.getContext(False)


def logger_levels(spark) -> dict[str, str]:
    """Every logger log4j has a configuration of (root: ""), with its level."""
    _, context = _log4j(spark)
    loggers = context.getConfiguration().getLoggers()
    return {str(name): str(loggers[name].getLevel()) for name in loggers}


def drop_logger_configs(spark, names: Iterable[str]) -> None:
    """Take off the loggers' own configurations (a session that never quieted them)."""
    _, context = _log4j(spark)
    configuration = context.getConfiguration()
    for name in names:
        configuration.removeLogger(name)
    context.updateLoggers()


def effective_levels(spark, names: Iterable[str]) -> dict[str, str]:
    jvm, _ = _log4j(spark)
    manager = jvm.org.apache.logging.log4j.LogManager
    return {n: str(manager.getLogger(n).getLevel()) for n in names}


def state(spark) -> dict:
    """What a caller would notice: the session's configuration, log levels, the environment."""
    from jobs.startup.session import AVAILABLE_NOW_LOGGERS, QUIET_LOGGERS

    return {
        "conf": spark.conf.getAll,
        "loggers": logger_levels(spark),
        "levels": effective_levels(spark, ("", *AVAILABLE_NOW_LOGGERS, *QUIET_LOGGERS)),
        "environ": dict(os.environ),
    }


def _thresholds(batches):
    import gc

    import pyarrow as pa

    for batch in batches:
        n = batch.num_rows
        g0, g1, g2 = gc.get_threshold()
        yield pa.RecordBatch.from_pydict(
            {"pid": [os.getpid()] * n, "g0": [g0] * n, "g1": [g1] * n, "g2": [g2] * n}
        )


def workers_gc(spark) -> dict[int, tuple[int, int, int]]:
    """Each idle Python worker's garbage-collector thresholds, by process: a job of 16 one-row
    tasks (a reused worker goes back at the end of the idle queue: every idle one runs a task)."""
    rows = (
        spark.range(0, 16, 1, 16)
        .mapInArrow(_thresholds, "pid long, g0 long, g1 long, g2 long")
        .collect()
    )
    return {r.pid: (r.g0, r.g1, r.g2) for r in rows}


def changes(before: dict, after: dict) -> dict:
    """What differs between two :func:`state` snapshots: per part, each key whose value
    changed (before, after; None: absent)."""
    out = {}
    for part in before:
        b, a = before[part], after[part]
        diff = {k: (b.get(k), a.get(k)) for k in b.keys() | a.keys() if b.get(k) != a.get(k)}
        if diff:
            out[part] = diff
    return out


@pytest.fixture
def aws_profile(tmp_path, monkeypatch):
    """AWS shared files with a profile and an environment that names no access key: the API
    takes the profile's credentials into the environment while it runs."""
    credentials = tmp_path / "aws-credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = secret\n"
        "region = eu-west-3\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)


def as_a_callers_session(spark) -> None:
    """The shared session as a user's that never ran panestore: no availableNow wrapper, the
    loggers a run quiets without levels of their own (an earlier test's run may have set them)."""
    from jobs.startup.session import AVAILABLE_NOW_LOGGERS

    spark.conf.unset(AVAILABLE_NOW_WRAPPER)
    drop_logger_configs(spark, AVAILABLE_NOW_LOGGERS)


def test_a_run_over_the_callers_dataframe_leaves_its_session_and_workers_as_found(
    spark, tmp_path, aws_profile
):
    from jobs import api

    as_a_callers_session(spark)
    counter = tmp_path / "counter"
    counter.write_text("60")
    before_workers = workers_gc(spark)
    assert len(set(before_workers.values())) == 1, before_workers
    before = state(spark)

    result = api.run(pipeline(tmp_path / "lake"), counter_stream(spark, counter), progress=None)

    assert result.committed() and result.folded is not None
    left = changes(before, state(spark))
    after_workers = workers_gc(spark)
    assert before_workers.keys() & after_workers.keys(), "the workers are reused"
    left_in_workers = set(after_workers.values()) - set(before_workers.values())
    assert not left and not left_in_workers, (left, after_workers)


def test_an_interrupted_run_in_the_active_session_leaves_it_as_found(
    spark, tmp_path, aws_profile, monkeypatch
):
    """No session given: the run takes the active one with panestore's settings (shuffle
    partitions, UTC, log level WARN) and gives it back with the caller's, interrupted in the
    fold (Ctrl-C where no stop handler is installed)."""
    from jobs import api
    from sinks.fold.materializer import Materializer

    as_a_callers_session(spark)
    zone, partitions = (spark.conf.get(k) for k in ("spark.sql.session.timeZone", SHUFFLE))
    root = effective_levels(spark, [""])[""]

    def interrupted(self, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(Materializer, "run", interrupted)  # the fold: the run's last step
    landing = tmp_path / "landing"
    put(landing, "a.jsonl", ['{"k": "a", "ts": "2024-01-01T00:00:01Z"}'])
    p = small_pipeline("interrupted", tmp_path / "lake", landing)
    try:
        spark.conf.set("spark.sql.session.timeZone", "America/New_York")
        spark.conf.set(SHUFFLE, "3")
        spark.sparkContext.setLogLevel("ERROR")
        before = state(spark)
        with pytest.raises(KeyboardInterrupt):
            api.run(p, progress=None)
        after = state(spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        spark.conf.set(SHUFFLE, partitions)
        spark.sparkContext.setLogLevel(root)
    assert os.path.isdir(p.table_path("panes")), "the run ran"
    assert changes(before, after) == {}


SHUFFLE = "spark.sql.shuffle.partitions"
