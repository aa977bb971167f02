"""The dependency rule of the design: ``jobs -> sinks -> panes`` (and ``jobs -> panes``), one way,
with no import cycle between modules.

Every import counts, also one inside a function (a lazy import is still a dependency) and one
for type checking only (``if TYPE_CHECKING:``): it never runs, but the modules still depend on
each other's meaning, and a cycle there is a cycle of the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("panes", "sinks", "jobs")
# Spark's Python workers: the model, the sinks' formats, start-up (GC thresholds), and of the
# configuration only the accepted event-time forms (pure: numpy and Arrow)
ON_EXECUTORS = {
    "panes",
    "sinks",
    "jobs.executor",
    "jobs.startup",
    "jobs.config.event_time",
    "jobs.checkpoint.offsets",
    "jobs.checkpoint.clocks",
    "jobs.checkpoint.input_clocks",
    "jobs.checkpoint.files",
}
# The rooms of sinks, bottom up: each may import the rooms below it, through their front doors
SINK_ROOMS = (
    "sinks.lake",  # the lake's format and writes
    "sinks.upkeep",  # compaction and vacuum
    "sinks.fold",  # the materializer, the change feed
    "sinks.verification",  # the view against recomputations
    "sinks.presentation",  # DuckDB, pictures, the report
)
# what each package (and each sub-package of jobs and sinks) may import of ours; the longest
# prefix rules
ALLOWED = {
    "panes": {"panes"},
    "sinks": {"panes", "sinks"},
    **{room: {"panes", *SINK_ROOMS[: i + 1]} for i, room in enumerate(SINK_ROOMS)},
    "jobs": {"panes", "sinks", "jobs"},
    # Spark and its Python processes' start-up: nothing of the pipeline
    "jobs.startup": {"jobs.startup", "panes.front_door"},
    # Spark's checkpoint read back (the offsets of the sources that read a table by version, a
    # batch's clocks): the ground floor
    "jobs.checkpoint": {"panes", "sinks", "jobs.checkpoint"},
    # the sources' lower half: what Spark's Python workers run of a source (its reader, the
    # storage reading it needs, the columns option of the data sources) and what the
    # configuration reads of a source (the landing directory's naming rules, the columns an
    # upstream pane log or a Delta table offers)
    "jobs.reading": {"panes", "sinks", "jobs.checkpoint", "jobs.reading"},
    # the configuration: pure Python, on the sources' lower half
    "jobs.config": {"panes", "sinks", "jobs.checkpoint", "jobs.reading", "jobs.config"},
    "jobs.executor": ON_EXECUTORS,
    # a source's driver side: its registration, checks and records frame, and the checkpoint's
    # reading (what a batch read)
    "jobs.sources": {
        "panes",
        "sinks",
        "jobs.config",
        "jobs.startup",
        "jobs.executor",
        "jobs.sources",
        "jobs.checkpoint",
        "jobs.reading",
    },
    "jobs.driver": {
        "panes",
        "sinks",
        "jobs.config",
        "jobs.startup",
        "jobs.executor",
        "jobs.sources",
        "jobs.checkpoint",
        "jobs.reading",
        "jobs.driver",
    },
    # inspecting a pipeline without running it (status, the records as verify's elements): on
    # top of the driver, below the command and the API
    "jobs.inspection": {
        "panes",
        "sinks",
        "jobs.config",
        "jobs.startup",
        "jobs.executor",
        "jobs.sources",
        "jobs.checkpoint",
        "jobs.reading",
        "jobs.driver",
        "jobs.inspection",
    },
    # the Python API (users' PySpark code): on top of the driver, beside the command
    "jobs.api": {
        "panes",
        "sinks",
        "jobs.config",
        "jobs.startup",
        "jobs.sources",
        "jobs.checkpoint",
        "jobs.reading",
        "jobs.driver",
        "jobs.inspection",
        "jobs.api",
    },
    "jobs.cli": {"panes", "sinks", "jobs"},
}
SUBPACKAGES = (
    *SINK_ROOMS,
    "jobs.config",
    "jobs.startup",
    "jobs.executor",
    "jobs.sources",
    "jobs.sources.files",
    "jobs.sources.delta_table",
    "jobs.sources.pane_log",
    "jobs.checkpoint",
    "jobs.reading",
    "jobs.reading.files",
    "jobs.reading.delta_table",
    "jobs.reading.pane_log",
    "jobs.driver",
    "jobs.inspection",
    "jobs.api",
    "jobs.cli",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (``from pkg import name`` counts as ``pkg.name``
    when that is a module, else ``pkg``; a name of a front door that imports on first use counts
    as the module the name comes from, as it is imported when used)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            door = _door_exports(node.module)
            names += [door[a.name] for a in node.names if a.name in door]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in PACKAGES)
    return found


def _door_exports(package: str) -> dict[str, str]:
    """The names the front door of ``package`` imports on first use -> their modules."""
    from panes.front_door import exported

    init = ROOT / package.replace(".", "/") / "__init__.py"
    return exported(str(init)) if init.exists() else {}


def _files() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    files = _files()
    return {m: {i for i in _imports(p) if i in files and i != m} for m, p in files.items()}


def _owner(module: str) -> str:
    """The entry of :data:`ALLOWED` that rules ``module``: its longest prefix there."""
    parts = module.split(".")
    return next(
        ".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in ALLOWED
    )


def _may_import(importer: str, imported: str) -> bool:
    return any(imported == a or imported.startswith(a + ".") for a in ALLOWED[_owner(importer)])


@pytest.mark.heavy
def test_packages_depend_one_way():
    wrong = sorted(
        f"{m} imports {i}" for m, deps in _graph().items() for i in deps if not _may_import(m, i)
    )
    assert wrong == []


def test_every_module_of_jobs_is_in_a_subpackage():
    loose = [m for m in _files() if m.startswith("jobs.") and _owner(m) == "jobs"]
    assert loose == []


def _room(module: str) -> str | None:
    """The room of :mod:`sinks` ``module`` is in, if any."""
    return next((r for r in SINK_ROOMS if module.startswith(r + ".")), None)


@pytest.mark.heavy
def test_rooms_of_sinks_are_entered_through_their_front_doors():
    """A module of the packages imports a room of :mod:`sinks` from its front door
    (``from sinks.fold import Materializer``), never from a module inside it, unless it is in
    the same room."""
    files = _files()
    inner = []
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                room = _room(target) if target in files else None
                if room and target != room and not (module + ".").startswith(room + "."):
                    inner.append(f"{module} imports {target}")
    assert sorted(set(inner)) == []


@pytest.mark.heavy
def test_no_import_cycles_between_modules():
    graph = _graph()
    # a front door (``__init__``) names its modules for type checkers only: not part of a cycle
    # (a name imported through a door counts as its module's, :func:`_imports`)
    doors = {m for m, p in _files().items() if p.name == "__init__.py"}
    graph = {m: {d for d in deps if d not in doors} for m, deps in graph.items()}
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


@pytest.mark.heavy
def test_the_rule_is_checked_on_every_module():
    graph = _graph()
    assert {"panes.engine", "sinks.fold.materializer", "jobs.driver.runs"} <= set(graph)
    assert "jobs.executor.operator_input" in graph["jobs.driver.plan"]
    # type-checking imports count: the front doors name their modules only there
    assert "jobs.driver.runs" in graph["jobs.driver"]


# What must never be imported in Spark's Python workers (they import the executor modules per
# task, so those must import cheaply): the configuration and its loader, the driver, the command
# line, the materializer, plotting.
NOT_ON_EXECUTORS = (
    "jobs.config.pipeline",
    "jobs.config.load",
    "jobs.config.checks",
    "jobs.driver",
    "jobs.cli",
    "sinks.fold.materializer",
    "sinks.presentation.key_plot",
)


def _executor_modules() -> list[str]:
    """The modules Spark's Python workers import: :mod:`jobs.executor`'s and the sources' lower
    half's (:mod:`jobs.reading`)."""
    return sorted(m for m in _files() if m.startswith(("jobs.executor.", "jobs.reading.")))


@pytest.mark.heavy
def test_executor_modules_stay_within_their_import_budget():
    """Imported in a fresh interpreter, as a Python worker does, every module of
    :mod:`jobs.executor` and of the sources' lower half loads nothing of
    :data:`NOT_ON_EXECUTORS`."""
    import subprocess
    import sys

    probe = (
        "import importlib, sys\n"
        f"for m in {_executor_modules()!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({NOT_ON_EXECUTORS!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
    assert {"jobs.executor.jsonl_decoder", "jobs.reading.pane_log.reader"} <= set(
        _executor_modules()
    )


def _front_door(package: str) -> Path:
    return ROOT / package.replace(".", "/") / "__init__.py"


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_has_a_front_door_that_imports_on_first_use(package):
    """``__all__`` is what the front door's type-checking block imports; every name resolves to
    the object of its module; importing the front door imports none of its modules."""
    import importlib
    import subprocess
    import sys

    from panes.front_door import exported

    where = exported(str(_front_door(package)))
    door = importlib.import_module(package)
    assert sorted(door.__all__) == sorted(where) and where
    # a submodule of the same name would replace the name on the package once imported
    modules = {p.stem for p in _front_door(package).parent.glob("*.py")}
    assert sorted(set(where) & modules) == []
    for name, module in where.items():
        assert getattr(door, name) is getattr(importlib.import_module(module), name)
    probe = f"import sys, {package}\nprint([m for m in sys.modules if m.startswith('{package}.')])"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_model_imports_neither_numpy_nor_pyarrow_until_the_columnar_engine_is_used():
    """``panes`` is pure Python: its per-key engine and simulator run without numpy or pyarrow;
    only the columnar engine (``panes.columnar``) needs them."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from panes import FixedWindows, Simulator, Windowing, combiners\n"
        "sim = Simulator(Windowing(FixedWindows(10)), combiners.sum())\n"
        "sim.add_elements([('k', 1, 1)])\n"
        "assert [p.value for p in sim.advance_watermark(100)] == [1]\n"
        "print(sorted(m for m in ('numpy', 'pyarrow') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _folder(module: str) -> str:
    """The folder of ``module`` among the sub-packages of ``jobs`` and the rooms of ``sinks``."""
    parts = module.split(".")
    if parts[0] in ("jobs", "sinks") and len(parts) > 1:
        candidate = ".".join(parts[:2])
        if (ROOT / parts[0] / parts[1]).is_dir():
            return candidate
    return parts[0]


def _folder_edges() -> set[tuple[str, str]]:
    return {
        (_folder(m), _folder(d))
        for m, deps in _graph().items()
        for d in deps
        if _folder(m) != _folder(d)
    }


@pytest.mark.heavy
def test_no_two_folders_import_each_other():
    """Between the sub-packages of ``jobs`` and the rooms of ``sinks``, imports go one way."""
    edges = _folder_edges()
    mutual = {tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges}
    assert mutual == set()


@pytest.mark.heavy
def test_folders_are_layers():
    """The folders can be put in an order where each imports only folders before it: no cycle
    between folders, of any length (``jobs.config -> jobs.reading -> jobs.checkpoint ->
    jobs.executor -> jobs.config`` was one)."""
    edges = _folder_edges()
    left = {f for e in edges for f in e}
    while True:  # peel off the folders that import none of the folders left
        floor = {f for f in left if not any(a == f and b in left for a, b in edges)}
        if not floor:
            break
        left -= floor
    assert sorted(left) == []
