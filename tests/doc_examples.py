"""The fenced ```python blocks of README.md and docs/*.md, for the tests that run them as printed
(tests/test_doc_examples.py; the ones that need a SparkSession: tests/spark/test_doc_examples.py).

A block runs as printed with nothing given but, where it uses one, a SparkSession named
``spark``. A block that cannot (it needs a broker the tests do not have) says so on the line
before its fence: ``<!-- not run: the reason -->``; it is still compiled.
"""

from __future__ import annotations

import builtins
import re
import symtable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>.*?)\s*-->")
_FENCE = re.compile(r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    path: str  # relative to the checkout
    line: int  # of the opening fence
    heading: str  # the nearest heading above it
    code: str
    not_run: str | None  # why the tests do not run it (the marker's text), or None

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    def free_names(self) -> set[str]:
        """The names the block uses and neither defines nor imports (nor a builtin): what it
        presupposes."""
        top = symtable.symtable(self.code, self.id, "exec")
        bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
        used: set[str] = set()

        def walk(table: symtable.SymbolTable) -> None:
            for s in table.get_symbols():
                if s.is_referenced() and (table is top or s.is_global()):
                    used.add(s.get_name())
            for child in table.get_children():
                walk(child)

        walk(top)
        return used - bound - set(dir(builtins))


def documents() -> list[Path]:
    out = [ROOT / "README.md"]
    out += sorted((ROOT / "docs").glob("*.md"))
    return out


def python_blocks() -> list[Block]:
    """Every fenced ```python block of the documents, in order."""
    blocks = []
    for doc in documents():
        text = doc.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            before = text[: m.start()]
            line = before.count("\n") + 1
            previous = before.rstrip("\n").rsplit("\n", 1)[-1]
            marker = NOT_RUN.fullmatch(previous.strip())
            headings = re.findall(r"^#+ (.*)$", before, re.M)
            blocks.append(
                Block(
                    path=str(doc.relative_to(ROOT)),
                    line=line,
                    heading=headings[-1] if headings else "",
                    code=m.group("code"),
                    not_run=marker.group("why") if marker else None,
                )
            )
    return blocks


def spark_blocks() -> list[Block]:
    """The blocks to run with a SparkSession ``spark``."""
    return [b for b in python_blocks() if b.not_run is None and b.free_names() == {"spark"}]


def plain_blocks() -> list[Block]:
    """The blocks that run with nothing given."""
    return [b for b in python_blocks() if b.not_run is None and not b.free_names()]
