"""The examples in the packages' docstrings run as printed (doctest), from the checkout's root
(they name its files, ``conf/demo.toml``). The Python API's need a SparkSession and its tables:
``tests/spark/test_doc_examples.py`` runs them."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPARK_ONLY = ("jobs.api",)  # their examples run in tests/spark/test_doc_examples.py


def modules() -> list[str]:
    names = []
    for package in ("panes", "sinks", "jobs"):
        path = importlib.import_module(package).__path__
        names += [package, *(m.name for m in pkgutil.walk_packages(path, package + "."))]
    return [n for n in names if not n.startswith(SPARK_ONLY) and not n.endswith("__main__")]


@pytest.mark.heavy
@pytest.mark.parametrize("name", modules())
def test_a_modules_examples_run_as_printed(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS, report=False
    )
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples fail"
