"""How Spark's Python processes start (jobs.python_workers), without Spark: the launcher a local
master runs imports the installed PySpark ahead of Spark's zip and is otherwise this interpreter;
anything else runs this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from jobs.python_workers import (  # noqa: E402
    installed_packages,
    launcher,
    preload,
    worker_python,
)

SPARK_LIB = Path(pyspark.__file__).resolve().parent / "python" / "lib"
if not (SPARK_LIB / "pyspark.zip").is_file():  # pragma: no cover - a PySpark without its zip
    pytest.skip("this PySpark ships no pyspark.zip", allow_module_level=True)
SPARK_PATH = os.pathsep.join(str(p) for p in sorted(SPARK_LIB.glob("*.zip")))
"""What Spark puts first on its Python processes' path."""


def spark_like(exe: str, code: str, extra_path: str = "") -> subprocess.CompletedProcess:
    """Run ``code`` with ``exe`` as Spark runs a Python process: its zips first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SPARK_PATH, extra_path) if p)}
    return subprocess.run([exe, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


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
    args = subprocess.run([exe, "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME", ""],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert args.strip() == repr(["a b", "$HOME", ""])


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


def test_a_launcher_that_cannot_be_made_falls_back(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert worker_python("local[2]", cache_dir=blocked / "cache") == sys.executable


def test_preload_leaves_a_failing_import_to_the_task() -> None:
    preload(("panestore_no_such_module", "json"))
    assert "json" in sys.modules
