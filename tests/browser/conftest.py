"""Headless Chromium for the browser tests (marker ``browser``, run by ``./dev test``, not by
``./dev test --fast``): Debian's ``chromium``, installed here with apt-get when it is missing
(the tests run as root on Debian; elsewhere install it first)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # the machine is offline: no update checks, no sync, no component downloads
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def _find() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    )


def _install() -> str:
    """apt-get's output when installing Debian's chromium failed (empty: it did not fail)."""
    if not shutil.which("apt-get") or os.geteuid() != 0:
        return "not root on a Debian system: install Chromium (Debian package chromium) first"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # the package lists may be missing or stale
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    return "" if done.returncode == 0 else (done.stderr or done.stdout).strip()[-500:]


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of a Chromium binary (installed first if missing; a failed install fails the
    test with apt-get's words)."""
    found = _find()
    if found is None:
        why = _install()
        found = _find()
        if found is None:
            pytest.fail(
                f"Chromium is needed by the browser tests and could not be installed: {why}"
            )
    return found


@pytest.fixture
def browse(chromium: str, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess]:
    """``browse(*args)``: headless Chromium with a new profile under ``tmp_path`` and ``args``
    (``--dump-dom URL``, ``--screenshot=FILE URL``, ...), its output as text."""

    def run(*args: str) -> subprocess.CompletedProcess:
        profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
        profile.mkdir()
        command = [chromium, *FLAGS, f"--user-data-dir={profile}", *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    return run
