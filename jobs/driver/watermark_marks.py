"""Watermark marks: how a writer of the landing directory notes its progress in event time.

With ``watermark.policy = "writer_noted"`` (:mod:`jobs.driver.writers_watermark`) the job's
watermark comes from the writers, not from the data. A writer lands its data files as usual and, now
and then, a *mark*: "every record I land from here on has an event time >= T" (Pravega's
``noteTime``). A mark is one small JSON file in the writer's folder of the landing directory::

    <landing>/_watermarks/<writer>/<seq>.json        seq: 000000000000, 000000000001, ...

    {"format": 1, "writer": "gw-1", "seq": 7, "time": "2024-06-01T09:05:00.000000Z",
     "files": ["views/gw-1-0007.jsonl"], "noted_at": "2024-06-01T09:05:02.125000Z"}

* ``writer``: the writer's name (letters, digits, ``-``, ``_``, ``.``; not starting with ``_``
  or ``.``), the same as its folder; one process notes for a name at a time.
* ``seq``: 0, 1, 2, ... per writer, the file's name (12 digits). The job applies a writer's
  marks in this order and never skips one.
* ``time``: T, ISO-8601 UTC with µs. A writer's times never decrease.
* ``files``: the data files this writer landed since its previous mark (paths relative to the
  landing directory, ``/``-separated). They are the files the promise is *after*: the job
  applies the mark only once it has read all of them (Pravega's stream cut), so a record the
  writer landed before noting is never judged against T. This is how the job knows a file's
  writer: the mark that names it.
* ``noted_at``: the writer's clock when it noted (liveness: ``watermark.idle_timeout``).

The folder starts with ``_``: Spark's file listing and
:func:`jobs.inspection.source_elements.landing_files`
skip it, so marks are never read as data. A mark is
written atomically: a hidden temporary file, then a hard link to its final name, which fails if that
name exists (two processes noting for one writer are refused, never merged). :func:`note_watermark`
is the writer-side helper (also ``panestore note-watermark``); :class:`LandingWriter` lands files
and notes them in one object. Marks are local files (the landing directory must be on a local or
mounted filesystem).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from jobs.reading.files.paths import is_hidden

MARKS_DIR = "_watermarks"
MARK_FORMAT = 1
SEQ_DIGITS = 12
_WRITER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_MARK_NAME = re.compile(rf"\d{{{SEQ_DIGITS}}}\.json")
_FIELDS = ("format", "writer", "seq", "time", "files", "noted_at")


class MarkError(ValueError):
    """A mark that cannot be written or read; the message names the writer or the file."""


@dataclass(frozen=True)
class Mark:
    """One note of a writer: from here on, its records have event time >= ``time_us``."""

    writer: str
    seq: int
    time_us: int
    files: tuple[str, ...]
    noted_at_us: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": MARK_FORMAT,
                "writer": self.writer,
                "seq": self.seq,
                "time": format_us(self.time_us),
                "files": list(self.files),
                "noted_at": format_us(self.noted_at_us),
            }
        )


# -- time text --------------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def format_us(us: int) -> str:
    """µs since 1970 UTC -> ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return (_EPOCH + dt.timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str, what: str = "time") -> int:
    """ISO-8601 text with a zone (``Z`` or ``+HH:MM``) -> µs since 1970 UTC."""
    try:
        t = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        raise MarkError(f"{what}: {text!r} is not an ISO-8601 timestamp") from None
    if t.tzinfo is None:
        raise MarkError(f"{what}: {text!r} has no time zone (add Z for UTC)")
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def now_us() -> int:
    """The wall clock in µs since 1970 UTC."""
    return time.time_ns() // 1000


# -- reading ----------------------------------------------------------------------------------


def check_writer(name: str) -> str:
    if not isinstance(name, str) or not _WRITER.fullmatch(name):
        raise MarkError(
            f"writer name {name!r}: use letters, digits, '-', '_' and '.', not "
            "starting with '_' or '.' (at most 128 characters)"
        )
    return name


def marks_dir(landing: str | os.PathLike[str]) -> Path:
    return Path(landing) / MARKS_DIR


def mark_path(landing: str | os.PathLike[str], writer: str, seq: int) -> Path:
    return marks_dir(landing) / writer / f"{seq:0{SEQ_DIGITS}d}.json"


def parse_mark(text: str, where: str) -> Mark:
    """A mark from its JSON text; ``where`` (its path) names it in errors."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise MarkError(f"{where}: not JSON ({e})") from None
    if not isinstance(data, dict) or sorted(data) != sorted(_FIELDS):
        raise MarkError(f"{where}: a mark has exactly the fields {list(_FIELDS)}")
    if data["format"] != MARK_FORMAT:
        raise MarkError(
            f"{where}: mark format {data['format']!r}, this version reads {MARK_FORMAT}"
        )
    seq, files = data["seq"], data["files"]
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise MarkError(f"{where}: seq must be an integer >= 0, got {seq!r}")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise MarkError(f"{where}: files must be a list of paths")
    try:
        writer = check_writer(data["writer"])
        return Mark(
            writer,
            seq,
            parse_time(data["time"], f"{where}: time"),
            tuple(_relative(f) for f in files),
            parse_time(data["noted_at"], f"{where}: noted_at"),
        )
    except MarkError as e:
        raise MarkError(f"{where}: {e}") from None


def mark_seqs(landing: str | os.PathLike[str], writer: str) -> list[int]:
    """The sequence numbers of ``writer``'s mark files, ascending."""
    folder = marks_dir(landing) / writer
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name[:SEQ_DIGITS]) for p in folder.iterdir() if _MARK_NAME.fullmatch(p.name)
    )


def read_mark(landing: str | os.PathLike[str], writer: str, seq: int) -> Mark:
    path = mark_path(landing, writer, seq)
    mark = parse_mark(path.read_text(encoding="utf-8"), str(path))
    if mark.writer != writer or mark.seq != seq:
        raise MarkError(
            f"{path}: names writer {mark.writer!r} seq {mark.seq}, not its own "
            f"folder and name ({writer!r}, {seq})"
        )
    return mark


def writer_names(landing: str | os.PathLike[str]) -> list[str]:
    """The writers with a folder of marks, sorted."""
    root = marks_dir(landing)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _WRITER.fullmatch(p.name))


def _relative(name: str) -> str:
    """A data file's name relative to the landing directory, checked (``/``-separated)."""
    parts = PurePosixPath(name.replace(os.sep, "/")).parts
    if not parts or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise MarkError(f"file {name!r}: give the path relative to the landing directory")
    if is_hidden(parts[-1]) or any(is_hidden(p, folder=True) for p in parts[:-1]):
        raise MarkError(f"file {name!r}: hidden and '_' names are not data (the job skips them)")
    return "/".join(parts)


# -- writing ----------------------------------------------------------------------------------


def note_watermark(
    landing: str | os.PathLike[str],
    writer: str,
    time_us: int,
    files: Iterable[str] = (),
    *,
    noted_at_us: int | None = None,
) -> Path:
    """Note that every record ``writer`` lands from now on has event time >= ``time_us``.

    ``files``: the data files it landed since its previous note (relative to ``landing``; they
    must be there already). Refuses a time before the writer's previous one, a missing or hidden
    file, and a concurrent note of the same writer (its sequence number taken). Returns the mark.
    """
    check_writer(writer)
    names = tuple(_relative(str(f)) for f in files)
    missing = [f for f in names if not (Path(landing) / f).is_file()]
    if missing:
        raise MarkError(
            f"writer {writer}: {missing} not in {landing}: land the files first, then note"
        )
    seqs = mark_seqs(landing, writer)
    seq = seqs[-1] + 1 if seqs else 0
    if seqs:
        last = read_mark(landing, writer, seqs[-1])
        if time_us < last.time_us:
            before = f"is before its previous note {format_us(last.time_us)}"
            raise MarkError(
                f"writer {writer}: time {format_us(time_us)} {before}; a writer's "
                "times never decrease"
            )
    mark = Mark(writer, seq, time_us, names, now_us() if noted_at_us is None else noted_at_us)
    final = mark_path(landing, writer, seq)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(mark.to_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, final)  # no-clobber: fails if another process took this seq
    except FileExistsError:
        raise MarkError(
            f"writer {writer}: mark {seq} was written by another process meanwhile; "
            "one process notes for a writer at a time"
        ) from None
    finally:
        tmp.unlink()
    return final


class LandingWriter:
    """One writer of a landing directory: lands data files atomically and notes its progress,
    each mark naming the files landed since the previous one (so none is forgotten)."""

    def __init__(self, landing: str | os.PathLike[str], writer: str) -> None:
        self.landing = Path(landing)
        self.writer = check_writer(writer)
        self.unnoted: list[str] = []

    def land(self, name: str, data: bytes | str | Sequence[str]) -> Path:
        """Land ``data`` (bytes, text, or lines) as ``name`` (relative): hidden temporary
        file, then rename, so the job never reads half a file."""
        rel = _relative(name)
        final = self.landing / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(data, (bytes, str)):
            data = "".join(line + "\n" for line in data)
        body = data.encode() if isinstance(data, str) else data
        tmp = final.parent / f".{final.name}.{os.getpid()}.tmp"
        tmp.write_bytes(body)
        os.replace(tmp, final)
        self.unnoted.append(rel)
        return final

    def note(self, time_us: int, *, noted_at_us: int | None = None) -> Path:
        """Note ``time_us`` naming the files landed since the last note."""
        path = note_watermark(
            self.landing, self.writer, time_us, self.unnoted, noted_at_us=noted_at_us
        )
        self.unnoted = []
        return path
