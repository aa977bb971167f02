"""The dependency rule of the design: ``jobs -> sinks -> panes`` (and ``jobs -> panes``), one way,
with no import cycle between modules.

Every import counts, also one inside a function (a lazy import is still a dependency) and one
for type checking only (``if TYPE_CHECKING:``): it never runs, but the modules still depend on
each other's meaning, and a cycle there is a cycle of the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("panes", "sinks", "jobs")
# what each package may import of ours
ALLOWED = {"panes": {"panes"}, "sinks": {"panes", "sinks"}, "jobs": {"panes", "sinks", "jobs"}}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (``from pkg import name`` counts as ``pkg.name``
    when that is a module, else ``pkg``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in PACKAGES)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    return {m: {i for i in _imports(p) if i in files and i != m} for m, p in files.items()}


def test_packages_depend_one_way():
    wrong = sorted(
        f"{m} imports {i}"
        for m, deps in _graph().items()
        for i in deps
        if i.split(".")[0] not in ALLOWED[m.split(".")[0]]
    )
    assert wrong == []


def test_no_import_cycles_between_modules():
    graph = _graph()
    # package front doors (``panes/__init__``) re-export their modules: not part of a cycle
    graph = {m: {d for d in deps if d not in PACKAGES} for m, deps in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append([*path[path.index(d) :], d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_the_rule_is_checked_on_every_module():
    graph = _graph()
    assert {"panes.engine", "sinks.materializer", "jobs.run"} <= set(graph)
    assert "panes.engine" in graph["jobs.pipeline"] or "panes" in _imports(
        ROOT / "jobs" / "pipeline.py"
    )


# Code that runs in Spark's executors (Python workers import it per task, so it must import
# cheaply) and what it must not pull in: the configuration loader, the command line, the
# materializer, plotting, the driver's run.
EXECUTOR_MODULES = (
    "jobs.operator",
    "jobs.operator_input",
    "jobs.task_files",
    "jobs.output_tables",
    "jobs.batch_output",
    "jobs.processor_shell",
    "jobs.python_processes",
)
NOT_ON_EXECUTORS = (
    "jobs.pipeline",
    "jobs.cli",
    "jobs.inspect",
    "jobs.run",
    "jobs.job",
    "sinks.materializer",
    "sinks.plot",
)


def test_executor_modules_stay_within_their_import_budget():
    """Imported in a fresh interpreter, as a Python worker does, the executor modules load none
    of :data:`NOT_ON_EXECUTORS`."""
    import subprocess
    import sys

    probe = (
        "import importlib, sys\n"
        f"for m in {EXECUTOR_MODULES!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in {NOT_ON_EXECUTORS!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
