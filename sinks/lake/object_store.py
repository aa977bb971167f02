"""A lake's small objects on an object store (S3 and compatibles, Azure storage), through
``obstore``.

The Delta tables of a lake in a bucket are written and read by delta-rs and pyarrow; what else a
lake keeps there (its locks) is a handful of small objects, written with the store's conditional
requests, since an object store has no rename and no ``flock``:

* create if absent (``If-None-Match: *``): exactly one of several writers succeeds;
* replace if unchanged (``If-Match: <etag>``): a compare-and-swap.

Configuration and credentials come from the standard AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP`` for a plain-HTTP local endpoint, ...) or, for a lake on Azure storage
(``az://``, ``abfss://``), the standard Azure environment (:mod:`sinks.lake.azure_store`), read by
the same Rust ``object_store`` library delta-rs uses, so the tables and the small objects see one
configuration. Azure's conditional requests are the same two (``If-None-Match: *``, ``If-Match``).

A store that ignores conditional requests cannot lock a lake (:class:`sinks.lake.lock.LakeLock`
finds out and refuses with :class:`~sinks.lake.errors.NoConditionalWrites`). A pipeline on such a
store runs with ``single_writer = true``: its user guarantees one writer at a time, nothing
locks, and delta-rs commits by plain copy (:func:`delta_storage_options`).
"""

from __future__ import annotations

import os
import re
from typing import Any

from sinks.lake.azure_store import SECRET_VARIABLES as AZURE_SECRET_VARIABLES
from sinks.lake.azure_store import is_azure, redact_connection_secrets

UNSAFE_RENAME = "AWS_S3_ALLOW_UNSAFE_RENAME"
"""The delta-rs storage option that commits without the store's conditional write."""
SECRET_VARIABLES = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    *AZURE_SECRET_VARIABLES,
)
"""The environment variables whose values :func:`redact` removes from a text (AWS's and Azure's:
:data:`sinks.lake.azure_store.SECRET_VARIABLES`)."""
_SHORTEST_SECRET = 8
"""Shorter values are no real credential (AWS secrets have 40 characters): not redacted, so that
a test value like ``x`` does not garble every message."""


def is_object_store(location: str) -> bool:
    """Whether ``location`` names an object store (a URI with a scheme other than ``file``)."""
    return "://" in location and not location.startswith("file://")


def store_at(location: str) -> Any:
    """The ``obstore`` store whose root is ``location`` (``s3://bucket/prefix``,
    ``az://container/prefix``, ``abfss://container@account.dfs.core.windows.net/prefix``),
    configured from the environment."""
    from obstore.store import from_url

    return from_url(location.rstrip("/"))


def join_location(location: str, name: str) -> str:
    """``name`` inside ``location`` (a local path, or a URI whose separator is ``/``)."""
    if is_object_store(location):
        return f"{location.rstrip('/')}/{name}"
    return os.path.join(location, name)


def delta_storage_options(lake: str, single_writer: bool = False) -> dict[str, str] | None:
    """The delta-rs storage options of the tables of ``lake``: None normally (delta-rs reads the
    standard AWS or Azure environment itself and commits with a conditional write); for a lake on
    an S3 store with ``single_writer``, :data:`UNSAFE_RENAME` (the store cannot refuse a second
    commit of a version: the user guarantees there is none)."""
    if single_writer and is_object_store(lake) and not is_azure(lake):
        return {UNSAFE_RENAME: "true"}
    return None


def redact(text: str) -> str:
    """``text`` without the values of :data:`SECRET_VARIABLES` (a library's error message may
    echo what it was given) nor the secret parts of an Azure connection string or SAS URL
    (:func:`~sinks.lake.azure_store.redact_connection_secrets`). A SAS token is also removed
    without its leading ``?``, as a URL quotes it."""
    for name in SECRET_VARIABLES:
        value = os.environ.get(name)
        if value and len(value.lstrip("?")) >= _SHORTEST_SECRET:
            text = text.replace(value, "***").replace(value.lstrip("?"), "***")
    return redact_connection_secrets(text)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message, :func:`redact`-ed (its type's name when it has no
    message): for a warning that names what failed.

    >>> first_line(OSError("disk full\\n  at write"))
    'disk full'
    >>> first_line(KeyError())
    'KeyError'
    """
    text = redact(str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


def one_line(error: BaseException, limit: int | None = None) -> str:
    """A store's (or DuckDB's) error message on one line: :func:`redact`-ed, without terminal
    colours or DuckDB's caret line under the SQL, its lines joined; cut at ``limit``
    characters."""
    lines = (
        line.strip().lstrip("↳").strip() for line in _ANSI.sub("", redact(str(error))).splitlines()
    )
    text = "; ".join(line for line in lines if line.strip("^ "))
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."
