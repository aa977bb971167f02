import os

from hypothesis import HealthCheck, settings

# fixtures of an S3-compatible server, the Azure storage emulator and a GCS emulator the tests start
# themselves (tests/s3_server.py, tests/azurite_server.py, tests/gcs_server.py)
pytest_plugins = ("tests.s3_server", "tests.azurite_server", "tests.gcs_server")

# Hypothesis profiles, by how many examples each property draws. The default (the README's test
# command, CI) is derandomized: the same examples every run, so a result does not depend on the
# day; ``fast`` (``./dev test --fast``, the edit-test loop) draws fewer of the same;
# ``PANESTORE_HYPOTHESIS=thorough`` explores at random.
for name, examples, derandomize in (
    ("default", 300, True),
    ("fast", 60, True),
    ("thorough", 5000, False),
):
    settings.register_profile(
        name,
        max_examples=examples,
        deadline=None,
        derandomize=derandomize,
        suppress_health_check=[HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("PANESTORE_HYPOTHESIS", "default"))


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run the slow tests (random kills, extra variants)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a slow test, run with --run-slow")
    config.addinivalue_line(
        "markers",
        "heavy: a test taking a second or more (a lake written and read end to end, many "
        "generated cases): in the full suite, not in the edit-test loop (./dev test --fast)",
    )
    config.addinivalue_line(
        "markers", "bucket: needs the S3-compatible server the tests start (tests/s3_server.py)"
    )
    config.addinivalue_line(
        "markers",
        "azure: needs the Azure storage emulator the tests start (tests/azurite_server.py)",
    )
    config.addinivalue_line(
        "markers", "gcs: needs the GCS emulator the tests start (tests/gcs_server.py)"
    )
    config.addinivalue_line("markers", "wheel: builds and installs the package")
    config.addinivalue_line(
        "markers", "browser: opens pages in headless Chromium (tests/browser/conftest.py)"
    )


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if "s3_endpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.bucket)
        if "azurite_endpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.azure)
        if "gcs_endpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gcs)
        if "chromium" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with ./dev test --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
