"""Lake locks: exactly one holder at a time, whoever contends; a dead holder's lock is free."""

from __future__ import annotations

import multiprocessing
import os
import random

import pytest

from sinks.lake.errors import LakeBusy
from sinks.lake.lock import LakeLock
from tests.lock_holder import lock_held

CONTENDERS, ROUNDS = 8, 150


def _contend(lake: str, barrier, rounds: int, wins, overlaps) -> None:
    """Each round: all contenders take the lock at once; a winner marks the lake as its own
    with an exclusive create, which fails if another holder's mark is still there."""
    mark = os.path.join(lake, "holder-mark")
    for _ in range(rounds):
        barrier.wait()
        try:
            with LakeLock(lake, "run", "another run"):
                with wins.get_lock():
                    wins.value += 1
                try:
                    fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    with overlaps.get_lock():
                        overlaps.value += 1
                    continue
                os.close(fd)
                os.unlink(mark)
        except LakeBusy:
            pass


@pytest.mark.heavy
def test_contenders_taking_the_lock_at_the_same_moment_never_hold_it_together(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(CONTENDERS)
    wins, overlaps = ctx.Value("i", 0), ctx.Value("i", 0)
    procs = [
        ctx.Process(target=_contend, args=(str(tmp_path), barrier, ROUNDS, wins, overlaps))
        for _ in range(CONTENDERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    assert overlaps.value == 0
    assert ROUNDS <= wins.value < ROUNDS * CONTENDERS  # every round had a holder, and refusals


def test_a_held_lock_is_refused_naming_its_holder_and_a_killed_holders_lock_is_taken(tmp_path):
    lake = tmp_path / "lake"
    with lock_held(lake, "run") as pid, pytest.raises(LakeBusy, match=rf"\(pid {pid} on "):
        LakeLock(str(lake), "run", "another run").__enter__()
    # the holder was SIGKILLed: its name is still in the file, its lock is not
    with LakeLock(str(lake), "run", "another run") as lock:
        assert lock.holder().pid == os.getpid()
    assert lock.holder().pid is None  # released: the file names nobody


def test_a_concurrent_materializer_is_refused(tmp_path):
    pytest.importorskip("deltalake")
    from sinks.fold.materializer import Materializer
    from sinks.lake.errors import MaterializerBusy
    from tests.sinks.lakes import chunked, random_run, view_dict, write_batches

    run = random_run(3, str(tmp_path))
    write_batches(run, chunked(run, random.Random(3)))
    busy = pytest.raises(MaterializerBusy, match="another materializer")
    with lock_held(run.spec.lake, "materializer"), busy:
        Materializer(run.spec).run()
    Materializer(run.spec).run()
    assert view_dict(run.spec) == run.expected()
