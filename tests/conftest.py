import os

from hypothesis import HealthCheck, settings

# fixtures of an S3-compatible server the tests start themselves (tests/s3_server.py)
pytest_plugins = ("tests.s3_server",)

# The default (the README's test command, CI) is derandomized: the same examples every run, so
# a result does not depend on the day. ``PANESTORE_HYPOTHESIS=thorough`` explores at random.
settings.register_profile(
    "default",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# ``./dev test --fast`` (the edit-test loop): the same derandomized examples, fewer of them.
settings.register_profile(
    "fast",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
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
        "markers", "bucket: needs the S3-compatible server the tests start (tests/s3_server.py)"
    )
    config.addinivalue_line("markers", "wheel: builds and installs the package")


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if "s3_endpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.bucket)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with ./dev test --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
