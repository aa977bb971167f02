"""Azure storage for the benchmarks, and the count of the requests a lake makes to it: the Azure
side of :mod:`benchmarks.s3_server`, counted the same way.

:class:`AzureServer` runs the Azurite emulator's blob service (installed from npm and started as
the tests start it: ``tests/azurite_server.py``) as a child process on the loopback address, with
its debug log (``--debug FILE``), and points the standard Azure environment at it while it runs
(``AZURE_STORAGE_USE_EMULATOR``, ``AZURITE_BLOB_STORAGE_URL``, the emulator's account and key),
so every child process the benchmark starts reaches it. Azurite logs each request in that file
before it answers (``BlobStorageContextMiddleware: RequestMethod=GET
RequestURL=http://HOST/ACCOUNT/CONTAINER/PATH?QUERY``); :meth:`AzureServer.mark` sends an
unauthenticated GET naming a label in a container that does not exist (refused, logged all the
same), and :meth:`~benchmarks.s3_server.S3Server.requests_between` returns what was logged
between two marks. Kinds as on S3: a GET of a container (``comp=list``) is a LIST, a blob batch
(``POST ...?comp=batch``) a POST.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from benchmarks.s3_server import MARK_BUCKET, Request, S3Server

_LINE = re.compile(r"RequestMethod=(\w+) RequestURL=(\S+)")


class AzureServer(S3Server):
    """Azurite's blob service as a child process on ``127.0.0.1``, its request log in ``log``;
    a context manager that starts it and sets the Azure environment, then stops it and restores
    the environment."""

    def __init__(self, log: Path) -> None:
        super().__init__(log)
        self.account = ""

    def __enter__(self) -> AzureServer:
        from sinks.lake.azure_store import EMULATOR_ACCOUNT, EMULATOR_KEY
        from tests.azurite_server import azurite_blob, listening_endpoint

        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        self._proc = subprocess.Popen(  # type: ignore[assignment]
            [
                str(azurite_blob()),
                *("--blobHost", "127.0.0.1", "--blobPort", "0"),
                *("--inMemoryPersistence", "--loose", "--skipApiVersionCheck"),
                *("--disableTelemetry", "--debug", str(self.log)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            self.endpoint = listening_endpoint(self._proc)  # type: ignore[arg-type]
        except RuntimeError:
            self._stop()
            raise
        self.account = EMULATOR_ACCOUNT
        environment = {
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURE_STORAGE_ACCOUNT_NAME": EMULATOR_ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": EMULATOR_KEY,
            "AZURITE_BLOB_STORAGE_URL": self.endpoint,
        }
        self._saved = {k: os.environ.get(k) for k in environment}
        os.environ.update(environment)
        return self

    @staticmethod
    def parse(line: str) -> Request | None:
        """The request a line of Azurite's debug log records, or None (most lines)."""
        found = _LINE.search(line)
        if found is None:
            return None
        method, url = found.groups()
        parts = urlsplit(url)
        _account, _, rest = parts.path.lstrip("/").partition("/")
        container, _, name = rest.partition("/")
        query = parse_qs(parts.query, keep_blank_values=True)
        return Request(method, unquote(container), unquote(name), query, 0)

    def mark(self, label: str) -> None:
        """Log ``label`` in Azurite's request log (see the module doc)."""
        url = f"{self.endpoint}/{self.account}/{MARK_BUCKET}/{label}"
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(url, timeout=30).close()

    def fresh_bucket(self, name: str) -> None:
        """Create the container ``name`` (the emulator keeps everything in memory, from empty)."""
        from tests.azurite_server import new_container

        new_container(name)
