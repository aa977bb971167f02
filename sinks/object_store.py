"""A lake's small objects on an object store (S3 and compatibles), through ``obstore``.

The Delta tables of a lake in a bucket are written and read by delta-rs and pyarrow; what else a
lake keeps there (its locks) is a handful of small objects, written with the store's conditional
requests, since an object store has no rename and no ``flock``:

* create if absent (``If-None-Match: *``): exactly one of several writers succeeds;
* replace if unchanged (``If-Match: <etag>``): a compare-and-swap.

Configuration and credentials come from the standard AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP`` for a plain-HTTP local endpoint, ...), read by the same Rust ``object_store``
library delta-rs uses, so the tables and the small objects see one configuration.
"""

from __future__ import annotations

from typing import Any


def is_object_store(location: str) -> bool:
    """Whether ``location`` names an object store (a URI with a scheme other than ``file``)."""
    return "://" in location and not location.startswith("file://")


def store_at(location: str) -> Any:
    """The ``obstore`` store whose root is ``location`` (``s3://bucket/prefix``), configured from
    the environment."""
    from obstore.store import from_url

    return from_url(location.rstrip("/"))
