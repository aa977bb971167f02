"""py4j's report of a command the JVM did not answer, in a process that started a session: not
printed (the error is raised to the caller all the same, and said by the command in one line);
a session whose JVM stops answering while it stops is ended all the same."""

from __future__ import annotations

import logging

import pytest

from jobs.startup.session import _quiet_lost_commands, _stop


def _py4j_reports_a_lost_command() -> None:
    try:
        raise ConnectionResetError(104, "Connection reset by peer")
    except ConnectionResetError:
        logging.exception("Exception while sending command.")  # py4j's own report


class _JvmGoneWhileStopping:
    """A session whose JVM resets the connection during ``stop``, reported as py4j reports it."""

    def stop(self) -> None:
        _py4j_reports_a_lost_command()
        logging.error("another error")
        raise ConnectionResetError(104, "Connection reset by peer")


@pytest.fixture
def root():
    """The root logger without the filters an earlier session of this process installed."""
    root = logging.getLogger()
    before = list(root.filters)
    root.filters[:] = []
    yield root
    root.filters[:] = before


def test_a_lost_command_is_not_reported_whenever_it_happens(root, caplog):
    _quiet_lost_commands()
    _quiet_lost_commands()  # once a process, however many sessions start
    assert len(root.filters) == 1
    with caplog.at_level(logging.INFO):
        _stop(_JvmGoneWhileStopping())  # handled: no exception
        _py4j_reports_a_lost_command()  # later: a Java object released as the JVM goes
    said = [r.getMessage() for r in caplog.records]
    assert "Exception while sending command." not in said
    assert said == ["another error"]  # only py4j's report of the lost command is dropped


def test_without_a_session_nothing_is_filtered(root, caplog):
    with caplog.at_level(logging.INFO):
        _py4j_reports_a_lost_command()
    assert [r.getMessage() for r in caplog.records] == ["Exception while sending command."]
