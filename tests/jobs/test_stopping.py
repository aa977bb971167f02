"""Stopping a run on a signal (``jobs.driver.stopping``, ``jobs.driver.runs._await_query``): the
handler only records; the polling loop stops the query between batches (at once on a second signal);
a batch that fails once a stop was asked for was abandoned, not a failure of the run. The query is a
stand-in: its batches are scripted, one per poll."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from jobs.driver.stopping import StopRequest, stop_on_signals


def test_signals_are_recorded_then_the_default_action_is_back():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with stop_on_signals() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)  # recorded: the process goes on
        assert stop.requested and not stop.abandon and stop.name == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt either
        assert stop.abandon and stop.received == [signal.SIGTERM, signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL  # a third one ends the process
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert {s: signal.getsignal(s) for s in before} == before


@dataclass
class ScriptedQuery:
    """A streaming query whose trigger is active during the polls listed in ``active``; a stop
    signal arrives at poll ``signal_at`` (and again at ``again_at``); ``fails`` is the error it
    ends with once stopped."""

    stop_request: StopRequest
    active: set[int]
    signal_at: int
    again_at: int | None = None
    fails: Exception | None = None
    polls: int = 0
    stopped_at: int | None = None
    recentProgress: list = field(default_factory=list)

    @property
    def isActive(self) -> bool:
        return self.stopped_at is None and self.polls < 100

    def awaitTermination(self, timeout: float) -> None:
        self.polls += 1
        if self.polls in (self.signal_at, self.again_at):
            self.stop_request.note(signal.SIGINT)

    @property
    def status(self) -> dict:
        return {"isTriggerActive": self.polls in self.active}

    def stop(self) -> None:
        self.stopped_at = self.polls

    def exception(self):
        return self.fails if self.stopped_at is not None else None


NO_BATCHES = SimpleNamespace(stats={})  # the sink: the scripted query reports no batch


@pytest.fixture
def stop(monkeypatch):
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # the stand-in's signals only
    return StopRequest()


def await_query(query) -> list[str]:
    from jobs.driver.runs import RunResult, _await_query

    said: list[str] = []
    _await_query(query, NO_BATCHES, RunResult(), said.append, None, stop=query.stop_request)
    return said


def test_a_stop_waits_for_the_batch_in_flight(stop):
    query = ScriptedQuery(stop, active={3, 4, 5}, signal_at=4)
    said = await_query(query)
    assert query.stopped_at == 6  # the first poll without a batch in flight
    assert said == [
        "SIGINT: stopping after the batch in flight (send it again to abandon that batch)"
    ]


def test_a_second_signal_abandons_the_batch_in_flight(stop):
    failed = RuntimeError("Job aborted: the query was stopped\n\tat org.apache...")
    query = ScriptedQuery(stop, active=set(range(3, 50)), signal_at=4, again_at=7, fails=failed)
    said = await_query(query)  # no raise: the run goes on to fold and exit 0
    assert query.stopped_at == 7
    assert said[-1] == (
        "SIGINT: the batch in flight was abandoned (Job aborted: the query was stopped); "
        "the next run replays it"
    )


def test_without_a_stop_a_failed_query_is_a_failed_run(stop):
    from jobs.driver.runs import RunResult, _await_query

    query = ScriptedQuery(stop, active=set(), signal_at=0, fails=RuntimeError("boom"))
    query.stopped_at = 1
    with pytest.raises(RuntimeError, match="the streaming query failed: boom"):
        _await_query(query, NO_BATCHES, RunResult(), lambda line: None, None, stop=None)
