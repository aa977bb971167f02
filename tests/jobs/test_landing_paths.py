"""jobs.reading.files.paths: which landing files are input, named literally to Spark and DuckDB.

Folder names may hold glob characters (``land[1]``, ``*``, ``?``, ``{a,b}``) and files may sit in
subfolders (date folders, one folder per writer): ``panestore verify`` must read exactly the
files the job reads. (The job's side: tests/spark/test_landing_files.py.)
"""

from __future__ import annotations

import json

import pytest

from jobs.inspection.source_elements import landing_files
from jobs.reading.files.paths import hadoop_literal
from tests.pipelines import small_pipeline
from tests.spark.support import put

# (relative path, input?) by Spark's listing rule, which landing_files mirrors
TREE = [
    ("top.jsonl", True),
    ("gw-1/views-0007.jsonl", True),
    ("2024/06/01/views.jsonl", True),
    ("odd[1]*?/{a,b} #%.jsonl", True),
    ("_year=2024/v.jsonl", True),  # a `_` name holding `=` is a partition folder to Spark
    ("_metadata/v.jsonl", True),  # Spark lists inside `_metadata...` folders
    ("_watermarks/gw-1/000000000000.json", False),
    ("gw-1/.views-0008.jsonl.tmp", False),
    ("gw-1/_views-0009.jsonl", False),
    ("2024/.staging/views.jsonl", False),
    ("2024/_tmp/views.jsonl", False),
    ("copy.jsonl._COPYING_", False),
    ("_common_metadata", False),  # a Parquet summary file is not data
]


def test_input_files_are_every_file_below_the_landing_directory_but_hidden_names(tmp_path):
    for name, _ in TREE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    assert landing_files(str(tmp_path)) == sorted(str(tmp_path / n) for n, keep in TREE if keep)


def test_hadoop_glob_characters_are_escaped():
    assert hadoop_literal("/d/a[1]{x,y}*?\\b #%:c") == "/d/a\\[1\\]\\{x,y\\}\\*\\?\\\\b #%:c"


def _pipeline(tmp_path, landing):
    return small_pipeline("globs", tmp_path / "lake", landing)


@pytest.mark.parametrize("name", ["land[1]", "land*", "land?", "land{1,2} #%20"])
def test_verify_reads_each_landing_file_by_its_name_not_as_a_pattern(tmp_path, name):
    """``land[1]`` as a pattern matches the sibling ``land1``, ``v[1].jsonl`` the file ``v1.jsonl``
    next to it: each file is read once, from the landing directory named."""
    from jobs.inspection.source_elements import load_source_elements

    for folder, tag in ((name, "own"), ("land1", "sibling"), ("landx", "sibling")):
        for file in ("v[1].jsonl", "v1.jsonl"):
            record = {"ts": "2024-06-01T09:00:00Z", "k": f"{tag} {file}"}
            put(tmp_path / folder / "gw-1", file, [json.dumps(record)])
    elements = load_source_elements(_pipeline(tmp_path, tmp_path / name))
    assert sorted(elements.column("k").to_pylist()) == ["own v1.jsonl", "own v[1].jsonl"]


def test_check_refuses_a_landing_path_spark_cannot_read(tmp_path, capsys):
    from jobs.cli.commands import main

    conf = tmp_path / "p.toml"
    body = (
        "name = 'p'\nlake = '{lake}'\nkeys = ['k']\nevent_time = 'ts'\n"
        "window = 'FixedWindows(1h)'\n[aggregates]\nn = 'count()'\n[source]\n"
        "path = '{landing}'\nschema = {{ k = 'string', ts = 'timestamp' }}\n"
    )
    cases = [("in [1] #%20 {a,b}*?", 0), ("in:1", 0), ("in\\1", 0), ("in:[1]", 2), ("in\\[1]", 2)]
    for landing, status in cases:
        (tmp_path / landing).mkdir()
        conf.write_text(body.format(lake=tmp_path / "lake", landing=tmp_path / landing))
        assert main(["check", str(conf)]) == status, landing
        out = capsys.readouterr()
        if status == 2:
            assert out.err.count("\n") == 1 and "source.path" in out.err, out.err
            assert "holds ':' and [ ]" in out.err or "holds '\\\\' and [" in out.err
