"""A small pipeline for tests that need one but not its particulars: string key ``k``,
timestamp ``ts``, hourly windows, ``n = count()`` over JSON-lines at ``landing``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.config.load import pipeline_from_dict
from jobs.config.pipeline import Pipeline


def small_pipeline(name: str, lake: Path, landing: Path, **source: Any) -> Pipeline:
    """The pipeline ``name`` over ``landing`` into ``lake``; ``source`` adds ``[source]``
    settings (``create_path=True``, ...)."""
    return pipeline_from_dict(
        {
            "name": name,
            "lake": str(lake),
            "keys": ["k"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "aggregates": {"n": "count()"},
            "source": {
                "format": "jsonl",
                "path": str(landing),
                "schema": {"k": "string", "ts": "timestamp"},
                **source,
            },
        }
    )
