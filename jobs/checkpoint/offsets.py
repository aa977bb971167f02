"""A Delta table read by version: the offsets of the sources that read one, and where a table
stands.

The pane-log source (:mod:`jobs.sources.pane_log`) and the Delta-table source
(:mod:`jobs.sources.delta_table`) count their progress in versions of one table. A version
number means something only in the table it was read from (a table deleted and created again at
the same path starts again at 0), so an offset names the table too: its Delta table id
(``metaData.id``, new for every table created), ``{"version": v, "table": id}``. Spark records
the offsets in its offset log (read back by :func:`jobs.checkpoint.logs.recorded_offsets`).

Runs in Spark's Python workers (the readers' planning calls) as on the driver: it imports
nothing of ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableOffset:
    """A source's offset: it has read the versions up to ``version`` (-1: none) of the table
    ``table`` (None: no table yet, or an offset of an older panestore); ``input``: the input
    of a pipeline of several that reads it (None: the pipeline's one input), so that each
    table input's offsets are told apart in the offset log (:func:`of_input`)."""

    version: int
    table: str | None = None
    input: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TableOffset:
        table, of = data.get("table"), data.get("input")
        return cls(
            int(data["version"]),
            None if table is None else str(table),
            None if of is None else str(of),
        )

    def to_json(self) -> dict[str, Any]:
        """The offset as Spark stores it (no ``table`` key while there is no table, no
        ``input`` key for a pipeline's one input)."""
        out: dict[str, Any] = {"version": self.version}
        if self.table is not None:
            out["table"] = self.table
        if self.input is not None:
            out["input"] = self.input
        return out

    def of_input(self, name: str | None) -> bool:
        """Whether the offset is input ``name``'s (None: every offset is the one input's). An
        offset naming no input is of a lake's one table input: a lake reads a second only from
        its first run (adding an input to a lake is refused), whose offsets name their input."""
        return name is None or self.input in (None, name)


@dataclass(frozen=True)
class TableHead:
    """Where a Delta table stands: its table id (``metaData.id``, new for every table created
    at the path: a rebuilt upstream's pane log has another) and its newest version; ``table`` is
    None and ``version`` -1 when there is no table (yet)."""

    table: str | None
    version: int


def head_at(path: str) -> TableHead:
    """The table id and newest version of the Delta table at ``path`` (see
    :class:`TableHead`)."""
    from deltalake import DeltaTable

    try:
        dt = DeltaTable(path)
    except Exception:  # not created yet
        return TableHead(None, -1)
    return table_head(dt)


def table_head(dt: Any) -> TableHead:
    """The :class:`TableHead` of a loaded ``deltalake.DeltaTable``."""
    return TableHead(str(dt.metadata().id), dt.version())
