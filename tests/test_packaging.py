"""An installed (non-editable) copy of panestore behaves as the checkout does: its package data
(the defaults under every configuration) is in the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[1]


def test_an_installed_wheel_checks_the_demo_configuration_with_its_defaults(tmp_path):
    # not this process's PYTHONPATH (a Spark session of this test process puts the checkout on it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def sh(*args: str | Path, cwd: Path = tmp_path) -> str:
        done = subprocess.run(
            [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    source = tmp_path / "source"  # a copy: building leaves build/ and *.egg-info behind
    for name in ("panes", "sinks", "jobs"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    sh(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--quiet",
        "-w",
        tmp_path / "dist",
        source,
    )
    (wheel,) = (tmp_path / "dist").glob("panestore-*.whl")
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = Path(sh(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    # the dependencies from this interpreter's site-packages, after the venv's own: the editable
    # install there is a .pth hook, which a path added this way does not run
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # the venv's own pip: this interpreter's would uninstall the checkout's editable install
    sh(python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel)

    where = sh(
        python,
        "-c",
        "import jobs.config.load as p; print(p.__file__, p.DEFAULTS_FILE.exists())",
    )
    assert where.startswith(str(site)), where  # the installed copy, not the checkout
    assert where.split()[-1] == "True", where  # with its defaults
    out = sh(python, "-m", "jobs.cli.commands", "check", ROOT / "conf" / "demo.toml")
    assert out.splitlines()[-1] == "ok"
    # and the checkout's own (editable) install is untouched: its `panestore` command stays
    assert "Name: panestore" in sh(sys.executable, "-m", "pip", "show", "panestore")
