"""Every user-facing error of ``panestore`` is one line on stderr, with exit status 2 for misuse
(no Spark: the lake is written with the sinks API, as in ``test_changes_cli``)."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import build_parser, main
from tests.jobs.test_changes_cli import demo_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """(conf of a demo lake with a pane log and a view, conf of a lake not written yet)."""
    root = tmp_path_factory.mktemp("cli-errors")
    conf, _ = demo_lake(root)
    unwritten = root / "unwritten.toml"
    text = (root / "demo.toml").read_text()
    unwritten.write_text(text.replace(repr(str(root / "lake")), repr(str(root / "no-lake"))))
    return conf, str(unwritten), root


def status_and_stderr(argv: list[str], capsys) -> tuple[int, str]:
    """``main(argv)``'s exit status (argparse's refusals included) and stderr."""
    capsys.readouterr()
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    return status, capsys.readouterr().err


CASES = {
    # name: (argv with {conf} / {unwritten} / {root}, what the line says)
    "window not a time": (
        ["history", "{conf}", "--key", "d1,DE", "--window", "garbage"],
        "argument --window: expected microseconds since the epoch",
    ),
    "plot window not a time": (
        ["plot", "{conf}", "--key", "d1,DE", "--window", "9am"],
        "argument --window: expected microseconds",
    ),
    "as-of version not a number": (
        ["query", "{conf}", "--as-of", "panes:abc", "SELECT 1"],
        "'abc' is not a version",
    ),
    "as-of not a time": (
        ["query", "{conf}", "--as-of", "yesterday", "SELECT 1"],
        "expected TABLE:N (TABLE one of panes, current, late, rejected, runs",
    ),
    "as-of view version after the latest": (
        ["query", "{conf}", "--as-of", "view:99", "SELECT 1"],
        "table current has versions 0..3",
    ),
    "as-of pane-log version after the latest": (
        ["query", "{conf}", "--as-of", "panes:99", "SELECT 1"],
        "table panes has versions 0..3",
    ),
    "as-of fold after the pane log's latest": (
        ["query", "{conf}", "--as-of", "folded:99", "SELECT 1"],
        "pane log has versions 0..3",
    ),
    "as-of a bare version names no table": (
        ["query", "{conf}", "--as-of", "2", "SELECT 1"],
        "a version of which table? Name it: panes:2, current:2",
    ),
    "as-of a table the query reads is not pinned": (
        ["query", "{conf}", "--as-of", "panes:1", "SELECT * FROM panes, current"],
        "--as-of panes:1 does not say which version of current the query reads",
    ),
    "as-of not a table": (
        ["query", "{conf}", "--as-of", "views:1", "SELECT 1"],
        "'views' is not a table of a lake",
    ),
    "SQL syntax": (["query", "{conf}", "SELEC 1"], "the SQL failed: Parser Error: syntax error"),
    "SQL unknown table": (
        ["query", "{conf}", "SELECT * FROM nosuch"],
        "the SQL failed: Catalog Error: Table with name nosuch",
    ),
    "SQL bad cast": (["query", "{conf}", "SELECT CAST('a' AS INT)"], "Conversion Error"),
    "format unknown": (
        ["query", "{conf}", "--format", "xml", "SELECT 1"],
        "argument --format: invalid choice: 'xml'",
    ),
    "parquet without --out": (
        ["query", "{conf}", "--format", "parquet", "SELECT 1"],
        "parquet output needs an output file",
    ),
    "--out in no directory": (
        ["query", "{conf}", "--out", "{root}/nowhere/x.csv", "SELECT 1"],
        "nowhere does not exist",
    ),
    "plot --out in no directory": (
        ["plot", "{conf}", "--key", "d1,DE", "--out", "{root}/nowhere/x.png"],
        "nowhere does not exist",
    ),
    "since not a version": (
        ["changes", "{conf}", "--since", "abc"],
        "expected a view version (0, 1, ...), got 'abc'",
    ),
    "since after the latest": (
        ["changes", "{conf}", "--since", "9"],
        "--since 9 is after the latest version",
    ),
    "until before since": (
        ["changes", "{conf}", "--since", "3", "--until", "1"],
        "--until 1: expected a view version from --since (3)",
    ),
    "key of the wrong shape": (
        ["history", "{conf}", "--key", "d1,DE,x"],
        "does not match key columns ['device_id', 'country']",
    ),
    "plot of an unknown key": (["plot", "{conf}", "--key", "nobody,DE"], "no panes for key"),
    "plot of neither a key nor the skew": (["plot", "{conf}"], "give either --key KEY"),
    "plot of a key and the skew": (
        ["plot", "{conf}", "--skew", "--key", "d1,DE"],
        "give either --key KEY",
    ),
    "skew of a lake with no runs": (
        ["plot", "{conf}", "--skew", "--out", "{root}/skew.png"],
        "no runs recorded in the lake",
    ),
    "skew with a window": (
        ["plot", "{conf}", "--skew", "--window", "0"],
        "--window and --elements are options of --key",
    ),
    "report without --out": (["report", "{conf}"], "the following arguments are required: --out"),
    "report --out a file": (
        ["report", "{conf}", "--out", "{root}/demo.toml"],
        "demo.toml is a file, not a directory",
    ),
    "report --out in no directory": (
        ["report", "{conf}", "--out", "{root}/nowhere/report"],
        "nowhere does not exist",
    ),
    "conf missing": (["query", "{root}/missing.toml", "SELECT 1"], "file not found"),
    "conf a directory": (["materialize", "{root}"], "cannot be read: Is a directory"),
    "run conf a directory": (["run", "{root}"], "cannot be read: Is a directory"),
    "lake not written yet": (["materialize", "{unwritten}"], "pane log not found at"),
    "history of no lake": (["history", "{unwritten}", "--key", "d1,DE"], "no pane log at"),
    "changes of no view": (["changes", "{unwritten}", "--since", "0"], "current view not found"),
    "negative retention": (
        ["vacuum", "{conf}", "--retention-hours", "-5"],
        "argument --retention-hours: expected whole hours",
    ),
    "no shuffle partitions": (
        ["run", "{conf}", "--shuffle-partitions", "0"],
        "expected a whole number >= 1",
    ),
    "unknown option": (["query", "{conf}", "SELECT 1", "--bogus"], "unrecognized arguments"),
}


@pytest.mark.heavy
@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_and_exit_status_2(case, lake, capsys):
    conf, unwritten, root = lake
    argv, says = CASES[case]
    argv = [a.format(conf=conf, unwritten=unwritten, root=root) for a in argv]
    status, err = status_and_stderr(argv, capsys)
    assert status == 2, err
    assert err.startswith("panestore") and err.endswith("\n") and err.count("\n") == 1, err
    assert says in err


def test_test_hooks_work_but_are_not_on_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = capsys.readouterr().out
    assert "--kill-at" not in text and "--profile-dir" not in text
    assert "--no-materialize" in text
    args = build_parser().parse_args(
        ["run", "x.toml", "--kill-at", "before_commit:1", "--profile-dir", "prof"]
    )
    assert args.kill_at == [("before_commit", 1)] and args.profile_dir == "prof"
