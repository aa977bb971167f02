"""How Spark's Python processes start: the interpreter they run, what they import before a task
comes, and how the operator's workers collect garbage. Everything that shapes a Python process
of a panestore run, before any batch's code, is here.

Three costs of every run, paid before (or beside) a batch's Python code doing its work; the
measurements are in ``docs/decisions.md`` (how Spark's Python processes start):

* **The interpreter: Spark's ``pyspark.zip``.** Spark puts ``$SPARK_HOME/python/lib/pyspark.zip``
  (and py4j's zip) first on the path of every Python process it starts. Python keeps no compiled
  modules of a zip, so each process compiles the PySpark modules it imports from source: importing
  a worker's modules took 1.4 s from the zip, 0.4 s from the installed package (measured on
  Spark's stateful-operator worker). Spark starts such a process for each executor's worker
  daemon. For a local master (every process on this machine), :func:`worker_python`
  (``PYSPARK_PYTHON``, set by :func:`jobs.startup.session.prepare_environment`) is a launcher that
  puts the installed pyspark and py4j ahead of the zips, then runs this interpreter. It does so only
  when the zips are the installed packages' own (``pip install pyspark``: ``SPARK_HOME`` unset or
  that package), so the code run is the same. A cluster's master, another Spark, or a launcher that
  cannot be made (an unwritable cache directory, say) gives this interpreter itself: what Spark runs
  without panestore, only slower to start.
* **The daemon: a fresh worker's imports.** A worker imports pyarrow, pandas (which pyarrow imports
  at its first conversion of values) and the tasks' modules (~0.7 s). Spark starts one daemon per
  executor, ``python -m <spark.python.daemon.module>``, and forks a worker from it for each Python
  task that finds none idle; :func:`jobs.startup.session.local_conf` names this module
  (:data:`DAEMON_MODULE`). Run as the daemon, it imports :data:`PRELOADED` once, then runs PySpark's
  own daemon (its worker module, protocol and worker reuse, unchanged): a forked worker finds those
  modules imported and shares their memory with the daemon until it writes to it. Imported as a
  module (by the driver, for :func:`worker_python`), it imports nothing beyond the standard library
  and starts nothing.
* **Spark's archives on the workers' path.** Spark puts its zips and the jar of its core classes
  (5,000 entries, no Python) on its Python processes' path. Before each task, PySpark's worker
  calls ``importlib.invalidate_caches()``, which makes every zip importer read its archive's
  directory again: 50-150 ms per task (py-spy, every Python stage of every batch). An archive
  whose Python modules, if any, are all imported already from elsewhere (the installed packages
  the launcher put first) can provide nothing more (``import`` looks in ``sys.modules`` and a
  package's own ``__path__`` first): the daemon takes such archives off its path before it
  forks (:func:`drop_shadowed_archives`).
* **The garbage collector.** The operator's visit makes millions of small objects that hold no
  cycles; the operator's task collects garbage less often while it runs (:func:`gc_thresholds`,
  :data:`GC_THRESHOLDS`) and gives its worker back with the thresholds it had.
* **The first Python task of a session.** Before it runs, the JVM loads its Arrow runner and
  starts the daemon, which imports :data:`PRELOADED`: ~2 s on the critical path of a run's first
  batch. A run starts them once its query is built, while the query starts and plans its first
  batch (:func:`start_workers`: a one-task job in a thread of the driver); started during the
  build, they competed with it for the two cores.

The launcher lives in the cache directory (:func:`default_cache_dir`): ``$PANESTORE_CACHE_DIR``
when set, else ``$XDG_CACHE_HOME/panestore``, else ``~/.cache/panestore``. Its files are named by
a digest of this interpreter and the packages' paths; deleting the directory between runs is safe
(the next run makes them again).
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import os
import re
import shlex
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import SparkSession

CACHE_DIR_ENV = "PANESTORE_CACHE_DIR"
"""The environment variable that says where the launcher and the driver JVM's class-data archive
are kept (:func:`default_cache_dir`)."""
DAEMON_MODULE = "jobs.startup.python_processes"
"""What ``spark.python.daemon.module`` names: this module, run as Spark's worker daemon."""
GC_THRESHOLDS = (100_000, 50, 100)
"""The Python worker's garbage-collector thresholds while it runs the operator: a visit makes
millions of small objects that hold no cycles (elements, value dicts, window states), and
Python's default (a young collection every 700 allocations) spent about 40% of the operator's
time collecting them (measured: ``elements_by_key`` and the engine over 500,000 elements,
2.2 s -> 1.3 s)."""

# -- the interpreter Spark runs ----------------------------------------------------------------


def worker_python(master: str | None, cache_dir: Path | None = None) -> str:
    """The executable Spark should run for its Python processes (``PYSPARK_PYTHON``) on
    ``master``: for a local master, a launcher (:func:`launcher`) in ``cache_dir``, by default
    :func:`default_cache_dir`; else this interpreter. Any failure to make the launcher also gives
    this interpreter: the launcher is only faster."""
    if not (master or "").startswith("local"):
        return sys.executable
    try:
        made = launcher(cache_dir or default_cache_dir())
    except (OSError, subprocess.SubprocessError):
        return sys.executable
    return str(made) if made is not None else sys.executable


def installed_packages() -> dict[str, Path]:
    """The installed packages that may stand in for Spark's zips (name -> package directory):
    pyspark when ``SPARK_HOME`` is unset or is that package, py4j when its version is that of
    the py4j zip next to ``pyspark.zip``. Empty when the zip is absent or of another Spark."""
    import py4j.version
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    lib = home / "python" / "lib"
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home and Path(spark_home).resolve() != home:
        return {}  # Spark is another distribution: its zip may be another version
    if not (lib / "pyspark.zip").is_file():
        return {}
    found = {"pyspark": home}
    zips = [re.fullmatch(r"py4j-(.+)-src\.zip", p.name) for p in lib.glob("py4j-*-src.zip")]
    if [m.group(1) for m in zips if m] == [py4j.version.__version__]:
        found["py4j"] = Path(py4j.__file__).resolve().parent
    return found


def launcher(cache_dir: Path) -> Path | None:
    """An executable in ``cache_dir`` that runs this interpreter with the installed packages of
    :func:`installed_packages` first on ``PYTHONPATH`` (a directory of links to them, so nothing
    else of ``site-packages`` moves ahead of the user's path), arguments passed through; None
    when there is nothing to put first. Made once per interpreter and packages, atomically."""
    packages = installed_packages()
    if not packages:
        return None
    key = repr((sys.executable, sorted((k, str(v)) for k, v in packages.items())))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    script = cache_dir / f"spark-python-{digest}"
    if os.access(script, os.X_OK):
        return script
    links = cache_dir / f"spark-python-{digest}.path"
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = cache_dir / f".{links.name}.{os.getpid()}"
    staging.mkdir(exist_ok=True)
    for name, target in packages.items():
        if not (staging / name).is_symlink():
            (staging / name).symlink_to(target, target_is_directory=True)
    try:
        staging.rename(links)
    except OSError:  # made meanwhile by another run
        if not links.is_dir():
            raise
        for entry in staging.iterdir():
            entry.unlink()
        staging.rmdir()
    path, python = shlex.quote(str(links)), shlex.quote(sys.executable)
    text = (
        "#!/bin/sh\n"
        "# panestore: Spark's Python processes import the installed pyspark and py4j, not\n"
        "# Spark's zips of the same code (jobs/startup/python_processes.py).\n"
        f'PYTHONPATH={path}"${{PYTHONPATH:+:$PYTHONPATH}}" exec {python} "$@"\n'
    )
    tmp = cache_dir / f".{script.name}.{os.getpid()}"
    tmp.write_text(text)
    tmp.chmod(0o755)
    check = subprocess.run([str(tmp), "-c", "pass"], capture_output=True, timeout=60, check=False)
    if check.returncode != 0:
        tmp.unlink()
        return None
    os.replace(tmp, script)
    return script


def default_cache_dir() -> Path:
    """Where the launcher and the driver JVM's class-data archive (:mod:`jobs.startup.
    class_archive`) are kept, as an absolute path (Spark's processes start in other working
    directories): ``$PANESTORE_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/panestore``, else
    ``~/.cache/panestore``."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return (Path(base) / "panestore").absolute()


# -- the garbage collector of the operator's workers -------------------------------------------


@contextmanager
def gc_thresholds() -> Iterator[None]:
    """Within the block, collect garbage less often in this process (:data:`GC_THRESHOLDS`);
    the thresholds it had are back after it, however it ends. The operator's task runs in it:
    the worker that ran the task goes back to Spark's pool as it came, for the session's other
    Python tasks (a caller's own UDFs, under :mod:`jobs.api`)."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


# -- starting the workers while the query is built ---------------------------------------------


def start_workers(spark: SparkSession) -> threading.Thread | None:
    """Start ``spark``'s Python workers now, in a thread of the driver: a one-task job that runs
    a Python function over one row (the Arrow map runner of every panestore stage, so the stages
    find the daemon started and a worker idle); None when this Spark application started them
    already (a later run in the same session). Join the thread before the session may stop.
    Should the job fail, the thread ends: the first stage that needs the workers starts them
    itself, and reports what fails there.

    Measured (``docs/decisions.md``, "Python workers started once the query is built"): a
    small run's batch ~2.3 s shorter than without; started after the build rather than during
    it, the build 3.15 s -> 1.86 s and the batch unchanged (medians of 4)."""
    application = spark.sparkContext.applicationId
    if application in _STARTED:
        return None
    _STARTED.add(application)

    def run() -> None:
        try:
            spark.range(0, 1, 1, 1).mapInArrow(_pass_through, "id bigint").collect()
        except Exception:  # the stage that needs the workers reports it
            return

    thread = threading.Thread(target=run, name="panestore-start-workers", daemon=True)
    thread.start()
    return thread


_STARTED: set[str] = set()
"""The Spark applications whose workers :func:`start_workers` started."""


def _pass_through(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
    yield from batches


# -- the worker daemon -------------------------------------------------------------------------

PRELOADED = (
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pandas",
    "pyspark.sql.pandas.serializers",
    "jobs.executor.jsonl_decoder",
    "jobs.executor.operator",
    "jobs.executor.batch_output",
)
"""What panestore's tasks import: the decoder, the operator and the writer task, and pandas.
Every Python stage is Arrow in and out (``mapInArrow``, the Python data sources), but pyarrow
imports pandas at its first conversion of Python or NumPy values (``pa.array``, ``pa.scalar``),
which every task makes: imported by each worker, it took ~0.5 s of CPU and ~34 MiB of its own
there; imported once here, the forked workers share it."""


def preload(modules: tuple[str, ...] = PRELOADED) -> None:
    """Import ``modules``. One that fails is left to the task that needs it, which then reports
    the error where it belongs."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the task that imports it raises it again, where it belongs
            continue


def drop_shadowed_archives() -> list[str]:
    """Take off ``sys.path`` (and its importer cache) each zip or jar that can provide no module
    this process will import: its Python modules and packages, if any, are all imported
    already, from outside it (Spark's jar of classes holds none). Gives the paths taken off."""
    dropped = []
    for entry in list(sys.path):
        if not entry.endswith((".zip", ".jar")) or not os.path.isfile(entry):
            continue
        try:
            with zipfile.ZipFile(entry) as archive:
                names = archive.namelist()
        except (OSError, zipfile.BadZipFile):
            continue
        python = [n for n in names if n.endswith((".py", ".pyc"))]
        tops = {re.sub(r"\.pyc?$", "", n.split("/")[0]) for n in python}
        if all(_imported_outside(name, entry) for name in tops):
            sys.path.remove(entry)
            for key in [k for k in sys.path_importer_cache if k.startswith(entry)]:
                del sys.path_importer_cache[key]
            dropped.append(entry)
    return dropped


def _imported_outside(name: str, archive: str) -> bool:
    module = sys.modules.get(name)
    where = getattr(module, "__file__", None)
    return where is not None and not os.path.abspath(where).startswith(archive + os.sep)


def run_daemon() -> None:
    """Be Spark's Python worker daemon: import :data:`PRELOADED`, take the archives that can
    provide no module off the path, then run PySpark's daemon, which forks the workers and exits
    the process when Spark closes its standard input."""
    preload()
    from pyspark import daemon

    drop_shadowed_archives()

    daemon.manager()


if __name__ == "__main__":  # Spark runs ``python -m`` this module (spark.python.daemon.module)
    run_daemon()
