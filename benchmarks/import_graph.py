"""The house's import graph in figures: modules and lines by folder, imports between folders,
folders that import each other, and imports by ``jobs`` of a module inside a room of ``sinks``.

    .venv/bin/python -m benchmarks.import_graph [CHECKOUT]

A folder is a sub-package of ``jobs``, a room of ``sinks`` or a sub-package of ``panes``; a
package's loose modules are its own folder. Every import counts (lazy and type-checking ones
too), as in ``tests/test_architecture.py``. Give another checkout to compare before and after.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGES = ("panes", "sinks", "jobs")


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def folder(root: Path, module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and (root / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


def imported(path: Path, files: dict[str, Path]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n in files)
    return found


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else ".").resolve()
    files = {module_name(root, p): p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}
    modules: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    into_sinks = 0
    for module, path in files.items():
        here = folder(root, module)
        modules[here] += 1
        lines[here] += len(path.read_text().splitlines())
        targets = imported(path, files)
        for there in {folder(root, t) for t in targets} - {here}:
            edges[(here, there)] += 1
        if module.startswith("jobs."):
            into_sinks += sum(
                1 for t in targets if t.startswith("sinks.") and files[t].name != "__init__.py"
            )
    print(f"{root}: {len(files)} modules in {len(modules)} folders")
    for name in sorted(modules):
        print(f"  {name:24} {modules[name]:4} modules {lines[name]:7,} lines")
    mutual = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    print(f"imports between folders: {len(edges)} pairs of folders")
    print(f"folders importing each other: {', '.join(' <-> '.join(m) for m in mutual) or 'none'}")
    print(f"imports by jobs of a module inside sinks: {into_sinks}")


if __name__ == "__main__":
    main()
