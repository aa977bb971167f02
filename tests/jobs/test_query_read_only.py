"""``panestore query`` reads: a statement that writes, loads code or changes settings is refused
before it runs, on one line with exit status 2; what reads still runs (no Spark: the lake is
written with the sinks API, as in ``test_changes_cli``)."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from tests.jobs.test_changes_cli import demo_lake


@pytest.fixture(scope="module")
def conf(tmp_path_factory):
    return demo_lake(tmp_path_factory.mktemp("query-read-only"))[0]


REFUSED = {
    # name: (SQL with {out}: a path in the test's directory, what the line names)
    "COPY": ("COPY (SELECT * FROM current) TO '{out}'", "COPY refused"),
    "COPY of a table": ("COPY current TO '{out}' (FORMAT parquet)", "COPY refused"),
    "EXPLAIN ANALYZE of COPY": (
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'",
        "EXPLAIN of COPY refused",
    ),
    "EXPORT": ("EXPORT DATABASE '{out}'", "EXPORT refused"),
    "ATTACH": ("ATTACH '{out}' AS other", "ATTACH refused"),
    "CREATE TABLE AS": ("CREATE TABLE copy AS SELECT * FROM current", "CREATE refused"),
    "CREATE VIEW": ("CREATE VIEW v AS SELECT 1", "CREATE refused"),
    "INSERT": ("INSERT INTO current SELECT * FROM current", "INSERT refused"),
    "DELETE": ("DELETE FROM current", "DELETE refused"),
    "SET": ("SET threads = 1", "SET refused"),
    "RESET": ("RESET TimeZone", "RESET refused"),
    "PRAGMA that sets": ("PRAGMA enable_profiling", "PRAGMA refused"),
    "INSTALL": ("INSTALL httpfs", "INSTALL refused"),
    "LOAD": ("LOAD httpfs", "LOAD refused"),
    "CALL": ("CALL pragma_version()", "CALL refused"),
    "COPY of a PIVOT of no listed values": (
        "COPY (PIVOT current ON device_id USING sum(plays)) TO '{out}'",
        "COPY (DuckDB runs it as",
    ),
    "two statements": ("SELECT 1; COPY (SELECT 1) TO '{out}'", "2 statements refused"),
    "two selects": ("SELECT 1; SELECT 2", "2 statements refused"),
    "nothing": (" ; ", "no SQL statement"),
}


@pytest.mark.heavy
@pytest.mark.parametrize("case", REFUSED)
def test_a_statement_that_does_not_only_read_is_refused_before_it_runs(
    case, conf, tmp_path, capsys
):
    sql, says = REFUSED[case]
    out = tmp_path / "written"
    capsys.readouterr()
    status = main(["query", conf, sql.format(out=out)])
    captured = capsys.readouterr()
    assert status == 2, captured.err
    assert captured.err.startswith(f"panestore query: {says}"), captured.err
    assert ": a query reads: one SELECT" in captured.err
    assert captured.err.count("\n") == 1 and captured.err.endswith("\n"), captured.err
    assert captured.out == ""
    assert not out.exists(), "the statement ran"


@pytest.mark.heavy
def test_the_command_refuses_copy_on_one_line_without_a_traceback(conf, tmp_path):
    out = tmp_path / "current.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.cli.commands", "query", conf, f"COPY current TO '{out}'"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("panestore query: COPY refused") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not out.exists()


READS = {
    # name: (SQL, a line of its output)
    "SELECT": ("SELECT count(*) AS n FROM current", "2"),
    "WITH": ("WITH w AS (SELECT * FROM current) SELECT count(*) AS n FROM w", "2"),
    "FROM first": ("FROM current SELECT count(*) AS n", "2"),
    "DESCRIBE": ("DESCRIBE current", "window_start_us"),
    "SHOW TABLES": ("SHOW TABLES", "current"),
    "SUMMARIZE": ("SUMMARIZE current", "window_start_us"),
    "PRAGMA that reads": ("PRAGMA table_info('current')", "window_start_us"),
    "EXPLAIN": ("EXPLAIN SELECT * FROM current", "physical_plan"),
    "EXPLAIN ANALYZE of a SELECT": (
        "EXPLAIN ANALYZE SELECT count(*) FROM current",
        "analyzed_plan",
    ),
    "PIVOT of no listed values": (
        "PIVOT (SELECT device_id, plays FROM current) ON device_id USING sum(plays)",
        "d1",
    ),
}


@pytest.mark.parametrize("case", READS)
def test_a_statement_that_reads_runs(case, conf, capsys):
    sql, says = READS[case]
    capsys.readouterr()
    status = main(["query", conf, sql, "--format", "csv"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert says in captured.out


def test_a_query_still_writes_its_out_file(conf, tmp_path, capsys):
    out = tmp_path / "current.csv"
    assert (
        main(["query", conf, "SELECT device_id FROM current", "--format", "csv", "--out", str(out)])
        == 0
    )
    assert out.read_text().splitlines()[0] == "device_id"


def test_the_documented_examples_run():
    import sinks.presentation.duck

    result = doctest.testmod(sinks.presentation.duck)
    assert result.failed == 0 and result.attempted > 0
