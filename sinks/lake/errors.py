"""The errors of a pipeline's lake; each message says what is wrong and what to do."""

from __future__ import annotations


class LakeError(RuntimeError):
    """A problem with the pipeline's tables; the message says what and what to do."""


class TableMissing(LakeError):
    """A table the operation needs does not exist (yet)."""


class ForeignTable(LakeError):
    """A table that is not this pipeline's (another pipeline's, or not panestore's)."""


class ConfigMismatch(LakeError):
    """A table written under another configuration of this pipeline."""


class FormatMismatch(LakeError):
    """A table of another lake format version (or of none)."""


class LakeBusy(LakeError):
    """Another process holds a lock of the lake (sinks.lake.lock)."""


class MaterializerBusy(LakeBusy):
    """Another materializer holds the lock."""


class NoConditionalWrites(LakeError):
    """The lake's object store does not refuse a second create of an object (it ignores or
    rejects conditional writes, or returns no ETag), so it cannot lock the lake: only a pipeline
    whose user guarantees one writer at a time (``single_writer = true``) can use it."""


class UpstreamChanged(LakeError):
    """The upstream pane log a downstream reads is not the table it has read so far (the
    upstream was rebuilt, or is gone): continuing would skip or repeat its rows."""


class InvalidRequest(LakeError):
    """A request the lake cannot answer as asked: a version or key that is not there, SQL that
    does not parse or bind, an output that cannot be written. Nothing was written."""


class SourceTableError(LakeError):
    """A Delta table read as a pipeline's source (``jobs.reading.delta_table.log``) cannot be read
    as asked: no table, a version no longer in its log, a commit that deletes or updates rows, a
    feature this reader cannot read, a data file vacuumed before it was read. The message is one
    line naming the table, the version and what to do."""


class SourceTableChanged(UpstreamChanged, SourceTableError):
    """The Delta table at a source's URI is not the table whose versions the pipeline has read
    (it was deleted and created anew, or is gone): its versions count from 0 again."""


class PaneValueOutOfRange(LakeError):
    """A pane's value does not fit its pane-log column (an integer sum beyond 64 bits, say): the
    batch that fires it cannot be committed."""


class AccumulatorNotStorable(LakeError):
    """A pane's accumulator (or a window's, merged by the fold) holds a value the lake has no
    text for (:mod:`panes.accumulator_text`): the batch that fires it, or the fold that merges
    it, commits nothing, and the message names the window and the aggregate."""


class FoldValueOutOfRange(LakeError):
    """A window's value folded from its panes does not fit its ``current`` view column (in
    discarding mode, panes whose integer values each fit the pane log sum beyond 64 bits): the
    materializer commits nothing, and every materialize stops at that window."""
