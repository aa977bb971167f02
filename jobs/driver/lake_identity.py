"""Where a lake lives, recorded in the lake: a copied or moved lake is refused before Spark starts.

Spark's checkpoint (``<checkpoint>/_checkpoint``) names files and state by absolute path: its
file-source logs hold every landing and control file a batch took as a ``file://`` URI (a file
is new if that URI was never taken), and the stateful operator's metadata holds the paths of its
state schema files. So a lake that runs somewhere else than where it was created goes wrong:

* copied (``cp -a project copy``) and run in the copy: every landing file has a new URI and is
  taken again, so every event is counted twice;
* moved (``mv``): the operator looks for its state schema at the old place, creates directories
  there and fails;
* its landing directory moved or renamed (``source.path`` changed): every file is taken again;
  the same path leading to another directory (a retargeted symlink): a file whose name was taken
  before is skipped.

The first run of a lake records where it is (:class:`LakeIdentity`, in ``_lake_identity.json``
beside the checkpoint, by default in the lake): the lake (a directory with symlinks resolved:
another path to the same directory is the same lake; or an object-store URI), the directory of
the checkpoint when it is apart from the lake (``checkpoint``), and the landing directory, both
as Spark names its files (absolute) and resolved. Every
later run compares, before Spark starts, and refuses a difference naming the setting, both
places and the fixes. A lake written before this file existed is adopted where it is only if the
paths its checkpoint holds agree with that place.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from jobs.checkpoint.files import CheckpointFiles
from jobs.checkpoint.logs import SOURCES, Checkpoint, LogFile, files_of, local_path, log_files
from jobs.config.pipeline import Pipeline
from jobs.config.values import PipelineConfigError

IDENTITY_FILE = "_lake_identity.json"
IDENTITY_FORMAT = 1
"""The version of the identity file's layout (its ``format``)."""

REBUILD = (
    "or rebuild it here: move the lake aside and run again, which reprocesses every file in the "
    "landing directory (docs/running.md, 'Recovering a lake')"
)
WHY = (
    "Spark's checkpoint names the files it took and its operator state by absolute path, so a "
    "run here would take every landing file again or fail on state at the old place"
)


@dataclass(frozen=True)
class LakeIdentity:
    """Where a lake is and which landing directory it reads.

    ``lake``: the lake directory, absolute, symlinks resolved (a URI in an object store).
    ``checkpoint``: the directory holding the checkpoint, resolved (the lake's, by default).
    ``landing``: the landing
    directory as Spark names the files it takes (absolute, symlinks kept; a URI as it is), and
    ``landing_resolved``: the directory it leads to; both None for a source that is not a
    landing directory (a pane log or a Delta table, whose readers check the table they read by
    its id; a DataFrame).
    """

    lake: str
    landing: str | None
    landing_resolved: str | None
    checkpoint: str

    @classmethod
    def of(cls, pipeline: Pipeline) -> LakeIdentity:
        """Where ``pipeline``'s lake, checkpoint and landing directory are now."""
        in_store = pipeline.lake_in_store
        lake = pipeline.lake_location if in_store else str(pipeline.lake_path.resolve())
        run = pipeline.run_location if pipeline.run_in_store else str(pipeline.run_path.resolve())
        if not pipeline.source.is_landing:  # its reader checks the table it reads
            return cls(lake, None, None, run)
        if "://" in pipeline.source.path:  # an object store: Spark names its files by this URI
            return cls(lake, pipeline.source.path, pipeline.source.path, run)
        landing = Path(pipeline.source.path).absolute()
        return cls(lake, str(landing), str(landing.resolve()), run)

    def to_json(self) -> str:
        return json.dumps({"format": IDENTITY_FORMAT, **asdict(self)})

    @classmethod
    def from_json(cls, text: str) -> LakeIdentity:
        """The identity a file holds; ValueError if it is not one of this format."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != IDENTITY_FORMAT:
            raise ValueError(f"not an identity of format {IDENTITY_FORMAT}")
        try:
            lake = data["lake"]
            run = data.get("checkpoint") or lake  # recorded before checkpoints could be apart
            return cls(lake, data["landing"], data["landing_resolved"], run)
        except KeyError as e:
            raise ValueError(f"no {e.args[0]!r}") from None


def _landing(path: str | None, resolved: str | None) -> str:
    """A landing directory as messages name it."""
    if path is None:
        return "another pipeline's pane log"
    return f"{path} (-> {resolved})" if resolved != path else path


def difference(recorded: LakeIdentity, now: LakeIdentity) -> PipelineConfigError | None:
    """Why a lake recorded as ``recorded`` cannot run as ``now`` (the error to raise), or None
    if it is where it was created and reads the same landing directory."""
    if recorded.lake != now.lake:
        return PipelineConfigError(
            "lake",
            f"the lake {now.lake} was created at {recorded.lake}: it was copied or moved, and "
            f"{WHY}. Move it back to {recorded.lake}, {REBUILD}.",
        )
    if recorded.checkpoint != now.checkpoint:
        return PipelineConfigError(
            "checkpoint",
            f"the checkpoint of the lake {now.lake} was created at {recorded.checkpoint}, and is "
            f"at {now.checkpoint} now: it was copied or moved, and {WHY}. Move it back to "
            f"{recorded.checkpoint}, {REBUILD}.",
        )
    if (recorded.landing, recorded.landing_resolved) != (now.landing, now.landing_resolved):
        was = _landing(recorded.landing, recorded.landing_resolved)
        return PipelineConfigError(
            "source.path",
            f"the lake {now.lake} was created reading {was}, source.path is now "
            f"{_landing(now.landing, now.landing_resolved)}: Spark's checkpoint knows the files "
            "it took by absolute path, so files here would be taken again (or skipped where a "
            f"name repeats). Point source.path back to {was}, or start a new lake for this "
            "landing directory (move the lake aside and run again).",
        )
    return None


def checkpoint_paths(checkpoint: Checkpoint) -> list[str]:
    """Local paths the checkpoint holds, one or more per kind: the first file of each file
    source's newest log, and the state schema files of each operator's newest metadata.

    Unreadable or unexpected files contribute nothing (:func:`jobs.checkpoint.logs.check_readable`
    reports damage); only the first entry of a log is read, so a large compacted log costs
    little."""
    found: list[str] = []
    checkpoint = files_of(checkpoint)
    for source in _children(checkpoint.sub(SOURCES)):
        newest = _newest_log(source)
        if newest is not None:
            entry = _line(newest, 1)
            uri = _json_field(entry, "path")
            if isinstance(uri, str):
                found.append(uri)
    for operator in _children(checkpoint.sub("state")):
        newest = _newest_log(operator.sub("_metadata/v2"))
        if newest is not None:
            stores = _json_field(_line(newest, 1), "stateStoreInfo")
            for store in stores if isinstance(stores, list) else ():
                if isinstance(store, dict):
                    found += [
                        p for p in store.get("stateSchemaFilePaths", ()) if isinstance(p, str)
                    ]
    return [p for p in (local_path(uri) for uri in found) if p is not None]


def _children(folder: CheckpointFiles) -> list[CheckpointFiles]:
    return [folder.sub(n) for n in sorted(folder.names()) if folder.is_dir(n)]


def _newest_log(folder: CheckpointFiles) -> LogFile | None:
    """The newest file of a checkpoint log folder (``n`` or ``n.compact``)."""
    logs = log_files(folder)
    return logs[-1] if logs else None


def _line(log: LogFile, index: int) -> str:
    """Line ``index`` of a file (empty if it has fewer or cannot be read)."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    return lines[index] if index < len(lines) else ""


def _json_field(line: str, name: str) -> object:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data.get(name) if isinstance(data, dict) else None


def _within(path: str, folder: str | None) -> bool:
    return folder is not None and (path == folder or path.startswith(folder.rstrip("/") + "/"))


def adoptable(pipeline: Pipeline, now: LakeIdentity) -> PipelineConfigError | None:
    """For a lake without an identity file: why it cannot be adopted where it is now (a path
    its checkpoint holds is neither in this lake nor in the landing directory), or None."""
    run = pipeline.run_location
    for path in checkpoint_paths(pipeline.run_files.sub("_checkpoint")):
        here = _within(path, run) or _within(path, now.checkpoint) or _within(path, now.landing)
        if not here:
            return PipelineConfigError(
                "lake",
                f"the lake {pipeline.lake_location} has no {IDENTITY_FILE} and its checkpoint "
                f"names {path}, which is outside this lake and the landing directory: the lake "
                f"was copied or moved, or source.path changed, and {WHY}. Move it back, {REBUILD}.",
            )
    return None


def check_lake_identity(pipeline: Pipeline, *, record: bool = False) -> None:
    """Refuse a lake that is not where it was created, or reads another landing directory.

    Raises :class:`PipelineConfigError` (naming ``lake`` or ``source.path``) before anything
    reads the checkpoint. ``record``: a lake without an identity file (new, or written by an
    older version and adoptable, see :func:`adoptable`) gets one, written atomically; call it
    so only while holding the lake's run lock.
    """
    now = LakeIdentity.of(pipeline)
    files = pipeline.run_files
    path = files.uri(IDENTITY_FILE)
    text = files.read_if_any(IDENTITY_FILE)
    if text is not None:
        try:
            recorded = LakeIdentity.from_json(text)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise PipelineConfigError(
                "lake",
                f"{path} is damaged ({e}): restore it, or delete it to have the next run "
                "check the lake's place against its checkpoint.",
            ) from None
        error = difference(recorded, now)
    else:
        error = adoptable(pipeline, now)
    if error is not None:
        raise error
    if record and text is None:
        files.create(IDENTITY_FILE, now.to_json())
