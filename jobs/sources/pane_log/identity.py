"""Which upstream pane log a downstream has read, and whether the path still holds that table.

A downstream pipeline (``[source] format = "pane_log"``) remembers how far it has read its
upstream in Spark's offset log: pane-log versions (:mod:`jobs.sources.pane_log.driver`). A version
number means something only in the table it was read from: an upstream rebuilt the documented
way (its lake moved aside, run again) writes a new pane log whose versions start again at 0,
and a downstream that went on from its old version would skip the new table's first versions
(or read nothing until the new table caught up). So an offset also names the table: its Delta
table id (``metaData.id``, new for every table created), ``{"version": v, "table": id}``.

Before a downstream's query starts, :func:`check_upstream` compares the newest offset that
names a table with the pane log at the upstream's path, and refuses another table, or none,
with :class:`sinks.lake.errors.UpstreamChanged` saying how to rebuild the downstream too. Offsets
written by panestore versions without table ids are accepted when every version they name
exists in the current table and was committed before Spark wrote that offset (as far as the
table's history and the offset files' times tell); otherwise the run is refused the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from jobs.checkpoint.logs import RecordedOffset, recorded_offsets
from jobs.checkpoint.offsets import TableHead, head_at
from jobs.config.pipeline import Pipeline
from jobs.reading.pane_log.upstream import commit_times_ms
from sinks.lake import UpstreamChanged

CLOCK_SLACK_MS = 2_000
"""How much later than an offset file's modification time the commit of a version it names may
be stamped and still count as committed before it (file times can be this coarse)."""


@dataclass(frozen=True)
class Chain:
    """A downstream and its upstream, as the refusals name them."""

    downstream: str
    set_aside: str  # how to set the downstream's lake aside (Pipeline.set_aside)
    upstream: str
    pane_log: str

    def changed(self, what: str, *, rebuilt: bool = True) -> UpstreamChanged:
        """The refusal: ``what`` happened, and how to rebuild the downstream (one line)."""
        how = (
            f"{self.set_aside} and run it again: it reads "
            f"the upstream's pane log from its first version (docs/running.md, 'Recovering a "
            f"lake')"
        )
        if rebuilt:
            return UpstreamChanged(f"{what}. Rebuild {self.downstream} too: {how}")
        return UpstreamChanged(
            f"{what}. Restore the upstream's lake or run it; if the upstream is rebuilt, rebuild "
            f"{self.downstream} too: {how}"
        )


def table_to_read(
    offsets: Sequence[RecordedOffset],
    head: TableHead,
    commit_times: Callable[[int], Mapping[int, int]],
    chain: Chain,
) -> str | None:
    """The table id the downstream's next batch may read (None: there is no pane log yet, and it
    has read nothing), given its recorded ``offsets`` and the pane log's ``head`` now;
    ``commit_times(since)`` gives the commit times (ms) of the pane log's versions from
    ``since`` on. Raises :class:`UpstreamChanged` (see the module doc)."""
    read = [r for r in offsets if r.offset.version >= 0]
    if not read:
        return head.table  # nothing read yet: whatever table is there is the start
    named = [r.offset for r in offsets if r.offset.table is not None]
    if named:
        mine = named[-1]
        if head.table is None:
            raise chain.changed(
                f"the upstream {chain.upstream!r} has no pane log at {chain.pane_log} now, but "
                f"{chain.downstream} has read its table {mine.table} up to version "
                f"{mine.version}",
                rebuilt=False,
            )
        if head.table != mine.table:
            raise chain.changed(
                f"the upstream {chain.upstream!r} was rebuilt: its pane log {chain.pane_log} is "
                f"table {head.table} now, not table {mine.table} that {chain.downstream} has "
                f"read up to version {mine.version}; reading on would skip the new table's "
                f"first versions"
            )
        return mine.table
    return _adopt(offsets, head, commit_times, chain)


def _adopt(
    offsets: Sequence[RecordedOffset],
    head: TableHead,
    commit_times: Callable[[int], Mapping[int, int]],
    chain: Chain,
) -> str | None:
    """The current table, if the offsets without table ids can have been read from it."""
    cannot = f"{chain.downstream}'s checkpoint names pane-log versions without their table"
    deepest = max(r.offset.version for r in offsets)
    if head.table is None:
        raise chain.changed(
            f"the upstream {chain.upstream!r} has no pane log at {chain.pane_log} now, but "
            f"{chain.downstream} has read it up to version {deepest}",
            rebuilt=False,
        )
    if head.version < deepest:
        raise chain.changed(
            f"{cannot}, up to version {deepest}, and the upstream's pane log "
            f"{chain.pane_log} ends at version {head.version}: the upstream was rebuilt"
        )
    previous = -1
    for r in offsets:
        if r.offset.version < previous:
            raise chain.changed(
                f"{cannot}, and they went back from version {previous} to "
                f"{r.offset.version} at batch {r.batch_id}: the upstream was rebuilt while "
                f"{chain.downstream} read it"
            )
        previous = r.offset.version
    read = [r for r in offsets if r.offset.version >= 0]
    times = commit_times(min(r.offset.version for r in read))
    for r in read:
        committed = times.get(r.offset.version)
        if committed is None:
            raise chain.changed(
                f"{cannot}, and the upstream's pane log history no longer holds version "
                f"{r.offset.version} to check them against (log cleaned up)"
            )
        if committed > r.written_ms + CLOCK_SLACK_MS:
            raise chain.changed(
                f"{cannot}, and version {r.offset.version} of the upstream's pane log "
                f"{chain.pane_log} was committed after batch {r.batch_id} read it: the "
                f"upstream was rebuilt"
            )
    return head.table


def check_upstream(pipeline: Pipeline, of_input: str | None = None) -> str | None:
    """The table id of the upstream pane log ``pipeline`` (a ``pane_log`` source) may read on
    (:func:`table_to_read` over its checkpoint and its upstream's pane log now); raises
    :class:`UpstreamChanged` if the upstream is not the table the pipeline has read;
    ``of_input``: the input of several the pane log is (its offsets only)."""
    up = pipeline.source.upstream
    if up is None:
        raise ValueError(f"pipeline {pipeline.name} does not read a pane log")
    chain = Chain(pipeline.name, pipeline.set_aside, up.name, up.pane_log)
    return table_to_read(
        [r for r in recorded_offsets(pipeline.checkpoint_path) if r.offset.of_input(of_input)],
        head_at(up.pane_log),
        lambda since: commit_times_ms(up.pane_log, since),
        chain,
    )
