"""The examples that need a SparkSession run as printed: the ```python blocks of README.md and
docs/*.md that use ``spark`` (tests/doc_examples.py), and the API's docstrings (jobs/api/).

Each is given what it presupposes and nothing else: ``spark`` (the suite's session) and the
tables it streams, ``bronze.ad_views`` and ``bronze.events`` (Parquet tables: Spark streams a
table of a file format by its files), with the working directory a fresh one (their lakes and
saved configurations are relative paths).

The events are few, and shaped so that the examples' ``verify`` is OK on a scheduled (not
drained) run: every session but the newest is closed by the watermark (the newest event - 5m),
and the newest has 5 events, which its early ``AfterCount(5)`` fires whole.
"""

from __future__ import annotations

import doctest
import importlib
import io
import re

import pytest

from tests.doc_examples import Block, spark_blocks

pytestmark = pytest.mark.spark

AD_VIEWS = [  # device_id, country, ts (2024-06-01), seconds
    ("d1", "fr", "09:00", 12.5),
    ("d1", "fr", "09:10", 30.0),
    ("d2", "de", "09:20", 8.0),
    ("d1", "fr", "10:30", 5.0),
    *[("d3", "us", f"11:3{i}", 1.0 + i) for i in range(5)],
]
EVENTS = [  # user, ts (2024-06-01), amount
    ("u1", "09:00", 10.0),
    ("u1", "09:10", 5.0),
    ("u2", "09:30", 7.5),
    *[("u3", f"11:0{i}", 1.0 + i) for i in range(5)],
]
LATER_EVENTS = [("u4", f"11:1{i}", 2.0) for i in range(5)]  # arrive after the first run


def _insert(spark, table: str, rows) -> None:
    def value(v):
        if isinstance(v, str) and re.fullmatch(r"\d\d:\d\d", v):
            return f"TIMESTAMP'2024-06-01 {v}:00'"
        return repr(v)

    spark.sql(
        f"INSERT INTO {table} VALUES " + ", ".join(f"({', '.join(map(value, r))})" for r in rows)
    )


@pytest.fixture
def bronze(spark, tmp_path_factory):
    """The tables the examples stream from, in a database of their own; dropped after."""
    where = tmp_path_factory.mktemp("bronze")
    spark.sql(f"CREATE DATABASE bronze LOCATION '{where}'")
    try:
        spark.sql(
            "CREATE TABLE bronze.ad_views (device_id STRING, country STRING, ts TIMESTAMP, "
            "seconds DOUBLE) USING parquet"
        )
        spark.sql(
            "CREATE TABLE bronze.events (user STRING, ts TIMESTAMP, amount DOUBLE) USING parquet"
        )
        _insert(spark, "bronze.ad_views", AD_VIEWS)
        _insert(spark, "bronze.events", EVENTS)
        yield
    finally:
        spark.sql("DROP DATABASE IF EXISTS bronze CASCADE")


def _readme(scope, out, capsys):
    from jobs.cli.commands import main

    assert re.search(r"^\d+ batches, 9 rows, \d+ panes, 0 late, 0 rejected in ", out, re.M), out
    assert out.splitlines()[-1] == "True", "print(api.verify(...).ok)"
    # "then: panestore query ... conf/ad_views.toml"
    sql = "SELECT device_id, plays, watched FROM current ORDER BY window_start_us"
    assert main(["query", "conf/ad_views.toml", sql, "--format", "csv"]) == 0
    rows = capsys.readouterr().out.split()
    assert rows == ["device_id,plays,watched", "d1,2,42.5", "d2,1,8.0", "d1,1,5.0", "d3,5,15.0"]


def _sources(scope, out, capsys):
    from jobs.config import load_pipeline

    assert scope["result"].total("rows") == len(EVENTS)
    assert scope["report"].ok, str(scope["report"])
    # before a drain: the windows final at the watermark compared, the open ones counted
    summary = r"verify: OK: \d+ windows? compared, \d+ still open \(watermark [^)]+\)"
    assert re.fullmatch(summary, out.splitlines()[-1]), out
    assert load_pipeline("conf/spend.toml") == scope["pipeline"]


CHECKS = {  # what each block's comments say, beyond running: by (document, heading)
    ("README.md", "From PySpark code"): _readme,
    ("docs/sources.md", 'A streaming DataFrame, from PySpark code (`format = "dataframe"`)'): (
        _sources
    ),
}


def test_every_spark_block_is_checked():
    assert {(b.path, b.heading) for b in spark_blocks()} == set(CHECKS)


@pytest.mark.parametrize("block", spark_blocks(), ids=lambda b: b.id)
def test_a_spark_block_runs_as_printed(block: Block, spark, bronze, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "__example__", "spark": spark}
    exec(compile(block.code, block.id, "exec"), scope)
    out = capsys.readouterr().out
    CHECKS[(block.path, block.heading)](scope, out, capsys)


def _run_doctests(module_name: str, globs: dict) -> tuple[dict, str]:
    """Run the docstrings of ``module_name`` in the order of the module, with ``globs``; return
    the names they defined and what a failure printed."""
    module = importlib.import_module(module_name)
    tests = doctest.DocTestFinder().find(module, globs={**vars(module), **globs})
    tests = sorted((t for t in tests if t.examples), key=lambda t: t.lineno or 0)
    assert tests, f"{module_name} has no examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    defined: dict = {}
    for t in tests:
        runner.run(t, out=report.write, clear_globs=False)
        defined.update(t.globs)
    assert runner.failures == 0, report.getvalue()
    return defined, report.getvalue()


def test_the_api_docstrings_run(spark, bronze, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # jobs.api: define, run, verify, save
    defined, _ = _run_doctests("jobs.api", {"spark": spark})
    # jobs.api.streams continues it: five events later
    _insert(spark, "bronze.events", LATER_EVENTS)
    _run_doctests("jobs.api.streams", {"spark": spark, "pipeline": defined["pipeline"]})
    assert (tmp_path / "conf" / "spend.toml").is_file()
