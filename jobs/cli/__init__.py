"""The ``panestore`` command and the inspection commands (materialize, verify, query, history,
plot, report, changes, optimize, vacuum), and the demo.

>>> from jobs.cli import main
>>> main(["check", "conf/demo.toml"])  # doctest: +SKIP
0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.cli.commands import command, main
    from jobs.cli.exit_status import ExitStatus

__all__ = [
    "ExitStatus",
    "command",
    "main",
]
__getattr__ = lazy_exports(__name__, __file__)
