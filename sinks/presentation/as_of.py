"""Time travel of a query over a lake (``panestore query --as-of``): which version of each table
it reads.

Spellings (one ``--as-of`` each, repeated, or separated by commas):

* ``TABLE:N`` — the table ``panes``, ``current``, ``late``, ``rejected`` or ``runs`` at its Delta
  version ``N`` (``view:N`` is ``current:N``);
* an ISO timestamp (``2024-06-01T10:00:00Z``; without an offset, UTC) — every table the query
  reads at its last version committed at or before that time (a table pinned by version keeps
  its version);
* ``folded:N`` — ``current`` as the pane log up to its version ``N`` folds (computed; the view
  itself may never have been in that state, e.g. to look at a fold that cannot be committed).

Every lake table a query reads must then be pinned, by name or by the time: a query that reads a
table no spelling applies to is refused naming it, never answered with that table's newest rows.

>>> AsOf.parse("panes:3, view:2").versions
(('current', 2), ('panes', 3))
>>> AsOf.parse(["2024-06-01T10:00:00Z"]).time.isoformat()
'2024-06-01T10:00:00+00:00'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sinks.lake import TABLES, InvalidRequest

ALIASES = {"view": "current"}
"""Other names of a table in a spelling."""

FOLDED = "folded"


def _expected(text: str) -> str:
    return (
        f"--as-of {text!r}: expected TABLE:N (TABLE one of {', '.join(TABLES)}; view:N is "
        "current:N), folded:N (the view folded from the pane log up to its version N) or an "
        "ISO timestamp"
    )


def _version(text: str, number: str) -> int:
    number = number.strip()
    if not number.isdigit():
        raise InvalidRequest(f"{_expected(text)}; {number!r} is not a version (0, 1, ...)")
    return int(number)


@dataclass(frozen=True)
class AsOf:
    """Which version of each table a query reads: ``versions`` (table, Delta version) pairs,
    ``time`` for every other table, ``folded``: ``current`` computed from the pane log up to
    that version."""

    versions: tuple[tuple[str, int], ...] = ()
    time: datetime | None = None
    folded: int | None = None

    @classmethod
    def parse(cls, spellings: str | datetime | Sequence[str | datetime]) -> AsOf:
        """The time travel of ``--as-of`` values (see the module doc); :class:`InvalidRequest`
        naming a value that is none of the spellings, or a table pinned twice."""
        items: list[str | datetime] = []
        for given in [spellings] if isinstance(spellings, (str, datetime)) else spellings:
            if isinstance(given, datetime):
                items.append(given)
            else:
                items += [part.strip() for part in str(given).split(",") if part.strip()]
        versions: dict[str, int] = {}
        time: datetime | None = None
        folded: int | None = None
        for item in items:
            if isinstance(item, datetime):
                at = item
            elif ":" in item and not item[:4].isdigit():  # a table's version, not a time
                name, _, number = item.partition(":")
                table = ALIASES.get(name.strip(), name.strip())
                version = _version(item, number)
                if table == FOLDED:
                    table = "current"
                if table not in TABLES:
                    raise InvalidRequest(f"{_expected(item)}; {name!r} is not a table of a lake")
                if table in versions or (table == "current" and folded is not None):
                    raise InvalidRequest(f"--as-of {item!r}: {table} is pinned twice")
                if name.strip() == FOLDED:
                    folded = version
                else:
                    versions[table] = version
                continue
            else:
                if item.isdigit():
                    raise InvalidRequest(
                        f"--as-of {item!r}: a version of which table? Name it: "
                        f"{', '.join(f'{t}:{item}' for t in TABLES)}"
                    )
                try:
                    at = datetime.fromisoformat(item.replace("Z", "+00:00"))
                except ValueError:
                    raise InvalidRequest(_expected(item)) from None
            if time is not None:
                raise InvalidRequest(f"--as-of {item!r}: one time at most")
            time = at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)
        return cls(tuple(sorted(versions.items())), time, folded)

    def pin(self, table: str) -> int | datetime | None:
        """The version (or time) ``table`` is read at; None: its newest."""
        return dict(self.versions).get(table, self.time)

    def pinned(self, table: str) -> bool:
        return self.pin(table) is not None or (table == "current" and self.folded is not None)

    def describe(self) -> str:
        """The spelling back, for messages."""
        parts = [f"{t}:{v}" for t, v in self.versions]
        if self.folded is not None:
            parts.append(f"{FOLDED}:{self.folded}")
        if self.time is not None:
            parts.append(self.time.isoformat())
        return ", ".join(parts)

    def check_reads(self, tables: Iterable[str]) -> None:
        """Refuse a query that reads a lake table no spelling pins, naming it."""
        loose = sorted(t for t in set(tables) if t in TABLES and not self.pinned(t))
        if loose:
            raise InvalidRequest(
                f"--as-of {self.describe()} does not say which version of "
                f"{' and '.join(loose)} the query reads: pin "
                f"{'them' if len(loose) > 1 else 'it'} too ("
                f"{', '.join(f'--as-of {t}:N' for t in loose)}) or travel by time (--as-of TIME)"
            )


def as_of(value: Any) -> AsOf | None:
    """``value`` (an :class:`AsOf`, its spellings, or None) as an :class:`AsOf` or None."""
    if value is None or isinstance(value, AsOf):
        return value
    return AsOf.parse(value)


__all__ = ["AsOf", "as_of"]
