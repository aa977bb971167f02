"""The pieces of a fold in worker processes, each piece in a fresh one, so the fold's memory is
that of one piece whatever the backlog.

A fold in pieces (:mod:`sinks.fold.fold_plan`) reads the backlog once to plan and spill it, then
folds piece after piece. In one process the resident set crept from piece to piece: the native
allocators of the three libraries a piece goes through (Arrow's mimalloc, DuckDB's, delta-rs's
jemalloc) each kept pages that no flush returned (measured: +60 MiB over the first ten pieces of
a 10M-row fold, the 30M fold's peak 1.31x the 3M fold's; docs/decisions.md, "The fold at any
volume"). A process that exits gives everything back.

:class:`PieceWorkers` starts a *worker server* (``python -m sinks.fold.piece_workers``), a fresh
interpreter that imports the fold's modules once and then, for each task, forks a child that runs
the task and exits: the fold's planning and spilling and each of its pieces
(:func:`sinks.fold.materializer.plan_and_spill`, :func:`sinks.fold.materializer.fold_piece_task`),
one after the other. The server never opens a table itself (delta-rs's runtime refuses a fork
after it started), so forking it is safe and costs milliseconds, not an interpreter's start.
Tasks and results travel pickled by ``cloudpickle`` (a pipeline's own
``CombineFn`` defined in a script or a notebook included).

Killed at any moment, nothing outlives the fold: the server exits when the materializer's end of
its pipe closes (the materializer died), killing the running child; a child is also killed by
the kernel when the server dies (``PR_SET_PDEATHSIG`` on Linux). Each piece is one commit
carrying its own transaction, so a child killed mid-piece committed nothing of it, and the next
fold finishes the plan (:func:`sinks.fold.fold_plan.fold_in_progress`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import cloudpickle  # type: ignore[import-untyped]

_LENGTH = struct.Struct("<Q")
PR_SET_PDEATHSIG = 1


class WorkerDied(RuntimeError):
    """A worker process ended without a result (killed, or out of memory)."""


# -- the materializer's side ----------------------------------------------------------------------


class PieceWorkers:
    """The worker server of this process: :meth:`run` sends a task, waits for the child that
    runs it, returns its result or raises its exception. One server a process
    (:meth:`shared`), started on the first fold in pieces and kept for the next (its start, an
    interpreter importing the libraries, is paid once); it ends with the process. A task takes
    the environment and ``sys.path`` of the moment it is sent (credentials set since the server
    started included). Tasks of several threads run one after the other.

    >>> PieceWorkers.shared().run(sum, [1, 2, 3])
    6
    """

    _shared: PieceWorkers | None = None
    _shared_lock = threading.Lock()

    PRELOAD = ("deltalake", "duckdb", "sinks.fold.materializer")
    """What the server imports before it forks: what every task of the fold needs."""

    def __init__(self) -> None:
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._server = subprocess.Popen(
            [sys.executable, "-m", "sinks.fold.piece_workers", *self.PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    @classmethod
    def shared(cls) -> PieceWorkers:
        """This process's server (started now if there is none, or the last one ended)."""
        with cls._shared_lock:
            workers = cls._shared
            if workers is None or not workers.alive:
                workers = cls._shared = cls()
                atexit.register(workers.close)
            return workers

    @property
    def alive(self) -> bool:
        """Whether the server runs and belongs to this process (not to a process this one was
        forked from)."""
        return self._owner == os.getpid() and self._server.poll() is None

    def close(self) -> None:
        """End the server (it exits at the end of its input)."""
        server = self._server
        if self._owner != os.getpid() or server.stdin is None or server.stdin.closed:
            return
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover (a child stuck in native code)
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()

    def run(self, task: Callable[..., Any], *args: Any) -> Any:
        """``task(*args)`` in a fresh child process of the server."""
        server = self._server
        assert server.stdin is not None and server.stdout is not None
        payload = cloudpickle.dumps((task, args))
        with self._lock:
            _send(server.stdin, (dict(os.environ), list(sys.path), payload))
            got = _receive_fd(server.stdout.fileno())
        if got is None:
            raise WorkerDied("the fold's worker server ended")
        kind, value = got
        if kind == "ok":
            return value
        if kind == "error":
            raise value
        raise WorkerDied(f"the fold's worker process ended without a result: {value}")


# -- the pipe's frames ----------------------------------------------------------------------------


def _frame(value: Any) -> bytes:
    """``value`` pickled, behind its length: what one read of :func:`_receive_fd` takes."""
    data = cloudpickle.dumps(value)
    return _LENGTH.pack(len(data)) + data


def _send(stream: IO[bytes], value: Any) -> None:
    stream.write(_frame(value))
    stream.flush()


def _read_exactly(fd: int, size: int) -> bytes | None:
    parts, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _receive_fd(fd: int) -> Any | None:
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    data = _read_exactly(fd, _LENGTH.unpack(head)[0])
    return None if data is None else pickle.loads(data)


# -- the server -----------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux; elsewhere the server's
    end of input kills it)."""
    with contextlib.suppress(OSError, AttributeError):  # (not Linux)
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child(message: tuple[dict[str, str], list[str], bytes], out: int, server: int) -> None:
    _die_with_parent()
    if os.getppid() != server:  # (the server died before the kernel was told)
        os._exit(1)
    environ, path, payload = message
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path
    try:
        task, args = pickle.loads(payload)  # (the pipeline's own modules: imported here)
        reply: tuple[str, Any] = ("ok", task(*args))
    except BaseException as e:  # (any failure is the fold's to report)
        reply = ("error", e)
    try:
        frame = _frame(reply)
    except Exception:  # (an exception that does not pickle: its text)
        frame = _frame(("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))
    with os.fdopen(out, "wb") as stream:
        stream.write(frame)


def serve(commands: int, replies: int) -> None:
    """The worker server's loop: a task read from ``commands``, run in a forked child, its
    result written to ``replies``; the end of ``commands`` (the materializer ended or died)
    ends the server and kills a running child."""
    while True:
        message = _receive_fd(commands)  # (plain data: the task stays bytes until the child)
        if message is None:
            return
        read_end, write_end = os.pipe()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child: measured by the fold's tests)
            os.close(read_end)
            try:
                _child(message, write_end, server)
            finally:
                os._exit(0)
        os.close(write_end)
        reply = _await_child(pid, read_end, commands)
        if reply is None:
            return
        _write_all(replies, reply)


def _await_child(pid: int, result: int, commands: int) -> bytes | None:
    """The child's reply, as the frame it wrote (passed on unread); None when the materializer's
    input ended meanwhile (the child is killed)."""
    chunks: list[bytes] = []
    with selectors.DefaultSelector() as watch:
        watch.register(result, selectors.EVENT_READ)
        watch.register(commands, selectors.EVENT_READ)
        while True:
            ready = {key.fd for key, _ in watch.select()}
            if commands in ready and not os.read(commands, 1):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
            if result in ready:
                chunk = os.read(result, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    os.close(result)
    _, status = os.waitpid(pid, 0)
    frame = b"".join(chunks)
    if len(frame) > _LENGTH.size:  # (the child wrote its frame whole before it exited)
        return frame
    if os.WIFSIGNALED(status):
        return _frame(("died", f"killed by signal {os.WTERMSIG(status)}"))
    return _frame(("died", f"exit status {os.waitstatus_to_exitcode(status)}"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


if __name__ == "__main__":
    import importlib

    for name in sys.argv[1:]:  # (PieceWorkers.PRELOAD: a forked child starts with them loaded)
        importlib.import_module(name)
    replies = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # (what a task prints is not a reply)
    serve(sys.stdin.fileno(), replies)
