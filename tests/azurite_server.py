"""Azure storage for the tests: the Azurite emulator's blob service, installed from npm into a
cache directory when missing, started on the loopback address by the tests themselves (a child
process, on a free port) and stopped after them, with the standard Azure environment pointing at
it (child processes inherit it).

Azurite is pinned to 3.35.0 (3.37 needs node 22). It is installed once with ``npm install
azurite@3.35.0 --prefix DIR`` into ``$PANESTORE_AZURITE_DIR``, else ``~/.cache/panestore/
azurite-3.35.0``, and started with ``--inMemoryPersistence`` (nothing on disk), ``--loose`` and
``--skipApiVersionCheck`` (the Rust and C++ clients send headers and API versions it does not
know) and ``--disableTelemetry`` (else it tries to reach a telemetry host, and this machine is
offline). Without ``node`` and ``npm`` the tests that need it fail, saying so: the tests of a
lake on Azure storage are not skipped.

The environment names the emulator the way delta-rs and obstore read it
(``AZURE_STORAGE_USE_EMULATOR``, ``AZURITE_BLOB_STORAGE_URL``: a custom ``AZURE_STORAGE_ENDPOINT``
instead makes every delta-rs append after version 1 fail); the account's key is set as a user's
would be (``AZURE_STORAGE_ACCOUNT_KEY``: the emulator's well-known key, a real credential there),
so the tests can check that no output, log or object of the lake holds it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

VERSION = "3.35.0"
START_S = 60.0
"""How long the emulator may take to start."""
INSTALL_S = 600.0
"""How long its installation from npm may take."""


def install_directory() -> Path:
    """Where Azurite is (or is installed): ``$PANESTORE_AZURITE_DIR`` or the user's cache."""
    named = os.environ.get("PANESTORE_AZURITE_DIR")
    if named:
        return Path(named)
    return Path.home() / ".cache" / "panestore" / f"azurite-{VERSION}"


def azurite_blob() -> Path:
    """The ``azurite-blob`` command, installed from npm first if it is not there."""
    directory = install_directory()
    command = directory / "node_modules" / ".bin" / "azurite-blob"
    if command.exists():
        return command
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError("the Azure tests need node (20 or newer) and npm to install Azurite")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", f"azurite@{VERSION}", "--prefix", str(directory), "--no-audit"],
        capture_output=True,
        text=True,
        timeout=INSTALL_S,
    )
    if done.returncode != 0 or not command.exists():
        raise RuntimeError(f"npm could not install azurite@{VERSION}: {done.stderr[-2000:]}")
    return command


_LISTENING = re.compile(r"listens on (http://[0-9.]+:\d+)")


def listening_endpoint(process: subprocess.Popen) -> str:
    """The endpoint the emulator says it listens on (its first lines), or RuntimeError."""
    found: list[str] = []
    said: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            said.append(line)
            match = _LISTENING.search(line)
            if match:
                found.append(match.group(1))
                break
        for _ in process.stdout:  # keep draining, so that its writes never block
            pass

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + START_S
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"Azurite did not start: {''.join(said)[-2000:]}")
        time.sleep(0.05)
    return found[0]


@pytest.fixture(scope="session")
def azurite_endpoint() -> Iterator[str]:
    """The emulator's blob endpoint (``http://127.0.0.1:PORT``); the standard Azure environment
    names it while it runs."""
    from sinks.lake.azure_store import EMULATOR_ACCOUNT, EMULATOR_KEY

    process = subprocess.Popen(
        [
            str(azurite_blob()),
            *("--blobHost", "127.0.0.1", "--blobPort", "0"),
            *("--inMemoryPersistence", "--loose", "--skipApiVersionCheck", "--disableTelemetry"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    environment = {
        "AZURE_STORAGE_USE_EMULATOR": "true",
        "AZURE_STORAGE_ACCOUNT_NAME": EMULATOR_ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": EMULATOR_KEY,
    }
    saved = {k: os.environ.get(k) for k in (*environment, "AZURITE_BLOB_STORAGE_URL")}
    try:
        endpoint = listening_endpoint(process)
        os.environ.update(environment, AZURITE_BLOB_STORAGE_URL=endpoint)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def new_container(name: str | None = None) -> str:
    """Create a container (a new random name unless ``name``) in the emulator; its name."""
    from sinks.lake.azure_store import azure_filesystem

    container = name or f"lakes-{uuid.uuid4().hex[:12]}"
    fs, _ = azure_filesystem(f"az://{container}/")
    fs.create_dir(container)
    return container


def new_azure_lake(endpoint: str) -> str:
    """A lake URI (``az://lakes-<random>/prod/sessions``) in a new container of the emulator at
    ``endpoint`` (the running fixture's)."""
    assert os.environ.get("AZURITE_BLOB_STORAGE_URL") == endpoint
    return f"az://{new_container()}/prod/sessions"


def container_objects(lake: str) -> dict[str, bytes]:
    """Every object in the lake's container: path -> content."""
    import pyarrow.fs as pafs

    from sinks.lake.azure_store import azure_filesystem, azure_place

    fs, _ = azure_filesystem(lake)
    container = azure_place(lake).container
    found = fs.get_file_info(pafs.FileSelector(container, recursive=True))
    out = {}
    for info in found:
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as f:
                out[info.path.removeprefix(container + "/")] = f.read()
    return out


@pytest.fixture
def azure_lake(azurite_endpoint: str) -> str:
    """A lake URI in a new container of the emulator."""
    return new_azure_lake(azurite_endpoint)
