"""An S3-compatible server for the benchmarks, and the count of the requests a lake makes to it.

:class:`S3Server` runs moto's server mode (``python -m moto.server``, the ``moto_server``
command of the dev dependency ``moto[server]``) as a child process on the loopback address, and
points the standard AWS environment (``AWS_ENDPOINT_URL``, dummy keys, ``AWS_ALLOW_HTTP``) at
it while it runs, so every child process the benchmark starts reaches it. The server runs in a
process of its own: delta-rs holds the GIL while it waits for the store, so a server thread in a
process that also calls delta-rs deadlocks.

The server logs one line per request on its stderr (werkzeug's format, ``"GET /bucket/key?query
HTTP/1.1" 200 -``), written before the response is sent. That log is how requests are counted:
:func:`mark` sends a request naming a label to a bucket that does not exist (``HEAD
/panestore-bench-mark/LABEL``, answered 404), and :meth:`S3Server.requests_between` returns the
requests logged between two such marks, the marks excluded. A client that has received its
responses has had its requests logged, so marks sent after a process ended bound its requests.

Requests are counted by :data:`KINDS`. obstore (the lake's locks) deletes with S3's batch delete
(``POST /bucket?delete``, the keys in the body): counted as DELETE, and in no table (the log
does not show the keys).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import parse_qs, unquote, urlsplit

ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "panestore-bench-key",
    "AWS_SECRET_ACCESS_KEY": "panestore-bench-secret-0123456789",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
"""The AWS environment naming the server (with ``AWS_ENDPOINT_URL``); dummy keys."""

UNSET = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE")
"""Variables removed while the server runs: a real session or profile is not for this server."""

MARK_BUCKET = "panestore-bench-mark"

KINDS = ("LIST", "GET", "HEAD", "PUT", "POST", "DELETE")
"""Request kinds: LIST (a GET of a bucket, ``list-type=2``), GET of an object, HEAD, PUT (an
object, or a part of a multipart upload), POST (a multipart upload's start or completion),
DELETE (of an object, or a batch delete)."""

_LINE = re.compile(r'"([A-Z]+) (\S+) HTTP/[\d.]+"\s+(\d{3})')
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours the lines of 3xx-5xx answers


@dataclass(frozen=True)
class Request:
    """One logged request: its method, bucket, object key (empty for a bucket's), query, status."""

    method: str
    bucket: str
    key: str
    query: dict[str, list[str]]
    status: int

    @classmethod
    def parse(cls, line: str) -> Request | None:
        """The request a log line records, or None for another line (the server's banner)."""
        found = _LINE.search(_COLOUR.sub("", line))
        if found is None:
            return None
        method, target, status = found.groups()
        parts = urlsplit(target)
        bucket, _, key = parts.path.lstrip("/").partition("/")
        query = parse_qs(parts.query, keep_blank_values=True)
        return cls(method, unquote(bucket), unquote(key), query, int(status))

    @property
    def kind(self) -> str:
        """Its kind, one of :data:`KINDS`."""
        if self.method == "GET":
            return "GET" if self.key else "LIST"
        if self.method == "POST":
            return "DELETE" if "delete" in self.query else "POST"
        return self.method

    def table(self, lake: str) -> str:
        """The first path component under the lake prefix ``lake`` of the object (or, for a
        LIST, of the listed prefix): ``panes``, ``_locks``...; ``(bucket)`` for a request that
        names none (a batch delete), ``(outside)`` for one outside the lake."""
        path = self.key or self.query.get("prefix", [""])[0]
        if not path:
            return "(bucket)"
        head = lake.strip("/") + "/"
        if not path.startswith(head):
            return "(outside)"
        return path[len(head) :].split("/", 1)[0] or "(bucket)"


def by_kind(requests: list[Request]) -> dict[str, int]:
    """How many of ``requests`` are of each of :data:`KINDS` (every kind present)."""
    got = Counter(r.kind for r in requests)
    return {kind: got.get(kind, 0) for kind in KINDS}


def by_table(requests: list[Request], lake: str, tables: tuple[str, ...]) -> dict[str, int]:
    """How many of ``requests`` are under each of ``tables`` of the lake prefix ``lake``; the
    rest under ``other``."""
    got = Counter(r.table(lake) for r in requests)
    counts = {t: got.pop(t, 0) for t in tables}
    counts["other"] = sum(got.values())
    return counts


def mark(label: str, endpoint: str | None = None) -> None:
    """Log ``label`` in the server's request log (see the module doc); ``endpoint`` defaults to
    ``AWS_ENDPOINT_URL``. Plain HTTP, no client library: children of any checkout can mark."""
    url = f"{endpoint or os.environ['AWS_ENDPOINT_URL']}/{MARK_BUCKET}/{label}"
    # answered 404 (the bucket does not exist); the request is logged all the same
    with contextlib.suppress(urllib.error.HTTPError):
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=30).close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """moto's S3 server as a child process on ``127.0.0.1``, its request log in ``log``; a
    context manager that starts it and sets the AWS environment, then stops it and restores the
    environment."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.endpoint = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._saved: dict[str, str | None] = {}
        self._read = 0  # bytes of the log already parsed into _pending
        self._pending: list[tuple[str | None, Request | None]] = []  # (mark label, request)

    def __enter__(self) -> S3Server:
        port = _free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self._stop()
                    raise RuntimeError(
                        f"the S3 server did not start: {self.log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        self._saved = {k: os.environ.get(k) for k in (*ENVIRONMENT, *UNSET, "AWS_ENDPOINT_URL")}
        for k in UNSET:
            os.environ.pop(k, None)
        os.environ.update(ENVIRONMENT, AWS_ENDPOINT_URL=self.endpoint)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs (a benchmark leaves its CPU time out)."""
        return self._proc.pid if self._proc is not None else None

    def _stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    @staticmethod
    def parse(line: str) -> Request | None:
        """The request a line of the server's log records, or None."""
        return Request.parse(line)

    def mark(self, label: str) -> None:
        """Log ``label`` in this server's request log (:func:`mark`)."""
        mark(label, self.endpoint)

    def fresh_bucket(self, name: str) -> None:
        """Empty the server (moto's reset: every bucket and object dropped, their memory freed)
        and create the bucket ``name``."""
        import boto3

        urllib.request.urlopen(
            urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=60
        ).close()
        boto3.client("s3", endpoint_url=self.endpoint).create_bucket(Bucket=name)

    def _parse_new(self, f: IO[bytes]) -> None:
        f.seek(self._read)
        data = f.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        self._read += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            request = self.parse(line)
            if request is None:
                continue
            if request.bucket == MARK_BUCKET:
                self._pending.append((request.key, None))
            else:
                self._pending.append((None, request))

    def requests_between(self, start: str, end: str, timeout: float = 30) -> list[Request]:
        """The requests logged between the marks ``start`` and ``end`` (sent in that order);
        what the log holds up to ``end`` is then forgotten. Waits for ``end`` to be logged."""
        deadline = time.monotonic() + timeout
        with open(self.log, "rb") as f:
            while True:
                self._parse_new(f)
                labels = [label for label, _ in self._pending]
                if end in labels:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the mark {end!r} is not in the S3 server's log")
                time.sleep(0.05)
        stop = labels.index(end)
        if start not in labels[:stop]:
            raise RuntimeError(f"the mark {start!r} is not before {end!r} in the server's log")
        begin = labels.index(start)
        got = [r for label, r in self._pending[begin + 1 : stop] if r is not None]
        del self._pending[: stop + 1]
        return got
