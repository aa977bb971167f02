"""How Spark's Python processes start: the interpreter they run, and what they import before a
task comes.

Two fixed costs of every run, paid before a batch's Python code does any work (measured on a
scheduled run of 1,000 events, ``docs/decisions.md``):

* **Spark's ``pyspark.zip``.** Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's
  zip) first on the path of every Python process it starts. Python cannot cache compiled modules
  of a zip, so each process compiles the PySpark modules it imports from source: importing the
  transformWithState driver worker takes 1.4 s from the zip, 0.36 s from the installed package.
  Spark starts such a process on the driver to plan every query's first batch, and each
  executor's worker daemon. For a local master (every process on this machine),
  :func:`worker_python` gives Spark a launcher that puts the installed pyspark and py4j ahead of
  the zips, then runs this interpreter. It does so only when the zips are the installed
  packages' own (``pip install pyspark``: ``SPARK_HOME`` is the package), so the code is the same.
* **Imports of a fresh worker.** A worker imports pandas, pyarrow and the job's modules (0.7 s):
  the daemon :mod:`jobs.python_daemon` imports :data:`PRELOADED` once, before it forks workers.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

PRELOADED = (
    "pandas",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pyspark.sql.pandas.serializers",
    "jobs.jsonl_decoder",
    "jobs.operator",
    "jobs.batch_output",
)
"""What panestore's tasks import: the decoder, the operator and the writer task."""


def preload(modules: tuple[str, ...] = PRELOADED) -> None:
    """Import ``modules``. One that fails is left to the task that needs it, which then reports
    the error where it belongs."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the task that imports it raises it again, where it belongs
            continue


# -- the interpreter Spark runs ----------------------------------------------------------------


def worker_python(master: str | None, cache_dir: Path | None = None) -> str:
    """The executable Spark should run for its Python processes (``PYSPARK_PYTHON``) on
    ``master``: a launcher (:func:`launcher`) for a local master, else this interpreter. Any
    failure to make the launcher also gives this interpreter: it is only faster."""
    if not (master or "").startswith("local"):
        return sys.executable
    try:
        made = launcher(cache_dir or _cache_dir())
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
        "# Spark's zips of the same code (jobs/python_workers.py).\n"
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


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "panestore"
