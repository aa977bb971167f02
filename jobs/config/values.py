"""What every setting of a pipeline's configuration shares: the error that names a setting, the
type check, durations and names.

>>> parse_duration_setting("watermark.delay", "5m")
300000000
"""

from __future__ import annotations

import re
from typing import Any

from panes.time import to_micros


class PipelineConfigError(ValueError):
    """An invalid pipeline configuration; ``field`` names the offending setting."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        self.message = message
        super().__init__(f"{field_name}: {message}")


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A name the configuration accepts for a pipeline, a column or an aggregate."""


def expect(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    """Refuse ``value`` unless it is of ``kind`` (a bool is no number, a number no path)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise PipelineConfigError(name, f"must be {what}, got {value!r}")


_SIZE = re.compile(r"(\d+)\s*([KMGT]i?B|B)?", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_UNITS.update({f"{p}IB": 1024 ** (i + 1) for i, p in enumerate("KMGT")})


def parse_size_setting(name: str, value: Any) -> int:
    """The size setting ``name`` in bytes, from an int (bytes) or text (``"512MiB"``, ``"2GiB"``,
    ``"100MB"``): :class:`PipelineConfigError` naming ``name`` for anything else or zero.

    >>> parse_size_setting("fold_memory", "512MiB"), parse_size_setting("x", 4096)
    (536870912, 4096)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is None:
            raise PipelineConfigError(
                name, f"expected a size like '512MiB', '2GiB' or a number of bytes, got {value!r}"
            )
        size = int(match.group(1)) * _UNITS[(match.group(2) or "").upper()]
    if size < 1:
        raise PipelineConfigError(name, f"must be at least 1 byte, got {value!r}")
    return size


def format_size(size: int) -> str:
    """A size as :func:`parse_size_setting` reads it back: whole MiB/GiB when it is one.

    >>> format_size(512 * 1024 * 1024), format_size(1000)
    ('512MiB', '1000')
    """
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


Duration = int | str
"""A duration as a configuration gives it: µs (an int), or text like ``"5m"``, ``"1h30m"``."""


def parse_duration_setting(name: str, value: Any) -> int:
    """The duration setting ``name`` in µs, from an int (µs), text (``"5m"``, ``"2h"``: the
    forms of :func:`panes.parse_duration`) or a ``timedelta``, as a configuration file and the
    Python API accept it (the model's :func:`panes.time.to_micros`). Raises
    :class:`PipelineConfigError` naming ``name`` for anything else or a negative one.

    >>> from datetime import timedelta
    >>> parse_duration_setting("watermark.delay", "5m"), parse_duration_setting("x", 1_000)
    (300000000, 1000)
    >>> parse_duration_setting("allowed_lateness", timedelta(hours=1))
    3600000000
    """
    try:
        us = to_micros(value.strip() if isinstance(value, str) else value, name)
    except TypeError:
        raise PipelineConfigError(name, f"expected a duration like '5m', got {value!r}") from None
    except ValueError as e:
        raise PipelineConfigError(name, str(e).removeprefix(f"{name}: ")) from None
    if us < 0:
        raise PipelineConfigError(name, "must not be negative")
    return us
