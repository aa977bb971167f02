"""How many random examples a test draws: every one in the suite, a third of them in the
edit-test loop (``./dev test --fast`` loads the Hypothesis profile ``fast``, tests/conftest.py)."""

from __future__ import annotations

import os

FAST = os.environ.get("PANESTORE_HYPOTHESIS") == "fast"


def seeds(start: int, stop: int) -> range:
    """The random seeds ``start`` .. ``stop - 1``; in the edit-test loop, the first third."""
    count = stop - start
    return range(start, start + (max(1, count // 3) if FAST else count))
