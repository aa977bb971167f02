"""Ending a run's Spark session whose JVM stops answering: handled, and said by no traceback."""

from __future__ import annotations

import logging

from jobs.startup.session import _stop


class _JvmGoneWhileStopping:
    """A session whose JVM resets the connection during ``stop``, reported as py4j reports it."""

    def stop(self) -> None:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            logging.exception("Exception while sending command.")  # py4j's own report
            logging.error("another error")
            raise


def test_a_jvm_gone_while_the_session_stops_prints_no_py4j_traceback(caplog):
    with caplog.at_level(logging.INFO):
        _stop(_JvmGoneWhileStopping())  # handled: no exception
    said = [r.getMessage() for r in caplog.records]
    assert "Exception while sending command." not in said
    assert "another error" in said  # only py4j's report of the lost command is dropped
    assert logging.getLogger().filters == []  # the filter lives only while the session ends
