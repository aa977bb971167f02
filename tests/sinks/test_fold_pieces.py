"""The fold in pieces (:mod:`sinks.fold.fold_plan`): a backlog larger than the fold's memory, folded
one key-hash range at a time, gives the view of the fold in one piece, row for row, in every
accumulation mode and window function, and a change feed that replays to it; a fold stopped
between its pieces (an exception, a SIGKILL) is finished by the next run, no piece folded twice;
the key hash is the same computed in Python and in DuckDB; a view created before it had a
``key_hash`` column still folds in pieces."""

from __future__ import annotations

import dataclasses
import itertools
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from panes import AccumulationMode, FixedWindows, Sessions, SlidingWindows, combiners
from sinks.fold.change_feed import read_changes
from sinks.fold.fold_plan import DEFAULT_FOLD_MEMORY, plan_fold
from sinks.fold.materializer import Materializer
from sinks.fold.pane_log_changes import pane_log_commits
from sinks.lake.errors import FoldValueOutOfRange
from sinks.lake.key_hash import KEY_HASH, key_hash, key_hashes
from sinks.lake.lake_format import WINDOW_DAY
from sinks.lake.pane_log import pane_log_schema
from sinks.lake.tables import arrow_schema, open_pane_log, open_view, view_properties, view_schema
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
from tests.sinks.test_fold_range import A, discarding_sum, pane

ACC = AccumulationMode.ACCUMULATING
DISC = AccumulationMode.DISCARDING
RETR = AccumulationMode.ACCUMULATING_AND_RETRACTING
TINY = 1
"""A fold memory (bytes) no backlog fits: one piece per fine bucket of the key hash."""
KEY_VALUES = "abcd"
"""The runs' keys: four, each in its own fine bucket (so four pieces or more)."""
REPO = Path(__file__).resolve().parents[2]


def _mean_and_sketch() -> dict:
    pytest.importorskip("datasketches")
    from sinks.lake.column_types import arrow_type

    return {
        "avg": (combiners.mean(), pa.float64()),
        "users": (
            combiners.approx_count_distinct(),
            arrow_type("struct<estimate: long, sketch: binary>"),
        ),
    }


# (seed, mode, window function, aggregates: None for a sum, or a function giving them)
CASES = {
    "accumulating": (2, ACC, SlidingWindows(20 * S, 10 * S), None),
    "discarding-sum": (4, DISC, FixedWindows(10 * S), None),
    "discarding-mean-sketch": (1, DISC, FixedWindows(10 * S), _mean_and_sketch),
    "retracting": (2, RETR, FixedWindows(10 * S), None),
    "retracting-sessions": (4, RETR, Sessions(10 * S), None),
    "discarding-sessions": (4, DISC, Sessions(10 * S), None),
    "accumulating-sessions": (1, ACC, Sessions(10 * S), None),
}


def case_run(case: str, lake: Path) -> Run:
    """The random run of ``case``, its lake at ``lake`` folding in pieces (:data:`TINY`)."""
    seed, mode, window_fn, aggregates = CASES[case]
    run = random_run(
        seed,
        str(lake),
        mode=mode,
        window_fn=window_fn,
        multi=False,
        aggregates=aggregates() if aggregates else None,
        key_values=KEY_VALUES,
        per_step=8,
    )
    return in_pieces(run, lake)


def in_pieces(run: Run, lake: Path, fold_memory: int = TINY) -> Run:
    """``run`` with its lake at ``lake`` and the fold memory ``fold_memory``."""
    return dataclasses.replace(
        run, spec=dataclasses.replace(run.spec, lake=str(lake), fold_memory=fold_memory)
    )


def unbounded(run: Run, lake: Path) -> Run:
    """``run`` with its lake at ``lake`` and the default fold memory (the fold in one piece)."""
    return in_pieces(run, lake, DEFAULT_FOLD_MEMORY)


def without_key_hash(rows: dict) -> dict:
    return {at: {n: v for n, v in r.items() if n != KEY_HASH} for at, r in rows.items()}


# -- every mode: the view and the change feed of the fold in one piece --------------------------


@pytest.mark.heavy
@pytest.mark.parametrize("case", CASES)
def test_a_fold_in_pieces_gives_the_view_and_the_change_feed_of_the_fold_in_one(tmp_path, case):
    """A backlog of several pane-log versions folded into an empty view, then another into the
    view it left, each in pieces, gives the rows (every column) of the same folds in one piece;
    the change feed replayed from the empty view gives the view after each fold."""
    pieces = case_run(case, tmp_path / "pieces")
    whole = unbounded(pieces, tmp_path / "whole")
    spec = pieces.spec
    panes = pieces.panes
    if pieces.spec.mode is RETR:
        assert any(p.is_retraction for p in panes), "the run retracts panes"
    if pieces.spec.window_fn.is_merging:
        assert any(p.supersedes for p in panes), "the run's sessions merge"
    batches = chunked(pieces, random.Random(0))
    half = len(batches) // 2
    assert half >= 2, "each fold reads several pane-log versions"
    views = {}
    for start, part in ((0, batches[:half]), (half, batches[half:])):
        for run in (pieces, whole):
            write_batches(run, part, start)
        result = Materializer(spec).run()
        assert Materializer(whole.spec).run().pieces == 1
        assert result.pieces > 1 and result.first_piece == 0
        assert result.pieces_committed == result.pieces
        assert f"(in {result.pieces} pieces, one commit each)" in result.line()
        rows = view_rows(spec)
        assert rows == view_rows(whole.spec)
        views[open_view(spec).version()] = rows
    assert view_dict(spec).keys() == pieces.expected().keys()
    if case != "discarding-mean-sketch":  # (a sketch's bytes depend on the merge order)
        assert view_dict(spec) == pieces.expected()
    for (key, _), row in rows.items():
        assert row[KEY_HASH] == key_hash(key)

    changes = read_changes(spec, 0).table.to_pylist()
    state: dict = {}
    done = -1
    for version, view in sorted(views.items()):
        upto = [c for c in changes if done < c["_commit_version"] <= version]
        state = replay_changes(spec, upto, state)
        assert state == view, f"the replayed feed differs from the view at version {version}"
        done = version


# -- a fold stopped between pieces, finished by the next run ------------------------------------


class Killed(BaseException):
    """A kill the materializer does not catch (as KeyboardInterrupt)."""


def kill_at(point: str, k: int):
    """A materializer hook that raises :class:`Killed` at the ``k``-th ``point``."""
    seen = []

    def hook(at: str) -> None:
        if at == point:
            seen.append(at)
            if len(seen) == k:
                raise Killed(f"{point} {k}")

    return hook


@dataclasses.dataclass(frozen=True)
class Stopped:
    """A lake to copy: its view folded from the first pane-log versions, the later ones to fold
    in pieces; the view rows that fold gives in one piece; its plan's number of pieces."""

    run: Run
    lake: Path
    expected: dict
    pieces: int

    def copy(self, to: Path) -> Run:
        shutil.copytree(self.lake, to)
        return in_pieces(self.run, to)


STOPPED = {"fixed": FixedWindows(10 * S), "sessions": Sessions(10 * S)}


@pytest.fixture(scope="module", params=list(STOPPED))
def stopped(request, tmp_path_factory) -> Stopped:
    """Discarding sums (a piece folded twice would show as a doubled sum): half the run folded,
    the rest written to fold."""
    base = tmp_path_factory.mktemp("stopped")
    run = random_run(
        4,
        str(base / "lake"),
        mode=DISC,
        window_fn=STOPPED[request.param],
        multi=False,
        key_values=KEY_VALUES,
        per_step=8,
    )
    run = in_pieces(run, base / "lake")
    batches = chunked(run, random.Random(0))
    half = len(batches) // 2
    write_batches(run, batches[:half])
    Materializer(unbounded(run, base / "lake").spec).run()
    write_batches(run, batches[half:], half)
    panes = open_pane_log(run.spec)
    done = open_view(run.spec).transaction_version(run.spec.app_id)
    assert done is not None
    commits = pane_log_commits(panes, done, panes.version())
    plan = plan_fold(run.spec, panes, commits, TINY, python=run.spec.window_fn.is_merging)
    assert plan.pieces >= 4
    whole = unbounded(run, base / "whole")
    shutil.copytree(base / "lake", base / "whole")
    Materializer(whole.spec).run()
    return Stopped(run, base / "lake", view_rows(whole.spec), plan.pieces)


KILLS = [
    ("after_piece", 2),
    ("after_piece", -1),  # after the last piece but one
    ("before_merge", 1),  # nothing committed
    ("before_merge", -1),  # the last piece's
]


@pytest.mark.heavy
@pytest.mark.parametrize("point, k", KILLS, ids=[f"{p}-{k if k > 0 else 'last'}" for p, k in KILLS])
def test_a_fold_stopped_between_pieces_is_finished_by_the_next_run(tmp_path, stopped, point, k):
    """The run after a fold stopped at the ``k``-th ``point`` folds the pieces left
    (``first_piece``), none twice: the view is the one the fold in one piece gives. The stopped
    fold's commits did not record its pane-log versions as folded."""
    run = stopped.copy(tmp_path / "lake")
    k = k if k > 0 else stopped.pieces - (point == "after_piece")
    committed = k if point == "after_piece" else k - 1
    view = open_view(run.spec)
    before = (view.version(), view.transaction_version(run.spec.app_id))
    with pytest.raises(Killed):
        Materializer(run.spec, hook=kill_at(point, k)).run()
    view = open_view(run.spec)
    assert view.version() == before[0] + committed
    assert view.transaction_version(run.spec.app_id) == before[1], "the fold is not done"

    result = Materializer(run.spec).run()
    assert (result.pieces, result.first_piece) == (stopped.pieces, committed)
    assert result.pieces_committed == stopped.pieces - committed
    if committed:
        assert "the rest of a fold that was stopped" in result.line()
    assert view_rows(run.spec) == stopped.expected
    assert not Materializer(run.spec).run().did_work


@pytest.mark.heavy
@pytest.mark.parametrize("stopped", ["sessions"], indirect=True)
def test_a_fold_stopped_twice_is_finished_by_the_third_run(tmp_path, stopped):
    """The fold finishing a stopped one, stopped too, is finished by the next run."""
    run = stopped.copy(tmp_path / "lake")
    with pytest.raises(Killed):
        Materializer(run.spec, hook=kill_at("after_piece", 1)).run()
    with pytest.raises(Killed):  # the rest, stopped again after its first piece
        Materializer(run.spec, hook=kill_at("after_piece", 1)).run()
    result = Materializer(run.spec).run()
    assert result.first_piece == 2
    assert view_rows(run.spec) == stopped.expected


def more_panes(run: Run) -> Run:
    """Another run's panes (keys x, y, z) appended to ``run``'s pane log as one version."""
    other = random_run(
        5, run.spec.lake, mode=DISC, window_fn=run.spec.window_fn, multi=False, key_values="xyz"
    )
    other = dataclasses.replace(other, spec=run.spec)
    write_batches(other, [other.panes], start=100)
    return other


def catch_up(run: Run) -> list:
    """The results of materializer runs until one finds the view up to date (the last)."""
    results = [Materializer(run.spec).run()]
    while results[-1].did_work:
        assert len(results) < 4, "the view catches up"
        results.append(Materializer(run.spec).run())
    return results


def values(rows: dict, run: Run) -> dict:
    """View rows by (key, window) -> their aggregate values."""
    return {at: {n: r[n] for n in run.spec.value_names} for at, r in rows.items()}


@pytest.mark.heavy
@pytest.mark.parametrize("stopped", ["fixed"], indirect=True)
def test_pane_log_versions_written_after_a_stop_are_folded_once_too(tmp_path, stopped):
    """The runs after the stop finish the stopped fold and fold the versions written since,
    each pane once."""
    run = stopped.copy(tmp_path / "lake")
    with pytest.raises(Killed):
        Materializer(run.spec, hook=kill_at("after_piece", 2)).run()
    other = more_panes(run)
    results = catch_up(run)
    assert results[0].first_piece == 2
    assert view_dict(run.spec) == {**values(stopped.expected, run), **other.expected()}


@pytest.mark.heavy
@pytest.mark.parametrize("stopped", ["fixed"], indirect=True)
def test_a_stopped_fold_is_finished_after_the_pane_log_was_compacted_and_vacuumed(
    tmp_path, stopped
):
    """The files of the pane log as the stopped fold planned it are gone (the pane log gained
    a version, then was compacted and vacuumed): the fold is finished from the pane log's
    newest files, as a fold behind reads them (:mod:`sinks.upkeep.auto_vacuum`). Before, every later
    fold failed on a missing file."""
    from sinks.upkeep.maintenance import optimize, vacuum

    run = stopped.copy(tmp_path / "lake")
    with pytest.raises(Killed):
        Materializer(run.spec, hook=kill_at("after_piece", 2)).run()
    other = more_panes(run)
    optimize(run.spec, tables=("panes",))
    (vacuumed,) = vacuum(run.spec, retention_hours=0, force=True, tables=("panes",))
    assert vacuumed.details["files"]
    results = catch_up(run)
    assert results[0].first_piece == 2
    assert view_dict(run.spec) == {**values(stopped.expected, run), **other.expected()}


_KILLED = """
import os, pickle, signal, sys
from sinks.fold.materializer import Materializer

spec = pickle.loads(bytes.fromhex(sys.argv[1]))
point, k = sys.argv[2], int(sys.argv[3])
seen = []

def hook(at):
    if at == point:
        seen.append(at)
        if len(seen) == k:
            os.kill(os.getpid(), signal.SIGKILL)

Materializer(spec, hook=hook).run()
os._exit(3)  # not killed
"""


@pytest.mark.heavy
@pytest.mark.parametrize("stopped", ["fixed"], indirect=True)
def test_a_fold_sigkilled_between_pieces_is_finished_by_the_next_run(
    tmp_path, stopped, monkeypatch
):
    """A materializer process SIGKILLed after its second piece's commit: the next run folds
    the pieces left, none twice, and deletes the spilled backlog the killed one left in the
    temporary directory."""
    point, k = "after_piece", 2
    run = stopped.copy(tmp_path / "lake")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED, pickle.dumps(run.spec).hex(), point, str(k)],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list(scratch.iterdir()), "the killed fold left its spill"
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = Materializer(run.spec).run()
    assert result.first_piece == k
    assert view_rows(run.spec) == stopped.expected
    assert not list(scratch.iterdir())


_KILLED_MID_PIECE = """
import os, pickle, signal, sys, threading, time
from sinks.fold.materializer import Materializer

spec = pickle.loads(bytes.fromhex(sys.argv[1]))
k, delay = int(sys.argv[2]), float(sys.argv[3])
seen = []

def hook(at):
    if at == "before_merge":  # (the k-th piece's worker is about to start)
        seen.append(at)
        if len(seen) == k:
            threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()

Materializer(spec, hook=hook).run()
time.sleep(60)  # (a fold done before the delay: killed all the same, after it)
os._exit(3)  # not killed
"""


@pytest.mark.heavy
@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("stopped", ["fixed"], indirect=True)
def test_a_fold_sigkilled_while_a_worker_folds_a_piece_is_finished_by_the_next_run(
    tmp_path, stopped, delay
):
    """The materializer SIGKILLed ``delay`` seconds into its second piece (each piece is folded
    in a worker process): no worker outlives it to commit behind the next fold's back, and the
    next run folds the pieces left, none twice."""
    from tests.sinks.test_piece_workers import processes_marked, wait_until_gone

    run = stopped.copy(tmp_path / "lake")
    mark = os.urandom(8).hex()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_PIECE, pickle.dumps(run.spec).hex(), "2", str(delay)],
        cwd=REPO,
        env={**os.environ, "PANESTORE_TEST_MARK": mark},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert wait_until_gone(mark) == [], "a worker outlived the materializer"
    view = open_view(run.spec)
    committed = view.version()
    time.sleep(0.5)
    assert open_view(run.spec).version() == committed
    result = Materializer(run.spec).run()
    assert not result.did_work or result.first_piece >= 1  # (the first piece was committed)
    assert view_rows(run.spec) == stopped.expected
    assert not processes_marked(mark)


@pytest.mark.heavy
def test_a_window_beyond_its_column_stops_a_fold_in_pieces_naming_the_pieces_committed(
    tmp_path,
):
    """The pieces before the window's stay committed, counted with those of the stopped fold
    the run was finishing and numbered as the fold's line numbers them. Before, the run that
    finished a stopped fold said the view stayed folded up to its last version folded whole."""
    spec, log = discarding_sum(str(tmp_path))
    others = ["u2", "u5", "u3", "u4", "u6"]  # u1's piece comes last
    log.append(0, [pane(0, A), *(pane(0, 1, user=u) for u in others)])
    Materializer(spec).run()
    log.append(1, [pane(1, A), *(pane(1, 1, user=u) for u in others)])
    spec = dataclasses.replace(spec, fold_memory=TINY)
    with pytest.raises(Killed):
        Materializer(spec, hook=kill_at("after_piece", 2)).run()
    version = open_pane_log(spec).version()
    for _ in range(2):  # and again
        with pytest.raises(FoldValueOutOfRange) as raised:
            Materializer(spec).run()
        assert (
            f"; nothing of piece 6 of the 6 of this fold of pane-log versions {version}..{version} "
            "was written: pieces 1..5 are committed, the next fold starts at piece 6, and every "
            "materialize stops at this window"
        ) in str(raised.value)
    window = (10 * S, 20 * S)
    assert view_dict(spec) == {
        (("u1",), window): {"total": A},
        **{((u,), window): {"total": 2} for u in others},
    }


# -- the key hash --------------------------------------------------------------------------------


KEYS = st.tuples(st.text(), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1))


@settings(max_examples=40)
@given(st.lists(KEYS, min_size=1, max_size=40))
def test_the_key_hash_of_rows_is_that_of_each_key(keys):
    """Of string keys, integer keys and keys of several columns (each column counts)."""
    table = pa.table(
        {
            "user": pa.array([k[0] for k in keys], pa.string()),
            "n": pa.array([k[1] for k in keys], pa.int64()),
            "region": pa.array([k[2] for k in keys], pa.int32()),
        }
    )
    for columns in (["user"], ["n"], ["user", "n", "region"]):
        at = [table.column_names.index(c) for c in columns]
        python = [key_hash([k[i] for i in at]) for k in keys]
        assert key_hashes(table, columns).to_pylist() == python, columns
    whole = key_hashes(table, ["user", "n", "region"]).to_pylist()
    assert whole != key_hashes(table, ["user", "n"]).to_pylist()


# -- a view created before key_hash ----------------------------------------------------------------


def create_view_without_key_hash(run: Run) -> None:
    """The ``current`` table as a panestore before ``key_hash`` created it."""
    from deltalake import DeltaTable

    schema = view_schema(run.spec, pane_log_schema(run.layout))
    schema = schema.remove(schema.get_field_index(KEY_HASH))
    DeltaTable.create(
        run.spec.table_path("current"),
        schema,
        partition_by=[WINDOW_DAY],
        configuration=view_properties(run.spec),
        raise_if_key_not_exists=False,
    )


@pytest.mark.heavy
@pytest.mark.parametrize("case", ["accumulating", "discarding-sessions"])
def test_a_view_without_key_hash_folds_in_pieces(tmp_path, case):
    """Its folds in pieces (from nothing, into the view it left, and one stopped and finished)
    give the rows of the folds in one piece of a new lake, but the key hash, which it has no
    column for."""
    old = case_run(case, tmp_path / "old")
    whole = unbounded(old, tmp_path / "whole")
    create_view_without_key_hash(old)
    batches = chunked(old, random.Random(0))
    third = len(batches) // 3
    for i, part in enumerate((batches[:third], batches[third : 2 * third], batches[2 * third :])):
        for run in (old, whole):
            write_batches(run, part, i * third)
        if i == 2:
            with pytest.raises(Killed):
                Materializer(old.spec, hook=kill_at("after_piece", 1)).run()
        result = Materializer(old.spec).run()
        assert result.pieces > 1 and result.first_piece == (1 if i == 2 else 0)
        Materializer(whole.spec).run()
        assert KEY_HASH not in arrow_schema(open_view(old.spec)).names
        assert view_rows(old.spec) == without_key_hash(view_rows(whole.spec))
    changes = read_changes(old.spec, 0).table.to_pylist()
    assert replay_changes(old.spec, changes) == view_rows(old.spec)


# -- the view's compaction keeps its rows clustered by key hash -----------------------------------


@pytest.mark.heavy
def test_the_views_compaction_sorts_its_small_files_by_key_hash(tmp_path):
    """Compacting the view (small files of many key-hash ranges in one day) writes files of
    disjoint key-hash ranges, so a fold in pieces reads only those of its range; no row
    changes."""
    from deltalake import DeltaTable, write_deltalake

    from sinks.upkeep.compaction import compact_if_due

    rng = random.Random(3)
    path = str(tmp_path / "current")
    schema = pa.schema(
        [("key", pa.string()), (KEY_HASH, pa.int64()), (WINDOW_DAY, pa.date32()), ("v", pa.int64())]
    )
    for _ in range(6):  # six small files, each over the whole hash range
        keys = [f"k{rng.randrange(100_000)}" for _ in range(3_000)]
        table = pa.table(
            {
                "key": keys,
                KEY_HASH: key_hashes(pa.table({"key": keys}), ["key"]),
                WINDOW_DAY: pa.array([0] * len(keys), pa.int32()).cast(pa.date32()),
                "v": pa.array(range(len(keys)), pa.int64()),
            },
            schema=schema,
        )
        write_deltalake(path, table, mode="append", partition_by=[WINDOW_DAY])
    dt = DeltaTable(path)
    before = sorted(dt.to_pyarrow_table().to_pylist(), key=repr)
    size = max(pa.table(dt.get_add_actions(flatten=True)).column("size_bytes").to_pylist())
    done = compact_if_due("current", dt, max_small=1, small_bytes=size + 1)
    assert done is not None and not done.error and done.added > 2, done
    dt = DeltaTable(path)
    assert sorted(dt.to_pyarrow_table().to_pylist(), key=repr) == before
    adds = pa.table(dt.get_add_actions(flatten=True))
    lows, highs = (adds.column(f"{m}.{KEY_HASH}").to_pylist() for m in ("min", "max"))
    ranges = sorted(zip(lows, highs, strict=True))
    assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(ranges)), ranges
