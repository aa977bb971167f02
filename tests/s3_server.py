"""An S3-compatible server for the tests: moto's server mode, started on the loopback address by
the tests themselves and stopped after them, with the standard AWS environment pointing at it
(child processes inherit it)."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import pytest

ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "panestore-test-key",
    "AWS_SECRET_ACCESS_KEY": "panestore-test-secret-0123456789",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The server's endpoint; the environment names it (``AWS_ENDPOINT_URL``) while it runs."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in (*ENVIRONMENT, "AWS_ENDPOINT_URL")}
    os.environ.update(ENVIRONMENT, AWS_ENDPOINT_URL=endpoint)
    try:
        yield endpoint
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket_lake(s3_endpoint: str) -> str:
    """A lake URI in a new bucket of the server."""
    import boto3

    name = f"lakes-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return f"s3://{name}/prod/sessions"
