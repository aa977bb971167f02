"""Stopping a run on SIGINT (Ctrl-C) or SIGTERM without losing or repeating anything.

While :func:`stop_on_signals` is active, the first SIGINT or SIGTERM only records the request: the
run's polling loop (:func:`jobs.driver.runs._await_query`) lets the batch in flight finish, stops
the streaming query between batches and returns, so ``panestore run`` folds and exits 0. A second
signal asks for the batch in flight to be abandoned (its commits are transactional and a replay
skips what was committed, so that is safe too); after it the signals' default action is back, and a
third ends the process at once, as a kill would, which a lake also survives.

The handler does nothing else: work in a signal handler runs in the middle of whatever the main
thread was doing, and PySpark's own SIGINT handler, which calls into the JVM from there, fails
with ``RuntimeError: reentrant call`` when the main thread is itself waiting for the JVM on the
same py4j connection (``query.awaitTermination``).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class StopRequest:
    """The stop signals received so far (in order); :meth:`note` is the signal handler."""

    received: list[int] = field(default_factory=list)

    def note(self, signum: int, frame: FrameType | None = None) -> None:
        """Record ``signum``; from the second signal on, restore the default actions."""
        self.received.append(signum)
        if len(self.received) == 2:
            for s in STOP_SIGNALS:
                signal.signal(s, signal.SIG_DFL)

    @property
    def requested(self) -> bool:
        """A stop was asked for: end the run after the batch in flight."""
        return bool(self.received)

    @property
    def abandon(self) -> bool:
        """A second signal came: stop now, abandoning the batch in flight."""
        return len(self.received) >= 2

    @property
    def name(self) -> str:
        """The first signal's name (``SIGINT``), or ``""`` when none came."""
        return signal.Signals(self.received[0]).name if self.received else ""


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Within the block, SIGINT and SIGTERM are recorded in the yielded :class:`StopRequest`
    (see the module doc); the previous handlers are restored after it. Main thread only."""
    stop = StopRequest()
    previous = {s: signal.signal(s, stop.note) for s in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def listen_again(stop: StopRequest) -> None:
    """Make ``stop`` the stop signals' handler again, as :func:`stop_on_signals` made it: a
    SparkContext started since installs a SIGINT handler of its own (main thread only; after a
    second signal the default actions stay, as :meth:`StopRequest.note` set them)."""
    if not stop.abandon:
        for s in STOP_SIGNALS:
            signal.signal(s, stop.note)
