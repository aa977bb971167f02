"""The checkpoint's files, on any filesystem Spark's checkpoint may be on: one small typed class,
:class:`CheckpointFiles`, through which panestore makes every read and write of its own of the
run's directory (Spark's checkpoint, the operator's state, the run's own small files).

``checkpoint`` may be a local path (or a shared filesystem mounted as one), a ``file://`` URI, or
the URI of any filesystem Spark's Hadoop connectors write a checkpoint to (``gs://``,
``s3a://``, ``abfss://``, ``hdfs://``, ...). Three stores serve the same five operations (list a
folder, tell what a name is, read a file, write one whole, delete one):

* :class:`LocalStore`: the local filesystem (a plain path, ``file://``), with ``os``;
* :class:`HadoopStore`: the JVM's Hadoop ``FileSystem`` of a running Spark session, through
  py4j: the driver during a run, with the very connector, settings and credentials Spark's own
  checkpoint uses;
* :class:`ArrowStore`: a Python filesystem (``pyarrow.fs``): the commands that start no Spark
  (``status``, ``check``) and Spark's Python workers (the operator's state files, which the
  tasks read and write themselves), with the standard credentials of each cloud's environment.

Whole or not at all, on each: a local file or an HDFS-like file is written under a temporary
name and renamed over the old one (a rename is atomic there); an object in a bucket (``gs``,
``s3a``, ``abfss``, ...) is written by one upload that the store makes visible whole when it
completes, so a killed writer leaves the old object or none. :meth:`CheckpointFiles.create`
writes a name only if it is absent (a conditional create where the store has one: Hadoop's
``create(path, overwrite=false)``, a local exclusive link).

Imports nothing of ours: Spark's Python workers import it (the operator's state store).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

OBJECT_SCHEMES = frozenset(
    {"gs", "s3", "s3a", "s3n", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "cosn", "obs"}
)
"""Schemes of object stores: an object written in one upload appears whole or not at all."""


def scheme_of(location: str) -> str:
    """The URI scheme of ``location`` ('' for a plain path; ``file`` for ``file:``)."""
    parsed = urlparse(str(location))
    # a one-letter "scheme" is a Windows drive, never a URI here
    return parsed.scheme.lower() if len(parsed.scheme) > 1 else ""


def is_local(location: str) -> bool:
    """Whether ``location`` is on the local filesystem (a plain path or a ``file:`` URI)."""
    return scheme_of(location) in ("", "file")


def local_path(location: str) -> str | None:
    """The local path of a ``file:`` URI or a plain path; None for other schemes."""
    if not is_local(location):
        return None
    parsed = urlparse(str(location))
    return unquote(parsed.path) if parsed.scheme else str(location)


def join(location: str, *parts: str) -> str:
    """``location`` and ``parts`` joined by ``/`` (a URI keeps its scheme and authority)."""
    out = str(location).rstrip("/") or "/"
    for part in parts:
        part = str(part).strip("/")
        if part:
            out = f"{out}/{part}" if out != "/" else f"/{part}"
    return out


@dataclass(frozen=True)
class Entry:
    """What a name is: a file (with its size and modification time, ms) or a folder."""

    is_dir: bool
    size: int = 0
    modified_ms: int = 0


class Store(Protocol):
    """The five operations of a filesystem, on full locations (a path or a URI)."""

    def names(self, folder: str) -> list[str] | None:
        """The names in ``folder`` (None: no such folder)."""

    def entry(self, location: str) -> Entry | None:
        """What ``location`` is (None: nothing)."""

    def read(self, location: str) -> bytes:
        """A file's bytes (``FileNotFoundError`` when there is none)."""

    def write(self, location: str, data: bytes, *, overwrite: bool) -> bool:
        """Write a file whole (False: ``overwrite`` is off and it exists already)."""

    def remove(self, location: str) -> None:
        """Delete a file (nothing when there is none)."""


class LocalStore:
    """The local filesystem (a plain path, a ``file:`` URI)."""

    def names(self, folder: str) -> list[str] | None:
        try:
            return os.listdir(_local(folder))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def entry(self, location: str) -> Entry | None:
        try:
            st = os.stat(_local(location))
        except (FileNotFoundError, NotADirectoryError):
            return None
        import stat

        return Entry(stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns // 1_000_000)

    def read(self, location: str) -> bytes:
        with open(_local(location), "rb") as f:
            return f.read()

    def write(self, location: str, data: bytes, *, overwrite: bool) -> bool:
        path = _local(location)
        folder, name = os.path.split(path)
        os.makedirs(folder or ".", exist_ok=True)
        tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            if overwrite:
                os.replace(tmp, path)
                return True
            try:
                os.link(tmp, path)  # fails when the name exists: a conditional create
            except FileExistsError:
                return False
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)

    def remove(self, location: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(_local(location))


def _local(location: str) -> str:
    path = local_path(location)
    if path is None:
        raise ValueError(f"{location} is not on the local filesystem")
    return path


class ArrowStore:
    """A Python filesystem (``pyarrow.fs``) for one URI's filesystem (:func:`arrow_filesystem`)."""

    def __init__(self, location: str) -> None:
        self.fs, self._root, self._prefix = arrow_filesystem(location)
        self._atomic_put = scheme_of(location) in OBJECT_SCHEMES

    def _path(self, location: str) -> str:
        if not location.startswith(self._prefix):
            raise ValueError(f"{location} is not under {self._prefix}")
        return self._root + location[len(self._prefix) :]

    def names(self, folder: str) -> list[str] | None:
        from pyarrow import fs as pafs

        path = self._path(folder).rstrip("/")
        if self.fs.get_file_info(path).type != pafs.FileType.Directory:
            return None
        infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return [i.base_name for i in infos if i.base_name]  # not a folder's own marker

    def entry(self, location: str) -> Entry | None:
        from pyarrow import fs as pafs

        info = self.fs.get_file_info(self._path(location).rstrip("/"))
        if info.type == pafs.FileType.NotFound:
            return None
        if info.type == pafs.FileType.Directory:
            return Entry(True)
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        return Entry(False, info.size or 0, mtime)

    def read(self, location: str) -> bytes:
        with self.fs.open_input_stream(self._path(location)) as f:
            return bytes(f.read())

    def write(self, location: str, data: bytes, *, overwrite: bool) -> bool:
        path = self._path(location)
        if not overwrite and self.entry(location) is not None:
            return False
        if self._atomic_put:  # one upload: visible whole when it completes
            with self.fs.open_output_stream(path) as f:
                f.write(data)
            return True
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        self.fs.move(tmp, path)
        return True

    def remove(self, location: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._path(location))


def arrow_filesystem(location: str) -> tuple[Any, str, str]:
    """(a ``pyarrow.fs`` filesystem, the path of ``location`` in it, the URI prefix that path
    replaces) for a URI: ``gs://`` (Google's default credentials; ``STORAGE_EMULATOR_HOST``:
    an emulator, anonymously), ``s3a://``/``s3://`` (the standard AWS environment),
    ``abfss://container@account.dfs.core.windows.net/`` (Azure: ``AZURE_STORAGE_*``), and any
    other scheme ``pyarrow.fs.FileSystem.from_uri`` knows (``hdfs://`` with libhdfs)."""
    from pyarrow import fs as pafs

    parsed = urlparse(location)
    scheme = parsed.scheme.lower()
    prefix = f"{parsed.scheme}://{parsed.netloc}"
    if scheme == "gs":
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator:
            scheme_, _, host = emulator.rpartition("://")
            gcs = pafs.GcsFileSystem(
                anonymous=True, endpoint_override=host, scheme=scheme_ or "http"
            )
        else:
            gcs = pafs.GcsFileSystem()
        return gcs, parsed.netloc, prefix
    if scheme in ("s3", "s3a", "s3n"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        options: dict[str, Any] = {}
        if endpoint:
            ep = urlparse(endpoint)
            options = {"endpoint_override": ep.netloc or endpoint, "scheme": ep.scheme or "https"}
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            options["region"] = region
        return pafs.S3FileSystem(**options), parsed.netloc, prefix
    if scheme in ("abfs", "abfss", "wasb", "wasbs"):
        container, _, host = parsed.netloc.partition("@")
        account = host.split(".")[0] or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
        azure = pafs.AzureFileSystem(
            account_name=account, account_key=os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
        )
        return azure, container, prefix
    fs, path = pafs.FileSystem.from_uri(location)
    path = "/" + path.lstrip("/") if isinstance(fs, pafs.HadoopFileSystem) else path
    tail = parsed.path.rstrip("/")
    root = path[: len(path) - len(tail)] if tail and path.endswith(tail) else path
    return fs, root, prefix


class HadoopStore:
    """The JVM's Hadoop ``FileSystem`` of a running Spark session (through py4j): the connector
    and settings Spark's checkpoint itself uses."""

    def __init__(self, spark: Any, location: str) -> None:
        self._jvm = spark._jvm
        self._gateway = spark.sparkContext._gateway
        self._conf = spark._jsc.hadoopConfiguration()
        self.fs = self._path(location).getFileSystem(self._conf)
        self._atomic_put = scheme_of(location) in OBJECT_SCHEMES

    def _path(self, location: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(location)

    def names(self, folder: str) -> list[str] | None:
        path = self._path(folder)
        if not self.fs.exists(path) or not self.fs.getFileStatus(path).isDirectory():
            return None
        return [str(s.getPath().getName()) for s in self.fs.listStatus(path)]

    def entry(self, location: str) -> Entry | None:
        path = self._path(location)
        if not self.fs.exists(path):
            return None
        st = self.fs.getFileStatus(path)
        return Entry(bool(st.isDirectory()), int(st.getLen()), int(st.getModificationTime()))

    def read(self, location: str) -> bytes:
        path = self._path(location)
        if not self.fs.exists(path):
            raise FileNotFoundError(location)
        stream = self.fs.open(path)
        try:
            out = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, out, 65536, False)
            return bytes(out.toByteArray())
        finally:
            stream.close()

    def write(self, location: str, data: bytes, *, overwrite: bool) -> bool:
        path = self._path(location)
        if self._atomic_put or not overwrite:
            # an object's upload is whole or nothing; create(overwrite=false) is conditional
            try:
                out = self.fs.create(path, overwrite)
            except Exception as e:  # py4j's error of FileAlreadyExistsException
                if not overwrite and "FileAlreadyExists" in str(e):
                    return False
                raise
            try:
                out.write(bytearray(data))
            finally:
                out.close()
            return True
        tmp = self._path(f"{location}.{uuid.uuid4().hex}.tmp")
        out = self.fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        context = self._jvm.org.apache.hadoop.fs.FileContext.getFileContext(
            path.toUri(), self._conf
        )
        rename = self._jvm.org.apache.hadoop.fs.Options.Rename
        overwrite_option = self._gateway.new_array(rename, 1)
        overwrite_option[0] = rename.OVERWRITE
        context.rename(tmp, path, overwrite_option)  # atomic on HDFS-like filesystems
        return True

    def remove(self, location: str) -> None:
        path = self._path(location)
        if self.fs.exists(path):
            self.fs.delete(path, False)


def active_spark() -> Any | None:
    """The active Spark session of this process (None: none, or a Python worker)."""
    import sys

    if "pyspark.sql" not in sys.modules:  # no session without pyspark imported
        return None
    from pyspark.sql import SparkSession

    try:
        return SparkSession.getActiveSession()
    except Exception:  # a Python worker: no JVM
        return None


def store_for(location: str, spark: Any | None = None) -> Store:
    """The store of ``location``: local for a path or ``file:``; else the JVM's Hadoop
    filesystem when a Spark session runs (``spark``, or this process's active one), else a
    Python filesystem."""
    if is_local(location):
        return LocalStore()
    spark = spark if spark is not None else active_spark()
    if spark is not None:
        return HadoopStore(spark, location)
    return ArrowStore(location)


@dataclass(frozen=True)
class CheckpointFiles:
    """A folder of the run's directory (``root``: a path or a URI) and the store it is on.

    Names below ``root`` are given as ``/``-separated relative names (``"offsets/3"``).

    >>> import tempfile
    >>> files = CheckpointFiles.at(tempfile.mkdtemp())
    >>> files.create("a/b", "one"), files.create("a/b", "two"), files.read_text("a/b")
    (True, False, 'one')
    >>> files.replace("a/b", "three")
    >>> files.read_text("a/b"), files.names("a")
    ('three', ['b'])
    """

    root: str
    store: Store

    @classmethod
    def at(cls, location: str, spark: Any | None = None) -> CheckpointFiles:
        """The files under ``location`` on its store (:func:`store_for`)."""
        location = str(location)
        if is_local(location):
            location = os.path.abspath(_local(location))
        return cls(location.rstrip("/") or "/", store_for(location, spark))

    def uri(self, name: str = "") -> str:
        """The full location of ``name`` (for messages and for Spark)."""
        return join(self.root, name) if name else self.root

    def sub(self, name: str) -> CheckpointFiles:
        """The files of the folder ``name`` (on the same store)."""
        return CheckpointFiles(self.uri(name), self.store)

    @property
    def local(self) -> bool:
        """Whether the files are on the local filesystem."""
        return isinstance(self.store, LocalStore)

    def names(self, folder: str = "") -> list[str]:
        """The names in ``folder`` (empty when there is no such folder)."""
        return self.store.names(self.uri(folder)) or []

    def is_dir(self, name: str = "") -> bool:
        """Whether ``name`` is a folder (on object stores: a prefix with objects under it)."""
        entry = self.store.entry(self.uri(name))
        return entry is not None and entry.is_dir

    def exists(self, name: str = "") -> bool:
        """Whether ``name`` is a file or a folder."""
        return self.store.entry(self.uri(name)) is not None

    def modified_ms(self, name: str) -> int:
        """When the file ``name`` was written (ms since the epoch)."""
        entry = self.store.entry(self.uri(name))
        if entry is None:
            raise FileNotFoundError(self.uri(name))
        return entry.modified_ms

    def read_bytes(self, name: str) -> bytes:
        """The bytes of the file ``name`` (``FileNotFoundError``: none)."""
        return self.store.read(self.uri(name))

    def read_text(self, name: str) -> str:
        """The text (UTF-8) of the file ``name`` (``FileNotFoundError``: none)."""
        return self.read_bytes(name).decode("utf-8")

    def read_if_any(self, name: str) -> str | None:
        """The text of the file ``name``; None when there is none."""
        try:
            return self.read_text(name)
        except FileNotFoundError:
            return None

    def replace(self, name: str, data: str | bytes) -> None:
        """Write the file ``name`` whole, in place of any older one: a writer killed at any
        moment leaves the old file (or none) or the whole new one."""
        self.store.write(self.uri(name), _bytes(data), overwrite=True)

    def create(self, name: str, data: str | bytes) -> bool:
        """Write the file ``name`` whole if there is none (False: there is one, left as it
        was)."""
        return self.store.write(self.uri(name), _bytes(data), overwrite=False)

    def remove(self, name: str) -> None:
        """Delete the file ``name`` (nothing when there is none)."""
        self.store.remove(self.uri(name))


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)
