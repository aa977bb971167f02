"""The view's change feed: replaying it rebuilds the view at every version; outside readers read
it; views created without it get it; bounds; maintenance keeps it."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, FixedWindows, Sessions, SlidingWindows
from sinks.fold.change_feed import read_changes
from sinks.fold.materializer import Materializer
from sinks.lake.errors import LakeError
from sinks.lake.lake_format import CHANGE_FEED_FROM_PROPERTY, CHANGE_FEED_PROPERTY
from sinks.lake.tables import open_view, table_properties
from sinks.upkeep.maintenance import optimize, vacuum
from tests.sinks.lakes import (
    Run,
    S,
    chunked,
    random_run,
    replay_changes,
    view_dict,
    view_rows,
    write_batches,
)

R = AccumulationMode.ACCUMULATING_AND_RETRACTING


def materialize_rounds(run: Run, seed: int, *, compact: bool = False, **kw) -> dict[int, dict]:
    """The run's panes written batch by batch, the view materialized after each (and, with
    ``compact``, the view compacted every other round); the view's rows at each version."""
    mat = Materializer(run.spec, **kw)
    views = {}
    for i, batch in enumerate(chunked(run, random.Random(seed))):
        write_batches(run, [batch], start=i)
        mat.run()
        if compact and i % 2:
            optimize(run.spec, tables=("current",))
        v = open_view(run.spec).version()
        views[v] = view_rows(run.spec)
    return views


def replay_by_version(run: Run, changes: list[dict], views: dict[int, dict]) -> Counter:
    """Replay ``changes`` from the empty view, checking the state after each recorded version
    equals the view at that version; the count of each change type."""
    state: dict = {}
    done = -1
    for v in sorted(views):
        upto = [c for c in changes if done < c["_commit_version"] <= v]
        state = replay_changes(run.spec, upto, state)
        done = v
        assert state == views[v], f"the replayed feed differs from the view at version {v}"
    return Counter(c["_change_type"] for c in changes)


@pytest.mark.parametrize(
    "seed, window_fn, mode, vectorized",
    [
        (1, Sessions(10 * S), R, None),
        (5, Sessions(10 * S), AccumulationMode.ACCUMULATING, None),
        (3, Sessions(10 * S), AccumulationMode.DISCARDING, None),
        (4, SlidingWindows(20 * S, 10 * S), R, None),
        (5, FixedWindows(10 * S), AccumulationMode.DISCARDING, None),
        (3, FixedWindows(10 * S), R, False),
    ],
    ids=[
        "sessions-retracting",
        "sessions-acc",
        "sessions-disc",
        "sliding-vec",
        "fixed-disc-vec",
        "fixed-python",
    ],
)
@pytest.mark.heavy
def test_replaying_the_feed_from_version_0_rebuilds_the_view_at_every_version(
    tmp_path, seed, window_fn, mode, vectorized
):
    run = random_run(seed, str(tmp_path), mode=mode, window_fn=window_fn)
    views = materialize_rounds(run, seed, compact=True, vectorized=vectorized)
    changes = read_changes(run.spec, 0)
    assert changes.until == max(views)
    counts = replay_by_version(run, changes.table.to_pylist(), views)
    assert view_dict(run.spec) == run.expected()
    assert counts["insert"] > 0 and counts["update_postimage"] > 0
    if isinstance(window_fn, Sessions):  # sessions merged: the windows merged away left the view
        assert counts["delete"] > 0


@pytest.mark.heavy
def test_session_windows_merged_away_leave_the_view_as_deletes(tmp_path):
    run = random_run(1, str(tmp_path), mode=R, window_fn=Sessions(10 * S), multi=False)
    materialize_rounds(run, 1)
    deleted = [
        r for r in read_changes(run.spec, 0).table.to_pylist() if r["_change_type"] == "delete"
    ]
    final = view_dict(run.spec)
    assert deleted
    for r in deleted:  # no deleted window is in the final view unless re-inserted later
        at = ((r["key"],), (r["window_start_us"], r["window_end_us"]))
        later = [
            c
            for c in read_changes(run.spec, r["_commit_version"] + 1).table.to_pylist()
            if ((c["key"],), (c["window_start_us"], c["window_end_us"])) == at
        ]
        assert (at in final) == bool(later and later[-1]["_change_type"] != "delete")
    superseded = {(p.key, (w.start, w.end)) for p in run.panes for w in p.supersedes}
    assert superseded & {(r["key"], (r["window_start_us"], r["window_end_us"])) for r in deleted}


@pytest.mark.heavy
def test_a_reader_outside_panestore_reads_the_feed_with_delta_rs(tmp_path):
    from deltalake import DeltaTable

    run = random_run(1, str(tmp_path), mode=R, window_fn=Sessions(10 * S), multi=False)
    materialize_rounds(run, 1)
    ours = read_changes(run.spec, 0).table
    theirs = DeltaTable(run.spec.table_path("current")).load_cdf(starting_version=0)
    theirs = pa.table(theirs.read_all())
    assert theirs.num_rows == ours.num_rows
    cols = ["key", "window_start_us", "window_end_us", "value", "pane_index", "_change_type"]

    def rows(t):
        return Counter((*(r[c] for c in cols), int(r["_commit_version"])) for r in t.to_pylist())

    assert rows(theirs) == rows(ours)


@pytest.mark.heavy
def test_a_view_created_without_the_feed_gets_it_at_the_materializers_open(tmp_path, monkeypatch):
    import sinks.fold.materializer as materializer

    run = random_run(1, str(tmp_path), mode=R, window_fn=Sessions(10 * S), multi=False)
    batches = chunked(run, random.Random(1))
    half = len(batches) // 2
    with monkeypatch.context() as m:  # an older panestore: views without the feed
        m.setattr(materializer, "ensure_change_feed", lambda dt: None)
        m.setattr("sinks.lake.tables.view_properties", lambda s: table_properties(s, "current"))
        for i, b in enumerate(batches[:half]):
            write_batches(run, [b], start=i)
            Materializer(run.spec).run()
    old = open_view(run.spec)
    assert CHANGE_FEED_PROPERTY not in (old.metadata().configuration or {})
    with pytest.raises(LakeError, match="records no changes yet: run `panestore materialize"):
        read_changes(run.spec, 0)

    write_batches(run, batches[half:], start=half)
    result = Materializer(run.spec).run()
    start = old.version() + 1
    assert result.change_feed_from == start
    assert f"change feed is on from view version {start}" in result.line()
    conf = open_view(run.spec).metadata().configuration
    assert conf[CHANGE_FEED_PROPERTY] == "true" and conf[CHANGE_FEED_FROM_PROPERTY] == str(start)
    with pytest.raises(LakeError, match=f"available from view version {start} on .*created bef"):
        read_changes(run.spec, start - 1)
    replayed = replay_changes(
        run.spec, read_changes(run.spec, start).table.to_pylist(), view_rows(run.spec, start)
    )
    assert replayed == view_rows(run.spec)
    assert view_dict(run.spec) == run.expected()
    assert Materializer(run.spec).run().change_feed_from is None  # once


@pytest.mark.heavy
def test_since_and_until_bounds(tmp_path):
    run = random_run(7, str(tmp_path), mode=R, window_fn=FixedWindows(10 * S))
    views = materialize_rounds(run, 7)
    latest = max(views)
    caught_up = read_changes(run.spec, latest + 1)
    assert caught_up.table.num_rows == 0
    assert caught_up.line().endswith(f"continue with --since {latest + 1}")
    with pytest.raises(LakeError, match=rf"after the latest version .* \({latest}\).*rebuild"):
        read_changes(run.spec, latest + 2)
    with pytest.raises(LakeError, match="--until"):
        read_changes(run.spec, 2, latest + 1)
    with pytest.raises(LakeError, match="--until"):
        read_changes(run.spec, 3, 2)
    whole = read_changes(run.spec, 0).table.to_pylist()
    mid = sorted(views)[len(views) // 2]
    parts = read_changes(run.spec, 0, mid).table.to_pylist()
    parts += read_changes(run.spec, mid + 1).table.to_pylist()
    assert parts == whole
    only_mid = read_changes(run.spec, mid, mid).table.to_pylist()
    assert all(c["_commit_version"] == mid for c in only_mid)


@pytest.mark.heavy
def test_changes_whose_log_entries_expired_are_refused_naming_the_first_available(tmp_path):
    run = random_run(7, str(tmp_path), mode=R, window_fn=FixedWindows(10 * S))
    batches = chunked(run, random.Random(7))
    half = len(batches) // 2
    mat = Materializer(run.spec)
    for i, b in enumerate(batches):
        if i == half:  # what delta-rs does after a checkpoint once log entries have expired
            dt = open_view(run.spec)
            dt.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
            dt.create_checkpoint()
            dt.cleanup_metadata()
            first = dt.version()
        write_batches(run, [b], start=i)
        mat.run()
    with pytest.raises(LakeError, match=rf"available from view version {first} on .*log ret"):
        read_changes(run.spec, first - 1)
    later = read_changes(run.spec, first).table.to_pylist()
    assert later
    assert replay_changes(run.spec, later, view_rows(run.spec, first)) == view_rows(run.spec)


@pytest.mark.heavy
def test_vacuum_keeps_the_change_files(tmp_path):
    """delta-rs's vacuum deletes the data files no version inside the retention needs, never
    the ``_change_data`` files: the feed stays readable from its start (docs/running.md)."""
    run = random_run(1, str(tmp_path), mode=R, window_fn=Sessions(10 * S), multi=False)
    views = materialize_rounds(run, 1, compact=True)
    (deleted,) = vacuum(run.spec, retention_hours=0, force=True, tables=("current",))
    assert deleted.details["files"]
    assert not [f for f in deleted.details["files"] if f.startswith("_change_data")]
    replay_by_version(run, read_changes(run.spec, 0).table.to_pylist(), views)


# The change feed read by DuckDB alone (docs/running.md): its delta extension has no change
# data feed reader, so the committed ``cdc`` actions are read from the Delta log, then their
# Parquet files. Faithful when every commit that changes data has ``cdc`` actions (delta-rs's
# MERGE on a table with the feed on) and the log's JSON entries of the versions read exist.
DUCKDB_LOG = """
CREATE TABLE log AS
SELECT CAST(regexp_extract(filename, '(\\d+)\\.json$', 1) AS BIGINT) AS version, *
FROM read_json('{view}/_delta_log/*.json', filename = true, format = 'newline_delimited',
    columns = {{commitInfo: 'STRUCT("timestamp" BIGINT)',
               add: 'STRUCT(path VARCHAR, "dataChange" BOOLEAN)',
               remove: 'STRUCT(path VARCHAR, "dataChange" BOOLEAN)',
               cdc: 'STRUCT(path VARCHAR, "partitionValues" MAP(VARCHAR, VARCHAR))'}})
"""
DUCKDB_CHANGES = """
SELECT c.* EXCLUDE (filename, _change_type),
       CAST(l.cdc.partitionValues['window_day'] AS DATE) AS window_day, c._change_type,
       l.version AS _commit_version,
       make_timestamp(t.commitInfo.timestamp * 1000) AT TIME ZONE 'UTC' AS _commit_timestamp
FROM read_parquet({files}, filename = true, hive_partitioning = false) c
JOIN log l ON c.filename = '{view}/' || l.cdc.path
JOIN log t ON t.version = l.version AND t.commitInfo IS NOT NULL
ORDER BY _commit_version
"""


@pytest.mark.heavy
def test_duckdb_alone_reads_the_feed_from_the_delta_log(tmp_path):
    import duckdb

    run = random_run(1, str(tmp_path), mode=R, window_fn=Sessions(10 * S), multi=False)
    materialize_rounds(run, 1, compact=True)
    view = run.spec.table_path("current")
    con = duckdb.connect()
    con.execute(DUCKDB_LOG.format(view=view))
    assert con.sql("SELECT min(version) FROM log").fetchone()[0] == 0  # the whole log is there
    without_cdc = con.sql(
        "SELECT version FROM log GROUP BY version HAVING bool_or(add.dataChange OR "
        "remove.dataChange) AND NOT bool_or(cdc IS NOT NULL)"
    ).fetchall()
    assert without_cdc == []  # every data change has its change files
    files = [
        f"{view}/{p}"
        for (p,) in con.sql("SELECT cdc.path FROM log WHERE cdc IS NOT NULL").fetchall()
    ]
    theirs = con.sql(DUCKDB_CHANGES.format(files=files, view=view)).arrow().read_all()
    ours = read_changes(run.spec, 0).table
    assert sorted(theirs.column_names) == sorted(ours.column_names)
    cols = ours.column_names

    def rows(t):
        return Counter(tuple(str(r[c]) for c in cols) for r in t.select(cols).to_pylist())

    assert rows(theirs) == rows(ours)
