"""Spark integration tests: one local SparkSession for the whole session.

Skipped with a clear message when pyspark (or its companions) is not installed or no Java 17+
runtime is found, so the pure suite runs before the Spark dependencies are added.
"""

from __future__ import annotations

import importlib.util

import pytest

_MISSING = [
    m
    for m in ("pyspark", "pyarrow", "pandas", "deltalake", "google.protobuf")
    if importlib.util.find_spec(m.split(".")[0]) is None
]


def pytest_collection_modifyitems(config, items):
    if not _MISSING:
        return
    skip = pytest.mark.skip(reason=f"Spark tests need {', '.join(_MISSING)} (not installed)")
    for item in items:
        if "spark" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: needs pyspark and a Java 17+ runtime (slow)")


@pytest.fixture(scope="session")
def spark():
    if _MISSING:
        pytest.skip(f"Spark tests need {', '.join(_MISSING)} (not installed)")
    from jobs.startup.session import JavaNotFound, get_session

    try:
        session = get_session("panestore-tests", shuffle_partitions=2)
    except JavaNotFound as e:
        pytest.skip(str(e))
    yield session
    session.stop()
