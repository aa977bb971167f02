"""Lake locks: one materializer, and one run of the job, at a time per lake.

On a local (or mounted) lake a lock is an exclusive ``flock`` on the file
``<lake>/_locks/<name>.lock``. The operating system decides who holds it, atomically, and
releases it when its holder's process ends however it ends (a SIGKILL, a crash, a reboot): there
is no stale lock to detect and so no race in detecting one. The file itself stays; while held it
names its holder (pid, host, start time) so a refusal can say who runs. On a shared filesystem the
lock is as good as the filesystem's locking (NFS propagates it between hosts).

On an object store (``s3://...``) there is no ``flock``: the lock is the object
``<lake>/_locks/<name>.lock`` holding its holder's name, created only if absent (a conditional
write: one contender wins) and held as a *lease*: the holder rewrites it every
:data:`RENEW_S` seconds, each time only if it is still the version it wrote (compare-and-swap on
its ETag), and deletes it when done. A holder that dies stops renewing; once the object is older
than :data:`LEASE_S` (by the store's clock, with :data:`CLOCK_SLACK_S` for the contender's), the
next contender replaces it, again by compare-and-swap, so of several only one takes it over. A
holder that finds its lease taken over (it could not renew in time) knows it lost the lock
(:attr:`LakeLock.lost`). A holder that was a process of the contender's own machine need not be
waited for: the lock names its process (pid and start time) and the machine's process table
(boot id and PID namespace, on Linux), so when that process is gone (a SIGKILLed run rerun at
once, the common case on one machine) the contender takes the lock over at once, by the same
compare-and-swap. A holder of another machine, or where that cannot be told, is waited for.

The lease relies on the store refusing a second create of an object (``If-None-Match: *``).
S3 and most compatibles do; a store that ignores the condition would let two contenders both
"create" the lock. So once the lock object is created, the holder checks that a second create of
it is refused; a store that accepts it (or rejects conditional requests, or returns no ETag)
cannot lock the lake: :class:`~sinks.lake.errors.NoConditionalWrites`, naming the pipeline option
``single_writer = true``. With ``single_writer`` a lock on an object store locks nothing: the
user guarantees that one writer runs at a time. (A local lake's ``flock`` always works: it
locks whatever ``single_writer`` says.)

The refused contender raises a :class:`~sinks.lake.errors.LakeBusy` naming the holder and writes
nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sinks.lake.errors import LakeBusy, LakeError, MaterializerBusy, NoConditionalWrites
from sinks.lake.object_store import is_object_store, join_location, one_line, store_at
from sinks.lake.spec import ViewSpec

# Not under ``_control``: the job reads every file there as a control row.
LOCKS = "_locks"
LEASE_S = 60.0
"""An object-store lock not renewed for this long is free (its holder died)."""
RENEW_S = 15.0
"""How often the holder of an object-store lock renews it."""
CLOCK_SLACK_S = 5.0
"""How far the contender's clock may be from the store's when it judges a lease expired."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the holder wrote it into the lock file."""

    pid: int | None
    host: str | None
    since: float | None

    def describe(self) -> str:
        if self.pid is None:
            return "its holder has not written its name yet"
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since or 0))
        return f"pid {self.pid} on {self.host}, since {since}"


class LakeLock:
    """The lock ``<lake>/_locks/<name>.lock`` (see the module doc); a context manager.

    ``what`` names the holder in the refusal (``"another materializer"``), ``busy`` is the
    error class raised. ``single_writer``: on an object store, lock nothing (the user guarantees
    one writer at a time; see the module doc).

    >>> with LakeLock("/tmp/lake", "run", "another run of this pipeline"):
    ...     pass
    """

    def __init__(
        self,
        lake: str,
        name: str,
        what: str,
        busy: type[LakeBusy] = LakeBusy,
        *,
        lease_s: float = LEASE_S,
        renew_s: float = RENEW_S,
        single_writer: bool = False,
    ) -> None:
        self.what, self.busy = what, busy
        self._fd: int | None = None
        self._lease: _Lease | None = None
        self.unlocked = single_writer and is_object_store(lake)
        """Whether this lock locks nothing (``single_writer`` on an object store)."""
        self._entered = False
        key = f"{LOCKS}/{name}.lock"
        self.path = join_location(lake.removeprefix("file://"), key)
        if is_object_store(lake) and not self.unlocked:
            self._lease = _Lease(lake, key, lease_s, renew_s)

    @property
    def held(self) -> bool:
        """Whether this process holds the lock (an unlocked lock: inside its block)."""
        if self.unlocked:
            return self._entered
        return self._fd is not None or (self._lease is not None and self._lease.etag is not None)

    @property
    def lost(self) -> bool:
        """An object-store lock that another contender took over: its holder could not renew
        it within the lease (see the module doc)."""
        return self._lease is not None and self._lease.lost

    def _refusal(self, holder: Holder) -> LakeBusy:
        return self.busy(
            f"{self.what} is running ({holder.describe()}; lock {self.path}). "
            "Nothing was written; retry when it has finished."
        )

    def __enter__(self) -> LakeLock:
        if self.unlocked:
            self._entered = True
            return self
        if self._lease is not None:
            try:
                holder = self._lease.acquire(_me())
            except OSError as e:  # the store's answer: no such bucket, no access, unreachable
                raise LakeError(
                    f"cannot take the lock {self.path}: {one_line(e, limit=400)}"
                ) from None
            if holder is not None:
                raise self._refusal(holder)
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._refusal(self.holder()) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        with contextlib.suppress(OSError):  # the name only informs (a full disk: no name)
            os.ftruncate(fd, 0)
            os.pwrite(fd, _me(), 0)
        return self

    def holder(self) -> Holder:
        """The holder the lock names (all None while it names nobody)."""
        if self._lease is not None:
            return self._lease.holder()
        try:
            with open(self.path, "rb") as f:
                return _holder(f.read())
        except OSError:
            return Holder(None, None, None)

    def __exit__(self, *exc: Any) -> None:
        self._entered = False
        if self._lease is not None:
            self._lease.release()
            return
        fd, self._fd = self._fd, None
        if fd is None:
            return
        # Never unlink the file: a contender may hold it open, waiting to lock it; it would then
        # lock a file that is no longer the lock while a third process creates a new one.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # releases the lock


def _me() -> bytes:
    """The holder's name, as a lock holds it: its process and where that process can be seen."""
    pid = os.getpid()
    me = {
        "pid": pid,
        "host": socket.gethostname(),
        "since": time.time(),
        "processes": _process_table(),
        "started": _started(pid),
    }
    return json.dumps(me).encode()


def _process_table() -> str | None:
    """This machine's process table: its boot and PID namespace (Linux), or None. Two processes
    that see the same one see each other's pids."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot: ``/proc/PID/stat``'s 22nd field),
    or None if there is no such process (or no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # fields from the 3rd on, after the name


def _gone(data: bytes) -> bool:
    """Whether the holder named by ``data`` was a process of this machine's process table that
    has ended (its pid is free, or taken by a process started later)."""
    try:
        named = json.loads(data)
        same_table = named["processes"] is not None and named["processes"] == _process_table()
        pid, started = int(named["pid"]), named["started"]
    except (ValueError, KeyError, TypeError):
        return False
    return same_table and started is not None and _started(pid) != started


def _lease_alive(meta: Any, data: bytes, lease_s: float = LEASE_S) -> bool:
    """Whether the lease object (``meta``: its store metadata, ``data``: its contents) is held:
    renewed within the lease (with the clock slack) by a holder not known to be gone."""
    age = time.time() - meta["last_modified"].timestamp()
    return age <= lease_s + CLOCK_SLACK_S and not _gone(data)


def holder_in_store(lake: str, name: str) -> tuple[bool, Holder]:
    """Whether a live holder has the lock ``name`` of a lake in an object store (its lease is
    renewed and its process not known to be gone: what a contender would find), and who the
    lock object names; no lock is taken. Two requests at most (a GET of the lock object)."""
    import obstore as obs

    try:
        found = obs.get(store_at(lake), f"{LOCKS}/{name}.lock")
    except FileNotFoundError:
        return False, Holder(None, None, None)
    data = bytes(found.bytes())
    return _lease_alive(found.meta, data), _holder(data)


def _holder(data: bytes) -> Holder:
    try:
        named = json.loads(data)
        return Holder(int(named["pid"]), str(named["host"]), float(named["since"]))
    except (ValueError, KeyError, TypeError):
        return Holder(None, None, None)


def holder_here(lake: str, name: str) -> tuple[bool, Holder] | None:
    """Whether a process holds the lock ``name`` of a lake on a local or shared filesystem, as
    this machine sees it (``/proc/locks``; no lock is taken, not even for a moment), and who the
    lock file names; None where that cannot be told (no ``/proc/locks``). A holder on another
    host of a shared filesystem is not seen."""
    path = Path(lake) / LOCKS / f"{name}.lock"
    if not path.exists():
        return False, Holder(None, None, None)
    try:
        st = path.stat()
        proc = Path("/proc/locks").read_text()
        data = path.read_bytes()
    except OSError:
        return None
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    held = any(
        len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == dev
        for parts in (line.split() for line in proc.splitlines())
    )
    return held, _holder(data)


class _Lease:
    """An object-store lock held as a lease (see the module doc)."""

    def __init__(self, lake: str, key: str, lease_s: float, renew_s: float) -> None:
        self.store = store_at(lake)
        self.key = key
        self.path = join_location(lake, key)
        self.lease_s, self.renew_s = lease_s, renew_s
        self.etag: str | None = None  # the version this holder wrote last (None: not held)
        self.lost = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, me: bytes) -> Holder | None:
        """Take the lock (None) or say who holds it."""
        import obstore as obs
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        for _ in range(3):  # the holder may release it between our create and our look
            try:
                self._hold(self._put(me, "create")["e_tag"], me)
                return None
            except AlreadyExistsError:
                pass
            try:
                found = obs.get(self.store, self.key)
            except FileNotFoundError:
                continue
            meta, data = found.meta, bytes(found.bytes())
            if _lease_alive(meta, data, self.lease_s):
                return _holder(data)
            try:  # expired, or its holder is gone: take it over, unless another contender did
                put = self._put(me, {"e_tag": meta["e_tag"]})
            except (PreconditionError, FileNotFoundError):
                continue
            self._hold(put["e_tag"], me)
            return None
        return self.holder()

    def _put(self, me: bytes, mode: Any) -> Any:
        """``obstore.put`` of the lock with a conditional ``mode``; a store that rejects
        conditional writes raises :class:`NoConditionalWrites`."""
        import obstore as obs

        try:
            return obs.put(self.store, self.key, me, mode=mode)
        except Exception as e:
            if _rejects_conditions(e):
                raise self._cannot_lock("rejects conditional writes") from None
            raise

    def _hold(self, etag: str | None, me: bytes) -> None:
        """Hold the lock just written (version ``etag``), once the store proved it refuses a
        second create (the module doc), and keep renewing it."""
        if etag is None:
            self._abandon()
            raise self._cannot_lock("returns no ETag for a conditional write")
        self._probe(me)
        self.etag, self.lost = etag, False
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, args=(me,), daemon=True)
        self._renewer.start()

    def _probe(self, me: bytes) -> None:
        """Check that the store refuses a second create of the lock object; else remove the
        object and raise :class:`NoConditionalWrites`."""
        from obstore.exceptions import AlreadyExistsError

        try:
            self._put(me, "create")
        except AlreadyExistsError:
            return
        except NoConditionalWrites:
            self._abandon()
            raise
        self._abandon()
        raise self._cannot_lock("accepted a second create of the same object")

    def _abandon(self) -> None:
        """Delete the lock object this contender wrote (it cannot hold it)."""
        import obstore as obs

        with contextlib.suppress(Exception):
            obs.delete(self.store, self.key)

    def _cannot_lock(self, why: str) -> NoConditionalWrites:
        return NoConditionalWrites(
            f"the object store of the lake cannot lock it: it {why} (lock {self.path}), so two "
            "writers could both take the lock. Nothing was written. If one writer at a time is "
            "guaranteed (one run of the pipeline and one materializer, never two at once), set "
            "`single_writer = true` in the pipeline's configuration: the lake is then not "
            "locked, and keeping writers apart is up to you."
        )

    def _renew(self, me: bytes) -> None:
        import obstore as obs
        from obstore.exceptions import PreconditionError

        while not self._stop.wait(self.renew_s):
            etag = self.etag
            if etag is None:
                return
            try:
                self.etag = obs.put(self.store, self.key, me, mode={"e_tag": etag})["e_tag"]
            except (PreconditionError, FileNotFoundError):
                self.lost, self.etag = True, None  # taken over: another holder has it now
                return
            except Exception:  # the store unreachable for a moment: try again next time
                continue

    def holder(self) -> Holder:
        import obstore as obs

        try:
            return _holder(bytes(obs.get(self.store, self.key).bytes()))
        except FileNotFoundError:
            return Holder(None, None, None)

    def release(self) -> None:
        """Stop renewing and delete the lock if it is still this holder's version."""
        import obstore as obs

        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        etag, self.etag = self.etag, None
        if etag is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if obs.head(self.store, self.key)["e_tag"] == etag:
                obs.delete(self.store, self.key)


def _rejects_conditions(error: Exception) -> bool:
    """Whether an ``obstore`` error says the store does not support a conditional write."""
    from obstore.exceptions import NotSupportedError

    if isinstance(error, NotSupportedError):
        return True
    text = str(error)
    return "501 Not Implemented" in text or "<Code>NotImplemented</Code>" in text


def materializer_lock(spec: ViewSpec) -> LakeLock:
    """The materializer's lock of ``spec``'s lake (none with ``spec.single_writer`` on an
    object store)."""
    return LakeLock(
        spec.lake,
        "materializer",
        "another materializer",
        MaterializerBusy,
        single_writer=spec.single_writer,
    )
