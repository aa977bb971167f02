"""Front doors that import on first use.

A sub-package of ``jobs`` or a room of ``sinks`` names its public API in its ``__init__``, the
way readers and type checkers expect: ``from module import name`` lines in an
``if TYPE_CHECKING:`` block, and the names in ``__all__``. :func:`lazy_exports` turns that block
into the package's module ``__getattr__``: ``from jobs.driver import run`` imports
:mod:`jobs.driver.runs` when ``run`` is first asked for, not before. Importing one module of a
package (a Python worker importing ``jobs.executor.operator_input``, ``panestore check`` importing
``jobs.driver.fingerprint``) thus does not import the rest of the package, pyspark and pandas among
it.

It sits at the bottom (``panes``) so that every package can use it; it imports nothing of ours.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def exported(init_file: str) -> dict[str, str]:
    """The names the ``if TYPE_CHECKING:`` block of ``init_file`` imports -> their modules."""
    where: dict[str, str] = {}
    for node in ast.parse(Path(init_file).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    where.update({a.asname or a.name: imp.module for a in imp.names})
    return where


def lazy_exports(package: str, init_file: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` (whose ``__init__`` is ``init_file``): a name
    of its ``if TYPE_CHECKING:`` block is imported from its module on first use."""
    where = exported(init_file)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
