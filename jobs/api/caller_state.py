"""What the Python API leaves of its caller: the session and the process as they were.

:mod:`jobs.api` runs in the caller's own Python process, over the caller's own SparkSession: the
events' session, ``spark=``, or, given neither, the session PySpark's builder reuses
(:func:`jobs.startup.session.existing_session`). A run changes settings of theirs that it needs
while it runs:

* the session's configuration: Spark's ``availableNow`` wrapper of a scheduled run
  (:data:`jobs.driver.runs.AVAILABLE_NOW_WRAPPER`); given no session, every setting of
  :func:`jobs.startup.session.local_conf` that the builder applies to the session it reuses
  (shuffle partitions, the session time zone, ...) and the application's name;
* log4j's levels: the loggers a run quiets (:func:`jobs.startup.session.quiet_loggers`); given
  no session, the root's too (``setLogLevel("WARN")``);
* the process's environment: the AWS shared files' credentials
  (:func:`jobs.startup.aws_profile.adopt_shared_profile`), and, given no session, the variables
  Spark is started with (:func:`jobs.startup.session.prepare_environment`).

:func:`as_found` records them as an API call starts and puts them back as it ends, however it
ends (returned, raised, interrupted). The Python workers' garbage-collector thresholds need no
record: they are the operator's task's own (:func:`jobs.startup.python_processes.gc_thresholds`).

What stays: the Python data sources a run registers in the session (``panestore_pane_log``,
``panestore_delta_table``: PySpark cannot unregister one), and a session the call started itself
(there was none), with panestore's settings; the environment is restored all the same (the
session's JVM and its workers keep the one they started with).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


@contextmanager
def as_found(session: SparkSession | None) -> Iterator[None]:
    """Within the block, change what a run needs; after it, the process's environment and
    ``session``'s configuration and log levels are as they were when it began (the module doc).
    A failure to restore the session (a session stopped meanwhile, a lost JVM) does not hide
    the block's own exception."""
    environ = dict(os.environ)
    settings = None if session is None else SessionSettings.of(session)
    try:
        yield
    except BaseException as e:
        _restore_environment(environ)
        if settings is not None:
            try:
                settings.restore()
            except Exception as failed:  # the block's own exception is what the caller needs
                if hasattr(e, "add_note"):  # Python 3.11+
                    e.add_note(f"the session's settings could not be restored: {failed}")
        raise
    _restore_environment(environ)
    if settings is not None:
        settings.restore()


def _restore_environment(environ: dict[str, str]) -> None:
    for name in [n for n in os.environ if n not in environ]:
        del os.environ[name]
    for name, value in environ.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


@dataclass
class SessionSettings:
    """A session's runtime configuration (every key set in it) and log4j's configured loggers
    in its driver JVM (name -> level; the root is ``""``; None: none to read), as recorded."""

    session: SparkSession
    conf: dict[str, str]
    loggers: dict[str, str] | None

    @classmethod
    def of(cls, session: SparkSession) -> SessionSettings:
        return cls(session, dict(session.conf.getAll), _logger_levels(session))

    def restore(self) -> None:
        """Set back what changed since: a key set since is unset, a value changed is set back;
        a logger configured since loses its configuration (its level is its parent's again), a
        level changed is set back."""
        if not self.session.sparkContext._jsc:  # stopped meanwhile: nothing left to restore
            return
        _restore_conf(self.session, self.conf)
        if self.loggers is not None:
            _restore_logger_levels(self.session, self.loggers)


def _restore_conf(session: SparkSession, saved: dict[str, str]) -> None:
    now = dict(session.conf.getAll)
    # The session's own configuration object: PySpark's builder sets Spark's core settings in it
    # too (spark.app.name, spark.python.worker.reuse, ...), which spark.conf refuses to set back.
    conf = session._jsparkSession.sessionState().conf()
    for key in now.keys() - saved.keys():
        conf.unsetConf(key)
    for key, value in saved.items():
        if now.get(key) != value:
            conf.setConfString(key, value)


def _log4j(session: SparkSession) -> Any:
    """log4j in the driver JVM (what :func:`jobs.startup.session.quiet_loggers` and Spark's
    ``setLogLevel`` change)."""
    jvm: Any = session.sparkContext._jvm
    return jvm.org.apache.logging.log4j


def _log4j_context(session: SparkSession) -> Any:
    return _log4j(session).LogManager.getContext(False)


def _logger_levels(session: SparkSession) -> dict[str, str] | None:
    try:
        loggers = _log4j_context(session).getConfiguration().getLoggers()
        return {str(name): str(loggers[name].getLevel()) for name in loggers}
    except Exception:  # pragma: no cover - no log4j to read: quiet_loggers changes none either
        return None


def _restore_logger_levels(session: SparkSession, saved: dict[str, str]) -> None:
    context = _log4j_context(session)
    configuration = context.getConfiguration()
    loggers = configuration.getLoggers()
    level = _log4j(session).Level
    for name in [str(n) for n in loggers if str(n) not in saved]:
        configuration.removeLogger(name)
    # the root first: a logger without a level of its own reads its parent's
    names = sorted(n for n in saved if n in loggers)
    for name in names:
        logger = loggers[name]
        if str(logger.getLevel()) != saved[name]:
            logger.setLevel(level.toLevel(saved[name]))
    context.updateLoggers()
