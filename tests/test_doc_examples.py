"""Every Python example of README.md and docs/*.md runs as printed (the ones that need a
SparkSession: tests/spark/test_doc_examples.py, which also runs the API's docstrings)."""

from __future__ import annotations

import pytest

from tests.doc_examples import plain_blocks, python_blocks


def test_the_documents_python_blocks_are_found_and_compile():
    blocks = python_blocks()
    where = {b.path for b in blocks}
    assert {"README.md", "docs/sources.md"} <= where, where
    for b in blocks:
        compile(b.code, b.id, "exec")


def test_every_python_block_runs_as_printed_or_says_why_not():
    for b in python_blocks():
        if b.not_run is not None:
            assert b.not_run, f"{b.id}: say why it is not run (<!-- not run: why -->)"
            continue
        missing = b.free_names() - {"spark"}
        assert not missing, (
            f"{b.id} ({b.heading}) uses {sorted(missing)}, which it does not define: make it run "
            "as printed (a SparkSession named spark is given), or mark it <!-- not run: why -->"
        )


@pytest.mark.parametrize("block", plain_blocks(), ids=lambda b: b.id)
def test_a_block_without_spark_runs(block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # whatever it writes, it writes here
    exec(compile(block.code, block.id, "exec"), {"__name__": "__example__"})
