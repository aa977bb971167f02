"""The pure parts of ``benchmarks/long_run.py``: which runs are made as a whole process, the
blocks, the figures of a block and the verdict on them (no Spark)."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys

import pytest

from benchmarks import long_run
from benchmarks.long_run import (
    Block,
    RunTime,
    Usage,
    block_ranges,
    dir_usage,
    ratios,
    tree_cpu,
    whole_process_runs,
)


def test_the_modules_examples_run_as_printed():
    result = doctest.testmod(long_run, report=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("runs", "every"), [(500, 50), (200, 50), (20, 5), (12, 5), (7, 50)])
def test_the_blocks_cover_every_run_once_in_order(runs, every):
    numbers = [n for block in block_ranges(runs, every) for n in block]
    assert numbers == list(range(1, runs + 1))


@pytest.mark.parametrize(("runs", "every", "samples"), [(500, 50, 2), (200, 50, 2), (20, 5, 1)])
def test_every_block_ends_with_its_whole_process_samples_and_run_1_is_never_one(
    runs, every, samples
):
    whole = whole_process_runs(runs, every, samples)
    assert 1 not in whole
    assert set(range(2, samples + 2)) <= whole  # the early runs
    for block in block_ranges(runs, every):
        assert set(block[-samples:]) <= whole
        assert any(n not in whole for n in block)  # in-process runs in every block


def test_a_blocks_in_process_median_leaves_out_run_1_and_the_whole_process_runs():
    runs = [
        RunTime(1, False, 100.0, 90.0),  # the lake's creation
        RunTime(2, True, 30.0, 50.0),
        RunTime(3, False, 2.0, 3.0),
        RunTime(4, False, 4.0, 5.0),
        RunTime(5, True, 40.0, 60.0),
    ]
    block = Block(1, 5, runs, {}, Usage(0, 0), Usage(0, 0), 0.0)
    assert (block.in_process(), block.in_process(cpu=True)) == (3.0, 4.0)
    assert block.whole_process() == [30.0, 40.0]
    assert block.whole_process(cpu=True) == [50.0, 60.0]


def test_the_verdict_compares_the_last_block_with_the_first():
    def block(first: int, in_process: float, whole: float, requests: int) -> Block:
        runs = [  # CPU seconds: twice the wall time; the server's: a tenth of the requests
            RunTime(first + 1, False, in_process, 2 * in_process, {"GET": requests}, requests / 10),
            RunTime(first + 2, True, whole, 2 * whole, {"GET": requests}),
        ]
        return Block(first, first + 2, runs, {}, Usage(0, 0), Usage(0, 0), 0.0)

    lines = ratios([block(1, 2.0, 20.0, 100), block(4, 2.2, 30.0, 130)], bucket=True)
    assert len(lines) == 6
    assert lines[0].startswith("in process, s:") and "1.10x: within 1.2x" in lines[0]
    assert lines[1].startswith("in process, CPU s:") and "1.10x: within 1.2x" in lines[1]
    assert lines[2].startswith("whole process, s:") and "1.50x: NOT within 1.2x" in lines[2]
    assert lines[3].startswith("whole process, CPU s:") and "1.50x: NOT" in lines[3]
    assert lines[4].startswith("requests per run:") and "1.30x: NOT within 1.2x" in lines[4]
    assert lines[5].startswith("S3 server CPU s per in-process run: first block median 10.00")
    assert "1.30x: NOT within 1.2x" in lines[5]


def test_the_cpu_time_of_this_process_tree_counts_a_waited_childs_work():
    before = tree_cpu(os.getpid())
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(6_000_000))"], check=True)
    assert tree_cpu(os.getpid()) - before >= 0.1


def test_the_checkpoints_usage_leaves_its_state_directory_out(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_bytes(b"x" * 10)
    (tmp_path / "state" / "0").mkdir(parents=True)
    (tmp_path / "state" / "0" / "1.parquet").write_bytes(b"y" * 100)
    assert dir_usage(tmp_path, skip="state") == Usage(1, 10)
    assert dir_usage(tmp_path / "state") == Usage(1, 100)
    assert dir_usage(tmp_path / "missing") == Usage(0, 0)
