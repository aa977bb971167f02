"""Verification: the view against two independent recomputations, from the pane log and from the
accepted raw events as one batch (``panestore verify``).

>>> from sinks.verification import verify
>>> verify.__module__
'sinks.verification.view_check'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use
    from sinks.verification.batch_check import DEDUP_GROUP, VALUE, elements_table, value_fields
    from sinks.verification.view_check import Check, Report, verify

__all__ = [
    "Check",
    "DEDUP_GROUP",
    "Report",
    "VALUE",
    "elements_table",
    "value_fields",
    "verify",
]
__getattr__ = lazy_exports(__name__, __file__)
