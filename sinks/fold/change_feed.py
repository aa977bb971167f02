"""The change feed of the ``current`` view: Delta's change data feed, on for every view.

What it records. Every commit of the materializer into ``current`` is one MERGE, or an append of
no rows when the pane-log versions it folded change no window. With
``delta.enableChangeDataFeed = true`` delta-rs writes, with each MERGE, the rows it changed into
``_change_data`` files named by the commit. :func:`read_changes` returns those of view versions
``since..until`` in the view's columns plus

* ``_change_type``: ``insert`` (a window appeared in the view), ``update_preimage`` and
  ``update_postimage`` (a window's row before and after: a refinement, a retraction folded in),
  ``delete`` (a window left the view: a session merged into a larger one, a window withdrawn);
* ``_commit_version``, ``_commit_timestamp``: the view version of the commit, and its time.

The invariant consumers rely on: applying the changes of versions ``since..until`` in version
order to the view as of ``since - 1`` (the empty view for ``since = 0``) gives the view as of
``until``. Within a version each (key, window) changes at most once: one ``insert``, one
``delete``, or one pre/post image pair. Commits that change no row (creation, turning the feed
on, compaction, vacuum, empty folds) have no changes.

Where it starts. The table property ``panestore.changeFeedFrom`` is the first view version the
feed covers: 0 for a view created with it, and for a view created before panestore recorded
changes, the version of the commit that turned the feed on (:func:`ensure_change_feed`, which
the materializer calls when it opens the view). The log entries of old versions go after the
table's log retention (``delta.logRetentionDuration``, 30 days by default: delta-rs deletes
expired entries when it writes a checkpoint), and their changes with them. Reading from a
version before the first available one (:func:`first_available_version`) is refused naming it.
Retention and vacuum: docs/running.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from sinks.lake import (
    CHANGE_FEED_FROM_PROPERTY,
    CHANGE_FEED_PROPERTY,
    CHANGE_FIELDS,
    CHANGE_TYPE,
    CHANGE_TYPES,
    COMMIT_VERSION,
    InvalidRequest,
    LakeError,
    ViewSpec,
    arrow_schema,
    folder_names,
    join_location,
    open_view,
    plain_schema,
    plain_table,
)

LOG_ENTRY = re.compile(r"^(\d{20})\.json$")


def first_change_version(dt) -> int | None:
    """The first view version the change feed of ``dt`` (the ``current`` table) covers; None
    when the feed is off or was turned on outside panestore (no recorded start)."""
    conf = dt.metadata().configuration or {}
    if conf.get(CHANGE_FEED_PROPERTY, "").lower() != "true":
        return None
    start = conf.get(CHANGE_FEED_FROM_PROPERTY)
    return int(start) if start is not None and start.isdigit() else None


def earliest_logged_version(path: str) -> int | None:
    """The oldest version whose log entry is still in the Delta log of the table at ``path`` (a
    local path or a URI: the log is listed); None for an empty log."""
    log = folder_names(join_location(path, "_delta_log"))
    found = [int(m.group(1)) for m in map(LOG_ENTRY.match, log) if m]
    return min(found, default=None)


def first_available_version(dt, path: str) -> tuple[int | None, str]:
    """The first view version whose changes can be read (None: the feed is off), and why it is
    not earlier: the feed was turned on then, or the log entries before it expired."""
    first = first_change_version(dt)
    if first is None:
        return None, "the change feed is off"
    logged = earliest_logged_version(path)
    if logged is not None and logged > first:
        return logged, (
            "the log entries of earlier versions are gone: they expire after the table's log "
            "retention (delta.logRetentionDuration, 30 days by default)"
        )
    if first > 0:
        return first, "the view was created before panestore recorded changes"
    return first, "the view's first version"


def ensure_change_feed(dt) -> int | None:
    """Turn the change feed of ``dt`` on if it is not, recording where it starts; returns that
    version when this call turned it on (None: it already was).

    One commit sets both properties; the recorded start is the version that commit is
    expected to get. Only commits that change no row (compaction, vacuum) can come between
    reading the version and committing, as one materializer runs at a time, so the feed is
    complete from the recorded start either way.
    """
    if first_change_version(dt) is not None:
        return None
    start = dt.version() + 1
    dt.alter.set_table_properties(
        {CHANGE_FEED_PROPERTY: "true", CHANGE_FEED_FROM_PROPERTY: str(start)},
        raise_if_not_exists=False,
    )
    return start


def changes_schema(view_schema: pa.Schema) -> pa.Schema:
    """The schema of the changes of a view of ``view_schema``: its columns (nullable), then
    ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
    fields = [f.with_nullable(True) for f in plain_schema(view_schema)]
    return pa.schema(fields + [pa.field(n, t) for n, t in CHANGE_FIELDS])


@dataclass(frozen=True)
class Changes:
    """The changes of view versions ``since..until`` (``until = since - 1``: none to read),
    ordered by version, key, window and change type (pre-image before post-image)."""

    table: pa.Table
    since: int
    until: int

    def line(self) -> str:
        if self.until < self.since:
            return (
                f"changes: no view version after {self.until}; continue with --since {self.since}"
            )
        return (
            f"changes: view versions {self.since}..{self.until}: {self.table.num_rows} rows; "
            f"continue with --since {self.until + 1}"
        )


def read_changes(spec: ViewSpec, since: int, until: int | None = None) -> Changes:
    """The changes of the ``current`` view from version ``since`` to ``until`` (default: the
    latest version), both included. ``since`` may be one past the latest version (a consumer
    that has read everything): no changes. Refused with a :class:`LakeError` saying what to do:
    a view without a change feed; an :class:`InvalidRequest` for ``since`` before the feed's
    first version or after the latest version, ``until`` before ``since`` or after the latest
    version."""
    dt = open_view(spec)
    path = spec.table_path("current")
    latest = dt.version()
    first, why = first_available_version(dt, path)
    if first is None:
        raise LakeError(
            f"the current view at {path} records no changes yet: run `panestore materialize "
            f"CONF` once (it turns the change feed on) and read the changes from then on"
        )
    if since < first:
        raise InvalidRequest(
            f"--since {since}: the changes of the current view at {path} are available from "
            f"view version {first} on ({why}). Read the view in full as of a version V >= "
            f"{first} (`panestore query CONF ... --as-of view:V`), then follow the changes "
            f"with --since V+1"
        )
    if since > latest + 1:
        raise InvalidRequest(
            f"--since {since} is after the latest version of the current view at {path} "
            f"({latest}). A view rebuilt by `panestore materialize --rebuild` is a new table "
            f"whose versions start again at 0: read it in full, then follow it from its "
            f"latest version + 1"
        )
    if until is not None and not since <= until <= latest:
        raise InvalidRequest(
            f"--until {until}: expected a view version from --since ({since}) to the latest "
            f"version ({latest})"
        )
    until = latest if until is None else until
    schema = changes_schema(arrow_schema(dt))
    if until < since:
        return Changes(schema.empty_table(), since, until)
    try:
        read = pa.table(dt.load_cdf(starting_version=since, ending_version=until).read_all())
    except Exception as e:  # delta-rs: a log entry or change file of a version is gone
        raise LakeError(
            f"the changes of view versions {since}..{until} of {path} cannot be read ({e}). "
            f"Changes older than the table's retention may be gone (docs/running.md): read the "
            f"view in full and follow it from its latest version + 1"
        ) from None
    return Changes(ordered(spec, plain_table(read).select(schema.names).cast(schema)), since, until)


def ordered(spec: ViewSpec, changes: pa.Table) -> pa.Table:
    """``changes`` sorted by version, key, window and change type (:data:`CHANGE_TYPES`)."""
    rank = pc.index_in(changes.column(CHANGE_TYPE), value_set=pa.array(CHANGE_TYPES))
    by = [COMMIT_VERSION, *spec.keys, "window_start_us", "window_end_us", "_rank"]
    ranked = changes.append_column("_rank", rank)
    return ranked.sort_by([(c, "ascending") for c in by]).drop_columns(["_rank"])
