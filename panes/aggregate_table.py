"""The table "Every aggregate at a glance" of ``docs/aggregates.md``, rendered from the registry
of built-ins (:data:`panes.combiners.AGGREGATES`): one row a :class:`panes.combine_fn.Glance`
(classes that share theirs, ``min`` and ``max``, share a row), then a filtered aggregate's and
a combiner of your own's. The words of a row are its class's :attr:`CombineFn.glance`; whether
it withdraws a value over a source with retractions follows from the class itself
(:attr:`CombineFn.can_retract`), never from the words.

The document holds the rendering between two marker lines; ``tests/panes/test_aggregate_table.py``
checks it equals :func:`render`, and ``python -m panes.aggregate_table docs/aggregates.md``
writes it there after a class changes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from panes.combine_fn import CombineFn, Filtered, Glance
from panes.combiners import AGGREGATES

HEADER = (
    "aggregate",
    "reads",
    "pane-log column",
    "exact?",
    "over a source with retractions (a pane log)",
    "path over fixed windows",
)
BEGIN = "<!-- the table below is rendered by python -m panes.aggregate_table: do not edit it -->"
END = "<!-- end of the rendered table -->"


@dataclass(frozen=True)
class Row:
    """One row of the table: the classes it speaks of and what it says of them."""

    classes: tuple[type[CombineFn], ...]
    glance: Glance

    @property
    def retracts(self) -> str:
        """Its retraction cell: the glance's own words (a wrapper's, yours), else ``yes`` when
        its classes define ``retract`` and ``refused`` (with the glance's refusal) when not."""
        if self.glance.retracts is not None:
            return self.glance.retracts
        if all(_retracts(cls) for cls in self.classes):
            return "yes"
        if any(_retracts(cls) for cls in self.classes):
            names = ", ".join(cls.name for cls in self.classes)
            raise ValueError(f"one row speaks of {names}, and only some of them retract")
        return "refused" + self.glance.refusal

    def cells(self) -> tuple[str, ...]:
        """Its cells, in the order of :data:`HEADER`."""
        g = self.glance
        return (g.spelled, g.reads, g.column, g.exact, self.retracts, g.path)


def _retracts(cls: type[CombineFn]) -> bool:
    """Whether instances of ``cls`` withdraw a value (it defines ``retract``)."""
    return cls.retract is not CombineFn.retract


def rows() -> list[Row]:
    """The table's rows: the registry's classes in its order, grouped by their glance, then a
    filtered aggregate's and a combiner of your own's."""
    grouped: dict[int, Row] = {}
    classes_: tuple[type[CombineFn], ...] = (*AGGREGATES.values(), Filtered, CombineFn)
    for cls in classes_:
        key = id(cls.glance)
        found = grouped.get(key)
        classes = (cls,) if found is None else (*found.classes, cls)
        grouped[key] = Row(classes, cls.glance)
    return list(grouped.values())


def render() -> str:
    """The table as Markdown, without the marker lines."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows()]
    return "\n".join(lines)


def rendered_in(text: str) -> str:
    """What a document's text holds between the marker lines (ValueError without them)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"the document needs the lines {BEGIN!r} and {END!r}, once each")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def with_table(text: str) -> str:
    """A document's text with :func:`render` between its marker lines."""
    rendered_in(text)  # both markers, once each
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{render()}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str]) -> int:
    """``python -m panes.aggregate_table DOC``: write the table into ``DOC``; exit 2, one line,
    for a missing argument, a file that is not there or one without the marker lines."""
    if len(argv) != 1:
        print("usage: python -m panes.aggregate_table docs/aggregates.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        text = path.read_text()
        path.write_text(with_table(text))
    except (OSError, ValueError) as e:
        print(f"panes.aggregate_table: {path}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
