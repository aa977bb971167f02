"""A landing directory's naming rules: which files are input, and a path named literally to Spark
and DuckDB (:mod:`.paths`), read by the landing source (:mod:`jobs.sources.files`), the
configuration's path check, ``panestore verify`` and the writers' watermark.

>>> from jobs.reading.files import is_hidden
>>> is_hidden("_watermarks", folder=True)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.reading.files.paths import (
        duckdb_literal,
        has_scheme,
        is_hidden,
        landing_files,
        landing_path_problem,
        spark_path,
    )

__all__ = [
    "duckdb_literal",
    "has_scheme",
    "is_hidden",
    "landing_files",
    "landing_path_problem",
    "spark_path",
]
__getattr__ = lazy_exports(__name__, __file__)
