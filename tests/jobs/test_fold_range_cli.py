"""A discarding window whose panes each fit the pane log's 64-bit column but whose total does not:
``panestore materialize``, the fold at the end of ``panestore run`` and ``query --as-of folded:N``
exit 1 with one line naming the key, the window and the aggregate, and the view keeps what it
had; ``panestore verify`` reports the window with its exact total. No Spark: the pane log is
written with the sinks API (the run's Spark session and query are stood in for)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import BatchSink
from panes import Simulator
from panes.time import END_OF_TIME
from tests.sinks.lakes import view_dict
from tests.sinks.test_fold_range import A, wrap_the_view

CONF = """\
name = "big"
lake = {lake!r}
keys = ["user"]
event_time = "ts"
window = "FixedWindows(1h)"
trigger = "Repeatedly(AfterCount(1))"
accumulation_mode = "discarding"

[source]
format = "jsonl"
path = {landing!r}

[source.schema]
user = "string"
ts = "timestamp"
n = "long"

[aggregates]
total = "sum(n)"
"""
T0 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
WINDOW = "window [2024-01-01T00:00:00+00:00, 2024-01-01T01:00:00+00:00)"
AT = (("u1",), (T0, T0 + 3_600_000_000))


def big_lake(tmp_path: Path) -> str:
    """The configuration of a lake whose batch 0 holds one pane of u1's first hour, A; folded."""
    landing = tmp_path / "landing"
    landing.mkdir()
    conf = tmp_path / "big.toml"
    conf.write_text(CONF.format(lake=str(tmp_path / "lake"), landing=str(landing)))
    BatchSink(load_pipeline(conf)).create_tables()
    append_pane(str(conf), 0, 1)
    assert main(["materialize", str(conf)]) == 0
    return str(conf)


def append_pane(conf: str, batch_id: int, second: int) -> None:
    """Commit batch ``batch_id``: a pane of A for u1's first hour, as a run's batch does (and
    land its event, for verify's batch over the raw events)."""
    pipeline = load_pipeline(conf)
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())
    ts = T0 + second * 1_000_000
    panes = sim.add_elements([("u1", {"n": A}, ts)])
    assert [p.value for p in panes] == [{"total": A}]
    index = batch_id  # the window's next pane, at a watermark past the window (verify: final)
    info = {"index": index, "is_first": index == 0}
    panes = [p._replace(pane=p.pane._replace(**info), watermark=END_OF_TIME) for p in panes]
    BatchSink(pipeline).pane_log.append(batch_id, panes)
    line = json.dumps({"user": "u1", "ts": f"2024-01-01T00:00:{second:02}Z", "n": A})
    (Path(pipeline.source.path) / f"{batch_id}.jsonl").write_text(line + "\n")


def the_view(conf: str) -> tuple[int, dict]:
    spec = view_spec(load_pipeline(conf))
    from sinks.lake.tables import open_view

    return open_view(spec).version(), view_dict(spec)


def one_line_naming_the_window(err: str, prefix: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(prefix)
    assert f"user='u1', {WINDOW}" in err and f"total = {2 * A}" in err
    assert "64-bit integer column 'total'" in err
    return err


def test_materialize_stops_with_one_line_and_writes_nothing(tmp_path, capsys):
    conf = big_lake(tmp_path)
    before = the_view(conf)
    assert before[1] == {AT: {"total": A}}
    append_pane(conf, 1, 2)
    capsys.readouterr()
    assert main(["materialize", conf]) == 1
    err = capsys.readouterr().err
    one_line_naming_the_window(err, "panestore materialize: ")
    assert "nothing was written: the view stays folded up to pane-log version 1" in err
    assert the_view(conf) == before


def test_the_fold_at_the_end_of_a_run_stops_with_one_line(tmp_path, capsys, monkeypatch):
    import jobs.driver.runs
    from jobs.driver.batch_sink import BatchStats
    from jobs.driver.runs import BatchReport, RunResult, fold_view

    conf = big_lake(tmp_path)
    before = the_view(conf)

    def run(pipeline, **kw) -> RunResult:  # batch 1 commits its pane, then the run folds
        append_pane(conf, 1, 2)
        result = RunResult([BatchReport(1, 1, None, BatchStats(1, panes=1, committed=True))])
        assert kw["fold"]
        fold_view(pipeline, result, print)
        return result

    monkeypatch.setattr(jobs.driver.runs, "run", run)  # its checks and session too
    capsys.readouterr()
    assert main(["run", conf, "-v"]) == 1  # -v: stderr as it is
    last = capsys.readouterr().err.splitlines()[-1]
    one_line_naming_the_window(last + "\n", "panestore: materialize: ")
    assert the_view(conf) == before


def test_query_as_of_the_pane_log_stops_with_one_line(tmp_path, capsys):
    conf = big_lake(tmp_path)
    append_pane(conf, 1, 2)
    capsys.readouterr()
    assert main(["query", conf, "SELECT total FROM current", "--as-of", "folded:2"]) == 1
    one_line_naming_the_window(capsys.readouterr().err, "panestore query: ")


def test_verify_names_the_window_and_its_exact_total(tmp_path, capsys):
    conf = big_lake(tmp_path)
    append_pane(conf, 1, 2)
    wrap_the_view(view_spec(load_pipeline(conf)), folded=2)  # as a fold that wrapped left it
    capsys.readouterr()
    assert main(["verify", conf]) == 1
    out = capsys.readouterr().out
    assert out.count(f"expected {{'total': {2 * A}}}") == 2  # the refold's, the batch's
    assert out.count("beyond the view's 64-bit integer column 'total'") == 2
    assert out.endswith(
        "verify: FAILED: 1 window compared, 0 still open (watermark: the end of time)\n"
    )


def test_status_says_the_view_cannot_catch_up_until_a_fold_succeeds(tmp_path, capsys):
    """A fold that fails leaves the view behind for good (every fold meets the same pane):
    ``status`` is ``failed`` with the fold's one-line reason and exits 1, not ``ok``."""
    import json
    import re

    conf = big_lake(tmp_path)
    append_pane(conf, 1, 2)
    assert main(["materialize", conf]) == 1
    capsys.readouterr()
    assert main(["status", conf]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^state\s+failed$", out, re.M), out
    fold = re.search(r"^view fold\s+failed at \S+: (.*)$", out, re.M)
    assert fold and "64-bit integer column 'total'" in fold.group(1), out
    assert main(["status", conf, "--json"]) == 1
    status = json.loads(capsys.readouterr().out)
    assert status["state"] == "failed" and "64-bit" in status["view_fold_error"]


def test_a_fold_that_succeeds_clears_the_failure(tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.config.sink_spec import view_spec
    from sinks.fold.last_failure import fold_failure, note_fold_failure
    from sinks.fold.materializer import Materializer

    spec = view_spec(load_pipeline(big_lake(tmp_path)))
    note_fold_failure(spec, ValueError("disk full\nsecond line"))
    assert fold_failure(spec).error == "disk full; second line"
    Materializer(spec).run()
    assert fold_failure(spec) is None
