"""An S3-compatible server for the tests: moto's server mode, started on the loopback address by
the tests themselves (in a child process) and stopped after them, with the standard AWS
environment pointing at it (child processes inherit it).

The server runs in its own process, not in a thread of the tests' process: some delta-rs calls
(``DeltaTable.is_deltatable``) keep Python's GIL while they wait for the store's answer, so a
server thread in the same process could not answer them (each would wait for its timeout).
"""

from __future__ import annotations

import multiprocessing
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "panestore-test-key",
    "AWS_SECRET_ACCESS_KEY": "panestore-test-secret-0123456789",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
START_S = 60.0
"""How long the server may take to start."""


def _atomic_conditional_writes() -> None:
    """Make moto's conditional object writes atomic, as S3's are. moto answers each request in a
    thread of its own and checks a put's ``If-None-Match`` / ``If-Match`` before it writes, with
    nothing between the two: two contenders creating one object at the same moment could both
    succeed (seen: two holders of a lake's lock on a loaded machine, both by a create). Here its
    object puts run one at a time."""
    import threading

    from moto.s3.responses import S3Response

    one_at_a_time = threading.Lock()
    put = S3Response.put_object

    def put_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        with one_at_a_time:
            return put(self, *args, **kwargs)

    S3Response.put_object = put_object  # type: ignore[method-assign]


def _serve(port: Any, stop: Any) -> None:
    """The child process: moto's server on 127.0.0.1 (a free port, told through ``port``) until
    ``stop`` is set."""
    import logging

    from moto.server import ThreadedMotoServer

    _atomic_conditional_writes()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port.value = server.get_host_and_port()[1]
    stop.wait()
    server.stop()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The server's endpoint; the environment names it (``AWS_ENDPOINT_URL``) while it runs."""
    ctx = multiprocessing.get_context("spawn")
    port, stop = ctx.Value("i", 0), ctx.Event()
    child = ctx.Process(target=_serve, args=(port, stop), daemon=True)
    child.start()
    saved = {k: os.environ.get(k) for k in (*ENVIRONMENT, "AWS_ENDPOINT_URL")}
    try:
        _wait_for(port, child)
        endpoint = f"http://127.0.0.1:{port.value}"
        os.environ.update(ENVIRONMENT, AWS_ENDPOINT_URL=endpoint)
        yield endpoint
    finally:
        stop.set()
        child.join(10)
        if child.is_alive():
            child.kill()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _wait_for(port: Any, child: Any) -> None:
    """Wait until the child has told its port (or died)."""
    import time

    deadline = time.monotonic() + START_S
    while port.value == 0:
        if not child.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the S3 test server did not start")
        time.sleep(0.02)


def new_bucket_lake(endpoint: str) -> str:
    """A lake URI (``s3://lakes-<random>/prod/sessions``) in a new bucket of the server at
    ``endpoint``."""
    import boto3

    name = f"lakes-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return f"s3://{name}/prod/sessions"


@pytest.fixture
def bucket_lake(s3_endpoint: str) -> str:
    """A lake URI in a new bucket of the server."""
    return new_bucket_lake(s3_endpoint)
