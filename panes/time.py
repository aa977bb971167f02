"""Time in panestore: integer microseconds, and the textual form of durations.

Timestamps and durations inside :mod:`panes` are plain ``int`` microseconds (Spark's timestamp
precision). Public constructors also accept :class:`datetime.timedelta` for durations; they are
normalized with :func:`to_micros` at the edge so the hot paths only ever see ints.

Durations have a compact textual form used by trigger expressions and config files: a number
followed by a unit, optionally repeated (``90s``, ``5m``, ``2h``, ``1h30m``, ``250ms``, ``10us``).
"""

from __future__ import annotations

import re
from datetime import timedelta

BEGINNING_OF_TIME: int = -(2**63)
"""The smallest timestamp: where a new watermark starts."""

END_OF_TIME: int = 2**63 - 1
"""The largest timestamp. A watermark at the end of time closes every window."""

MICROS_PER_SECOND = 1_000_000

UNITS: dict[str, int] = {
    "us": 1,
    "ms": 1_000,
    "s": MICROS_PER_SECOND,
    "m": 60 * MICROS_PER_SECOND,
    "h": 3_600 * MICROS_PER_SECOND,
    "d": 86_400 * MICROS_PER_SECOND,
}

_PART = re.compile(r"(\d+)(us|ms|s|m|h|d)")

Duration = int | timedelta | str


def to_micros(value: Duration, what: str = "duration") -> int:
    """Normalize a duration given as int microseconds, a ``timedelta`` or text (``"5m"``,
    :func:`parse_duration`) to int microseconds.

    >>> to_micros(timedelta(minutes=1)), to_micros("1m"), to_micros(5)
    (60000000, 60000000, 5)
    """
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int of microseconds, a timedelta or text, not bool")
    if isinstance(value, int):
        return value
    if isinstance(value, timedelta):
        return (value.days * 86_400 + value.seconds) * MICROS_PER_SECOND + value.microseconds
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
    raise TypeError(
        f"{what} must be an int of microseconds, a timedelta or text, not {type(value).__name__}"
    )


def parse_duration(text: str) -> int:
    """Parse ``90s``, ``5m``, ``1h30m``, ``250ms``, ``10us`` into microseconds.

    >>> parse_duration("1h30m")
    5400000000
    """
    if not text or _PART.sub("", text) != "":
        raise ValueError(
            f"not a duration: {text!r} (expected e.g. 90s, 5m, 2h, 1h30m, 250ms, 10us)"
        )
    return sum(int(n) * UNITS[unit] for n, unit in _PART.findall(text))


def format_duration(micros: int) -> str:
    """The canonical textual form: the largest unit that divides the duration exactly.

    >>> format_duration(90_000_000), format_duration(3_600_000_000), format_duration(0)
    ('90s', '1h', '0s')
    """
    if micros < 0:
        raise ValueError(f"durations are not negative: {micros}")
    if micros == 0:
        return "0s"
    for unit in ("d", "h", "m", "s", "ms", "us"):
        size = UNITS[unit]
        if micros % size == 0:
            return f"{micros // size}{unit}"
    raise AssertionError("unreachable: 'us' divides every int")
