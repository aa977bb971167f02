"""Small files written whole or not at all: a run's own, beside its checkpoint (the lake's
identity, fingerprint, state layout, the writers' state, noted landing changes) and a saved
pipeline configuration."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a hidden temporary file, flushed to disk and renamed
    over it: a run killed at any moment leaves the old file (or none) or the whole new one.
    Creates the parent folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
