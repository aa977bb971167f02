"""How Spark's Python processes start (jobs.startup.python_processes), without Spark: the launcher a
local master runs imports the installed PySpark ahead of Spark's zip and is otherwise this
interpreter; anything else, or a launcher that cannot be made, runs this interpreter; the module run
as Spark's daemon preloads the tasks' modules, imported it starts and preloads nothing."""

from __future__ import annotations

import gc
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from jobs.startup.python_processes import (  # noqa: E402
    CACHE_DIR_ENV,
    DAEMON_MODULE,
    GC_THRESHOLDS,
    default_cache_dir,
    gc_thresholds,
    installed_packages,
    launcher,
    preload,
    worker_python,
)
from jobs.startup.session import PROJECT_ROOT, local_conf  # noqa: E402

SPARK_LIB = Path(pyspark.__file__).resolve().parent / "python" / "lib"
if not (SPARK_LIB / "pyspark.zip").is_file():  # pragma: no cover - a PySpark without its zip
    pytest.skip("this PySpark ships no pyspark.zip", allow_module_level=True)
SPARK_PATH = os.pathsep.join(str(p) for p in sorted(SPARK_LIB.glob("*.zip")))
"""What Spark puts first on its Python processes' path."""


def spark_like(exe: str, code: str, extra_path: str = "") -> subprocess.CompletedProcess:
    """Run ``code`` with ``exe`` as Spark runs a Python process: its zips first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SPARK_PATH, extra_path) if p)}
    return subprocess.run(
        [exe, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.heavy
def test_a_local_master_runs_the_installed_pyspark_not_the_zip(tmp_path: Path) -> None:
    exe = worker_python("local[2]", cache_dir=tmp_path)
    assert exe != sys.executable and Path(exe).parent == tmp_path
    code = "import pyspark, py4j, sys; print(pyspark.__file__); print(sys.executable)"
    before = spark_like(sys.executable, code)
    assert ".zip" in before.stdout.splitlines()[0]  # what Spark's processes import otherwise
    after = spark_like(exe, code, extra_path="/somewhere/of/the/user")
    assert after.returncode == 0, after.stderr
    where, python = after.stdout.splitlines()
    assert ".zip" not in where
    assert Path(where).resolve() == Path(pyspark.__file__).resolve()  # the very same package
    assert python == sys.executable
    path = spark_like(exe, "import sys; print(sys.path)", "/somewhere/of/the/user").stdout
    assert "/somewhere/of/the/user" in path and "pyspark.zip" in path  # nothing dropped


def test_the_launcher_passes_arguments_and_exit_status(tmp_path: Path) -> None:
    exe = worker_python("local-cluster[2,1,1024]", cache_dir=tmp_path)
    done = spark_like(exe, "import sys; print(sys.argv[1:]); sys.exit(3)")
    assert done.returncode == 3
    args = subprocess.run(
        [exe, "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME", ""],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert args.strip() == repr(["a b", "$HOME", ""])


@pytest.mark.heavy
def test_the_launcher_is_made_once_and_survives_a_concurrent_maker(tmp_path: Path) -> None:
    first = launcher(tmp_path)
    assert first is not None
    assert launcher(tmp_path) == first
    first.unlink()  # another run made the packages' links, but not yet the script
    again = launcher(tmp_path)
    assert again == first and os.access(again, os.X_OK)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    assert spark_like(str(again), "import pyspark").returncode == 0


def test_other_masters_and_other_sparks_run_this_interpreter(tmp_path, monkeypatch) -> None:
    assert worker_python("spark://master:7077", cache_dir=tmp_path) == sys.executable
    assert worker_python("yarn", cache_dir=tmp_path) == sys.executable
    assert worker_python(None, cache_dir=tmp_path) == sys.executable  # spark-submit's choice
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "another-spark"))
    assert installed_packages() == {}
    assert worker_python("local[2]", cache_dir=tmp_path / "c") == sys.executable
    assert not (tmp_path / "c").exists()


def test_the_cache_dir_is_the_environments_choice(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == Path.home() / ".cache" / "panestore"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "panestore"
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "mine"))
    exe = worker_python("local[2]")
    assert Path(exe).parent == tmp_path / "mine"  # the override wins over XDG_CACHE_HOME
    assert not (tmp_path / "xdg").exists()
    assert spark_like(exe, "import pyspark").returncode == 0
    monkeypatch.chdir(tmp_path)  # Spark's executors start in other directories
    monkeypatch.setenv(CACHE_DIR_ENV, "relative")
    assert default_cache_dir() == tmp_path / "relative"


@pytest.mark.heavy
def test_a_launcher_that_cannot_be_made_falls_back(tmp_path, monkeypatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert worker_python("local[2]", cache_dir=blocked / "cache") == sys.executable
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocked / "cache"))  # e.g. a read-only home
    exe = worker_python("local[2]")
    assert exe == sys.executable
    done = spark_like(exe, "import pyspark, pyspark.daemon; print(pyspark.__file__)")
    assert done.returncode == 0, done.stderr  # Spark's processes still start: from the zip
    assert ".zip" in done.stdout


def test_importing_the_module_starts_and_preloads_nothing() -> None:
    code = (
        "import sys, jobs.startup.python_processes, jobs.startup.session\n"
        "eager = ('pandas', 'pyarrow', 'pyspark', 'pyspark.daemon', 'jobs.executor.operator')\n"
        "print(sorted(m for m in eager if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.heavy
def test_run_as_a_module_it_is_sparks_daemon_with_the_tasks_modules_imported() -> None:
    assert local_conf()["spark.python.daemon.module"] == DAEMON_MODULE
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(PROJECT_ROOT), SPARK_PATH))}
    # ``python -m`` the module, as Spark does, noting what it has imported when it imports
    # PySpark's daemon (which then forks the workers).
    as_spark_runs_it = (
        "import runpy, sys\n"
        "def note(event, args):\n"
        "    if event == 'import' and args[0] == 'pyspark.daemon':\n"
        "        print('before the daemon:', *sorted(sys.modules), file=sys.stderr)\n"
        "sys.addaudithook(note)\n"
        f"runpy.run_module({DAEMON_MODULE!r}, run_name='__main__', alter_sys=True)\n"
    )
    # PySpark's daemon (in a process group of its own) writes its port, then exits when its
    # standard input closes (with status 1, whatever the reason).
    done = subprocess.run(
        [sys.executable, "-c", as_spark_runs_it],
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode()[-2000:]
    (port,) = struct.unpack("!i", done.stdout)
    assert 0 < port < 65536
    (noted,) = [line for line in done.stderr.decode().splitlines() if "before the daemon:" in line]
    imported = set(noted.split())
    assert {"pyarrow", "pandas", "jobs.executor.operator", "jobs.executor.batch_output"} <= imported


TASK = """
import pickle, sys
from jobs.startup.python_processes import preload
preload()
before = set(sys.modules)
config = pickle.loads(open(sys.argv[1], "rb").read())  # as a worker unpickles its task
config.engine_factory()
import pyarrow as pa
pa.array([1, 2])  # pyarrow's first conversion of values imports pandas
print(*sorted(set(sys.modules) - before))
"""


def test_a_task_finds_what_it_imports_preloaded_by_the_daemon(tmp_path: Path) -> None:
    """The operator's task unpickles its configuration and builds its engine, and converts
    values with pyarrow, without importing anything the daemon has not: the configuration
    carries the model's values, not the pipeline (whose modules, the configuration's and the
    driver's, took ~0.4 s in each worker), and pandas, which pyarrow imports at its first
    conversion, is preloaded (it took ~0.5 s in each worker)."""
    from pyspark import cloudpickle

    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config

    def one(name: str, schema: dict[str, str], event_time: str) -> dict[str, object]:
        path = tmp_path / name
        path.mkdir()
        return {"format": "jsonl", "path": str(path), "schema": schema, "event_time": event_time}

    pipeline = pipeline_from_dict(
        {
            "name": "ctr",
            "lake": str(tmp_path / "lake"),
            "keys": ["ad"],
            "window": "FixedWindows(1m)",
            "inputs": {
                "impressions": one("impressions", {"ad": "string", "ts": "timestamp"}, "ts"),
                "clicks": one("clicks", {"ad": "string", "at": "timestamp", "cost": "long"}, "at"),
            },
            "aggregates": {
                "impressions": "count() filter (input = 'impressions')",
                "cost": "sum(cost)",
            },
        }
    )
    shipped = tmp_path / "task.pickle"
    shipped.write_bytes(cloudpickle.dumps(operator_config(pipeline)))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", TASK, str(shipped)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = done.stdout.split()
    ours = [m for m in imported if m.split(".")[0] in ("jobs", "sinks", "panes", "pandas")]
    assert ours == [], f"a worker imported {ours[:10]}"


@pytest.mark.heavy
def test_the_daemon_takes_off_its_path_only_the_zips_the_installed_packages_shadow(
    tmp_path: Path,
) -> None:
    """PySpark's worker makes every zip importer on the path reread its archive before each
    task; a zip whose packages come from elsewhere, or a jar without Python, is taken off the
    daemon's path, any other kept."""
    code = (
        "import os, sys\n"
        "from jobs.startup.python_processes import drop_shadowed_archives, preload\n"
        "preload(('pyspark', 'py4j'))\n"
        "dropped = drop_shadowed_archives()\n"
        "import pyspark.daemon, pyspark.sql.streaming\n"  # what a worker imports still imports
        "print(sorted(p.rsplit('/', 1)[-1] for p in dropped))\n"
        "kept = [p for p in sys.path if p.endswith(('.zip', '.jar')) and os.path.isfile(p)]\n"
        "print(sorted(p.rsplit('/', 1)[-1] for p in kept))\n"
    )
    own = tmp_path / "own.zip"  # a zip of the user's that provides a module not yet imported
    with zipfile.ZipFile(own, "w") as archive:
        archive.writestr("panestore_test_zipped.py", "X = 1\n")
    classes = tmp_path / "classes.jar"  # as Spark's core jar: classes, no Python
    with zipfile.ZipFile(classes, "w") as archive:
        archive.writestr("org/apache/X.class", b"\xca\xfe")
    path = os.pathsep.join((str(PROJECT_ROOT), str(own), str(classes)))
    launched = spark_like(worker_python("local[2]", cache_dir=tmp_path / "cache"), code, path)
    assert launched.returncode == 0, launched.stderr
    dropped, kept = launched.stdout.splitlines()
    assert eval(dropped) == sorted([*(p.name for p in SPARK_LIB.glob("*.zip")), "classes.jar"])
    assert eval(kept) == ["own.zip"]
    plain = spark_like(sys.executable, code, path)  # PySpark imported from its zip: kept
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[0] == "['classes.jar']"


def test_the_operators_workers_collect_garbage_less_often_within_the_block_only() -> None:
    before = gc.get_threshold()
    assert before != GC_THRESHOLDS
    with gc_thresholds():
        assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_threshold() == before
    with pytest.raises(KeyboardInterrupt), gc_thresholds():
        raise KeyboardInterrupt
    assert gc.get_threshold() == before


def test_preload_leaves_a_failing_import_to_the_task() -> None:
    preload(("panestore_no_such_module", "json"))
    assert "json" in sys.modules


def test_the_directory_executors_import_the_project_from_holds_its_packages():
    """``spark.executorEnv.PYTHONPATH`` (a cluster's executors) and the demo's files are found
    from the package's own place: the directory that holds ``jobs``, ``sinks`` and ``panes``."""
    from jobs.cli.demo import ROOT
    from jobs.startup.session import PROJECT_ROOT

    for package in ("jobs", "sinks", "panes"):
        assert (PROJECT_ROOT / package / "__init__.py").is_file()
    assert (ROOT / "conf" / "demo.toml").is_file()
