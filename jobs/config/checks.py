"""The filesystem side of a configuration, checked before Spark starts: the landing directory
can be read, the lake can be written and is named by a path every engine reads alike.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jobs.config.pipeline import Pipeline
from jobs.config.values import PipelineConfigError
from jobs.reading.files.paths import has_scheme
from sinks.lake import AZURE_SCHEMES, REFUSED_SCHEMES, azure_place, supported_spellings


def check_paths(pipeline: Pipeline) -> None:
    """The filesystem side of a configuration, before Spark starts: each landing directory exists
    and can be listed and read (or ``source.create_path`` says to create it), and the lake is a
    directory that is writable or can be created, named by a plain local path
    (:func:`check_lake_name`). A landing directory with a URI scheme (an object store) is left
    to the storage layer. Raises :class:`PipelineConfigError` naming the setting."""
    for one in pipeline.input_list:  # each input's landing directory
        source, setting = one.source, one.source_setting("path")
        landing = Path(source.path)
        if not source.is_landing or has_scheme(source.path):
            continue
        if landing.exists() and not landing.is_dir():
            raise PipelineConfigError(setting, f"{landing} is a file, not a directory")
        if landing.is_dir() and not os.access(landing, os.R_OK | os.X_OK):
            raise PipelineConfigError(setting, f"{landing} cannot be read (permissions)")
        if not landing.exists() and not source.create_path:
            raise PipelineConfigError(
                setting,
                f"{landing.absolute()} does not exist (a typo?). Create it, or set "
                f"{one.source_setting('create_path')} = true to have runs create it empty",
            )
    check_lake_name(pipeline)
    if pipeline.run_in_store:
        check_checkpoint_reachable(pipeline.run_location)
    for setting, folder in _directories(pipeline):
        if folder.exists() and not folder.is_dir():
            raise PipelineConfigError(setting, f"{folder} is a file, not a directory")
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        if not existing.is_dir():
            raise PipelineConfigError(setting, f"{folder} cannot be created: {existing} is a file")
        if not os.access(existing, os.W_OK | os.X_OK):
            what = "is not writable" if existing == folder else f"cannot be created in {existing}"
            raise PipelineConfigError(setting, f"{folder} {what} (permissions)")


def _directories(pipeline: Pipeline) -> list[tuple[str, Path]]:
    """The local directories a run writes, by the setting naming them: the lake (unless in an
    object store) and the checkpoint directory (:attr:`Pipeline.run_path`, unless a URI of
    another filesystem)."""
    local = [] if pipeline.lake_in_store else [("lake", pipeline.lake_path)]
    if (pipeline.checkpoint is not None or pipeline.lake_in_store) and not pipeline.run_in_store:
        local.append(("checkpoint", pipeline.run_path))
    return local


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")
# Characters Spark, Hadoop or delta-rs read as part of a URI or a glob pattern, not of a name:
# a lake path holding one is read or written somewhere else than where it is.
_UNSAFE = re.compile(r"[%#?*\[\]{}\\^|:\x00-\x1f\x7f]")


STORE_SCHEMES = ("s3", *AZURE_SCHEMES)
"""Object stores a lake may be in: the schemes tested end to end (docs/cluster.md)."""


def check_lake_name(pipeline: Pipeline) -> None:
    """Refuse a lake that every engine would not read alike: a URI of a scheme other than
    :data:`STORE_SCHEMES` (or without a bucket or container; another Azure spelling, ``adl://``,
    ``wasbs://``..., is refused naming the supported two), a checkpoint URI without a place
    (``gs://``) or of a scheme Spark has no filesystem for (``s3://``: Spark's is ``s3a://``), or
    a local path with a character Spark, Hadoop or delta-rs take for URI or glob syntax (``%``,
    ``#``, ``?``, ``:``, ...). Raises :class:`PipelineConfigError` naming ``lake`` or
    ``checkpoint``."""
    if _URI.match(pipeline.lake):
        scheme, _, rest = pipeline.lake.partition("://")
        if scheme.lower() in REFUSED_SCHEMES:
            raise PipelineConfigError(
                "lake", f"{pipeline.lake}: {scheme}:// is not supported: {supported_spellings()}"
            )
        if scheme in AZURE_SCHEMES:
            try:
                azure_place(pipeline.lake)
            except ValueError as e:
                raise PipelineConfigError("lake", str(e)) from None
        elif scheme not in STORE_SCHEMES or not rest.split("/")[0]:
            raise PipelineConfigError(
                "lake",
                f"{pipeline.lake}: a lake is a local directory (or a shared filesystem mounted "
                "as one), s3://BUCKET/PREFIX (S3 and compatible stores), az://CONTAINER/PREFIX "
                "or abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX (Azure storage); "
                "other schemes (gs, hdfs, ...) are not supported yet",
            )
    else:
        _check_local_name("lake", pipeline.lake_path)
    if pipeline.checkpoint is not None:
        if pipeline.run_in_store:
            check_checkpoint_uri(pipeline.checkpoint)
        else:
            _check_local_name("checkpoint", pipeline.run_path)


CHECKPOINT_SCHEMES = {
    "hdfs": "hdfs://NAMENODE/PATH (Hadoop's HDFS client, in Spark's Hadoop jars)",
    "viewfs": "viewfs://CLUSTER/PATH (Hadoop's, in Spark's Hadoop jars)",
    "gs": "gs://BUCKET/PATH (Google's gcs-connector-hadoop3 jar)",
    "s3a": "s3a://BUCKET/PATH (hadoop-aws and the AWS SDK bundle jars)",
    "abfs": "abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH (hadoop-azure jar)",
    "abfss": "abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH (hadoop-azure jar)",
    "wasb": "wasb[s]://CONTAINER@ACCOUNT.blob.core.windows.net/PATH (hadoop-azure jar)",
    "wasbs": "wasbs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH (hadoop-azure jar)",
}
"""The checkpoint URIs a run takes, by scheme: what the URI looks like and which connector
must be on Spark's classpath (docs/cluster.md, "The checkpoint"); ``file://`` and plain paths
are local."""


def check_checkpoint_reachable(uri: str) -> None:
    """Refuse a checkpoint URI whose bucket (container, host) does not exist or cannot be
    reached with the environment's credentials, in one line naming ``checkpoint``, before Spark
    starts: one request through the Python filesystem
    (:class:`jobs.checkpoint.files.CheckpointFiles`)."""
    from urllib.parse import urlparse

    from jobs.checkpoint.files import CheckpointFiles

    parsed = urlparse(uri)
    root = f"{parsed.scheme}://{parsed.netloc}/"
    try:
        files = CheckpointFiles.at(root)
        found = files.store.entry(files.root)
    except Exception as e:  # the store's own error: credentials, a host that does not answer
        said = " ".join(str(e).split())[:300]
        raise PipelineConfigError(
            "checkpoint", f"{uri} cannot be reached ({type(e).__name__}: {said})"
        ) from None
    if found is None or not found.is_dir:
        raise PipelineConfigError(
            "checkpoint",
            f"{uri}: {parsed.netloc or root} does not exist (or these credentials cannot see "
            "it): create the bucket or container first",
        )


def check_checkpoint_uri(uri: str) -> None:
    """Refuse a checkpoint URI Spark could not keep a checkpoint at: a scheme without a Hadoop
    filesystem for it (``s3://``: Spark's is ``s3a://``; ``az://``: a delta-rs spelling) or
    without a place (a bucket, a host). Raises :class:`PipelineConfigError` naming
    ``checkpoint``."""
    scheme, _, rest = uri.partition("://")
    scheme = scheme.lower()
    known = "; ".join(CHECKPOINT_SCHEMES.values())
    if scheme not in CHECKPOINT_SCHEMES:
        raise PipelineConfigError(
            "checkpoint",
            f"{uri}: Spark keeps a checkpoint on a filesystem of Hadoop's: a local path, "
            f"file:///PATH, or {known}",
        )
    if scheme not in ("hdfs", "viewfs") and not rest.split("/")[0]:  # hdfs:///: fs.defaultFS
        raise PipelineConfigError(
            "checkpoint", f"{uri} names no bucket, container or host: {CHECKPOINT_SCHEMES[scheme]}"
        )


def _check_local_name(setting: str, path: Path) -> None:
    bad = _UNSAFE.search(str(path))
    if bad:
        raise PipelineConfigError(
            setting,
            f"{str(path)!r} contains {bad.group()!r}, which Spark, Hadoop or delta-rs read as "
            "URI or glob syntax (they would use another directory): choose a path without any "
            "of % # ? * [ ] { } \\ ^ | : or control characters",
        )
