"""Lake locks on an object store (a real S3 server process on the loopback address): exactly one
holder among contenders, a refusal naming the holder, a lease its holder keeps renewing, and a
dead holder's lock taken over at once on its machine, once its lease expired elsewhere."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from sinks.lake import lock as lake_lock
from sinks.lake.errors import LakeBusy, MaterializerBusy
from sinks.lake.lock import LakeLock
from tests.lock_holder import lock_held

CONTENDERS, ROUNDS = 4, 15


def _contend(lake: str, barrier, wins, overlaps) -> None:
    """Each round: all contenders take the lock at once; a winner marks the lake as its own
    with a create-if-absent, which fails if another holder's mark is still there."""
    import obstore as obs
    from obstore.exceptions import AlreadyExistsError

    from sinks.lake.object_store import store_at

    store = store_at(lake)
    for _ in range(ROUNDS):
        barrier.wait()
        try:
            with LakeLock(lake, "run", "another run"):
                with wins.get_lock():
                    wins.value += 1
                try:
                    obs.put(store, "holder-mark", b"", mode="create")
                except AlreadyExistsError:
                    with overlaps.get_lock():
                        overlaps.value += 1
                    continue
                obs.delete(store, "holder-mark")
        except LakeBusy:
            pass


def test_contenders_in_a_bucket_never_hold_the_lock_together(bucket_lake):
    contend(bucket_lake)


def contend(lake: str) -> None:
    """:data:`CONTENDERS` processes take and release the lake's lock :data:`ROUNDS` times each,
    at once: never two hold it together, and it is taken (not refused to all)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(CONTENDERS)
    wins, overlaps = ctx.Value("i", 0), ctx.Value("i", 0)
    procs = [
        ctx.Process(target=_contend, args=(lake, barrier, wins, overlaps))
        for _ in range(CONTENDERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert overlaps.value == 0
    assert wins.value >= ROUNDS // 2  # the lock is taken, not refused to all


def test_a_second_holder_is_refused_naming_the_first_and_writes_nothing(bucket_lake):
    with lock_held(bucket_lake, "materializer") as pid:
        busy = LakeLock(bucket_lake, "materializer", "another materializer", MaterializerBusy)
        with pytest.raises(MaterializerBusy) as e, busy:
            pytest.fail("held twice")
        assert f"pid {pid}" in str(e.value) and "another materializer" in str(e.value)
    # other names are other locks
    with LakeLock(bucket_lake, "run", "another run") as held:
        assert held.held


def test_the_holder_keeps_its_lease_by_renewing_it(bucket_lake, monkeypatch):
    monkeypatch.setattr(lake_lock, "CLOCK_SLACK_S", 0.0)
    # a lease of 2 s: an object's Last-Modified has whole seconds, renewals come every 0.2 s
    with LakeLock(bucket_lake, "run", "another run", lease_s=2.0, renew_s=0.2) as mine:
        time.sleep(5.0)  # 2.5 leases
        with pytest.raises(LakeBusy), LakeLock(bucket_lake, "run", "another run", lease_s=2.0):
            pytest.fail("a renewed lease was taken over")
        assert mine.held and not mine.lost
    with LakeLock(bucket_lake, "run", "another run"):  # released: free at once
        pass


def test_a_killed_holders_lock_is_taken_over_at_once_on_its_machine(bucket_lake):
    contender = LakeLock(bucket_lake, "run", "another run")
    with lock_held(bucket_lake, "run"), pytest.raises(LakeBusy), contender:
        pytest.fail("held twice")
    # the holder was SIGKILLed: its process is gone from this machine, its lease still runs
    with LakeLock(bucket_lake, "run", "another run") as taken:
        assert taken.held


def test_a_holder_of_another_machine_is_waited_for_until_its_lease_expired(
    bucket_lake, monkeypatch
):
    """A lock whose holder this machine cannot see (another machine's process table) is taken
    over only once its lease expired."""
    monkeypatch.setattr(lake_lock, "CLOCK_SLACK_S", 0.0)
    with lock_held(bucket_lake, "run"):
        pass  # SIGKILLed: its lock stays, naming a process of this machine
    import obstore as obs

    from sinks.lake.object_store import store_at

    store, key = store_at(bucket_lake), "_locks/run.lock"
    named = json.loads(bytes(obs.get(store, key).bytes()))
    obs.put(store, key, json.dumps({**named, "processes": "another machine"}).encode())
    patient = LakeLock(bucket_lake, "run", "another run", lease_s=30.0)
    with pytest.raises(LakeBusy, match=f"pid {named['pid']}"), patient:
        pytest.fail("taken before the lease expired")
    time.sleep(2.5)
    with LakeLock(bucket_lake, "run", "another run", lease_s=2.0) as taken:
        assert taken.held


def test_a_holder_whose_lease_was_taken_over_knows_it_lost_the_lock(bucket_lake, monkeypatch):
    monkeypatch.setattr(lake_lock, "CLOCK_SLACK_S", 0.0)
    slow = LakeLock(bucket_lake, "run", "another run", lease_s=0.5, renew_s=3.0)
    with slow:
        time.sleep(1.0)  # its lease ran out before it renewed (a paused process)
        with LakeLock(bucket_lake, "run", "another run", lease_s=0.5):
            time.sleep(2.5)  # the slow holder tries to renew: refused
            assert slow.lost and not slow.held


def test_who_holds_a_lock_in_a_bucket_is_told_without_taking_it(bucket_lake):
    """What ``panestore status`` says of a lake in a bucket: held while a live holder renews
    its lease; free once the lock is released, or its holder died on this machine."""
    assert lake_lock.holder_in_store(bucket_lake, "run")[0] is False  # never taken
    with LakeLock(bucket_lake, "run", "another run"):
        held, holder = lake_lock.holder_in_store(bucket_lake, "run")
        assert held and "pid" in holder.describe()
    assert lake_lock.holder_in_store(bucket_lake, "run")[0] is False  # released
    with lock_held(bucket_lake, "run") as pid:
        held, holder = lake_lock.holder_in_store(bucket_lake, "run")
        assert held and holder.pid == pid
    # SIGKILLed: its lock object stays, its process is gone from this machine
    held, holder = lake_lock.holder_in_store(bucket_lake, "run")
    assert not held and holder.pid == pid
