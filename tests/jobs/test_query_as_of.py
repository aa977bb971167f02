"""``panestore query --as-of``: every spelling reads the version it names of the table it names
(never the newest rows), a time reads every table as it was, and a query over a table no
spelling pins — or that the lake does not have yet — is refused in one line naming it."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.driver.run_record import recording
from jobs.driver.runs import RunResult
from sinks.lake.tables import open_pane_log, open_view
from tests.jobs.test_changes_cli import demo_lake
from tests.jobs.test_status import new_lake


def _rows(capsys, conf: str, sql: str, *as_of: str) -> list[dict]:
    capsys.readouterr()
    args = [a for v in as_of for a in ("--as-of", v)]
    assert main(["query", conf, sql, "--format", "json", *args]) == 0, capsys.readouterr().err
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _count(capsys, conf: str, table: str, *as_of: str) -> int:
    return _rows(capsys, conf, f"SELECT count(*) AS n FROM {table}", *as_of)[0]["n"]


def _runs(conf: str, n: int) -> None:
    pipeline = load_pipeline(conf)
    for _ in range(n):
        with recording(pipeline, RunResult(), "scheduled", print):
            pass


@pytest.mark.heavy
def test_each_table_is_read_at_the_version_named(tmp_path, capsys):
    conf, spec = demo_lake(tmp_path)
    _runs(conf, 2)  # runs: version 1 (created with the first row), version 2
    by_version = [len(open_pane_log(spec, version=v).to_pyarrow_table()) for v in range(4)]
    assert by_version[1] < by_version[3]  # the pane log grew: old rows are not the newest
    for v in range(1, 4):
        assert _count(capsys, conf, "panes", f"panes:{v}") == by_version[v]
    assert _count(capsys, conf, "runs", "runs:1") == 1
    assert _count(capsys, conf, "runs", "runs:2") == 2
    assert _count(capsys, conf, "late", "late:0") == 0
    assert _count(capsys, conf, "rejected", "rejected:0") == 0
    views = [len(open_view(spec, version=v).to_pyarrow_table()) for v in range(4)]
    for v in range(4):
        assert _count(capsys, conf, "current", f"current:{v}") == views[v]
        assert _count(capsys, conf, "current", f"view:{v}") == views[v]
    # two tables, each at its own version, in one query (one flag, or two)
    sql = "SELECT (SELECT count(*) FROM panes) AS p, (SELECT count(*) FROM runs) AS r"
    assert _rows(capsys, conf, sql, "panes:1,runs:1") == [{"p": by_version[1], "r": 1}]
    assert _rows(capsys, conf, sql, "panes:2", "runs:2") == [{"p": by_version[2], "r": 2}]


@pytest.mark.heavy
def test_a_time_reads_every_table_as_it_was(tmp_path, capsys):
    conf, spec = demo_lake(tmp_path)
    time.sleep(1)  # beyond the commits' own timestamps' skew
    between = datetime.now(timezone.utc).isoformat()
    time.sleep(1)
    _runs(conf, 1)
    sql = "SELECT (SELECT count(*) FROM panes) AS p, (SELECT count(*) FROM current) AS c"
    now = len(open_pane_log(spec).to_pyarrow_table()), len(open_view(spec).to_pyarrow_table())
    assert _rows(capsys, conf, sql, between) == [{"p": now[0], "c": now[1]}]
    capsys.readouterr()
    # the runs table did not exist then: said, not read at its newest
    assert main(["query", conf, "SELECT * FROM runs", "--as-of", between]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "table runs did not exist as of" in err


@pytest.mark.heavy
def test_a_table_no_spelling_pins_is_refused_naming_it(tmp_path, capsys):
    conf, _ = demo_lake(tmp_path)
    capsys.readouterr()
    sql = "SELECT * FROM panes JOIN current USING (device_id)"
    assert main(["query", conf, sql, "--as-of", "panes:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "does not say which version of current the query reads" in err
    assert "--as-of current:N" in err


@pytest.mark.parametrize("table", ["runs", "panes", "current", "late", "rejected"])
def test_a_table_the_lake_does_not_have_yet_says_what_to_do(tmp_path, capsys, table):
    conf = new_lake(tmp_path)
    assert main(["query", conf, f"SELECT count(*) FROM {table}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "duckdb_constraints" not in err
    assert f"table {table} does not exist yet in lake" in err
    assert "panestore run" in err
