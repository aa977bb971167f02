"""The fold in pieces (sinks/fold_plan.py): a backlog larger than ``fold_memory`` folds by key-hash
range, one commit a piece, to exactly the view one fold gives; a fold stopped between pieces is
finished by the next, never a piece twice."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from panes import AccumulationMode, FixedWindows, Sessions
from sinks.change_feed import read_changes
from sinks.fold_plan import fold_in_progress
from sinks.key_hash import key_hash, key_hashes
from sinks.materializer import Materializer
from sinks.spec import ViewSpec
from sinks.tables import open_view
from tests.sinks.lakes import S, chunked, random_run, replay_changes, view_rows, write_batches

TINY = 1  # byte: every piece as small as the keys allow


def two_views(spec: ViewSpec) -> tuple[ViewSpec, ViewSpec]:
    """The spec folding in one piece, and one folding the same pane log into its own view in
    as many pieces as it can."""
    pieces = replace(
        spec, tables={"current": spec.table_path("current_in_pieces")}, fold_memory=TINY
    )
    return spec, pieces


CASES = [
    (mode, window_fn, seed)
    for mode in AccumulationMode
    for window_fn in (FixedWindows(10 * S), Sessions(10 * S))
    for seed in (3, 8)
]


@pytest.mark.parametrize(("mode", "window_fn", "seed"), CASES)
def test_a_fold_in_pieces_gives_the_view_of_one_fold(tmp_path, mode, window_fn, seed):
    run = random_run(seed, str(tmp_path), mode=mode, window_fn=window_fn, multi=True)
    batches = chunked(run, random.Random(seed))
    half = max(1, len(batches) // 2)
    write_batches(run, batches[:half])
    whole, pieces = two_views(run.spec)
    Materializer(whole).run()
    first = Materializer(pieces).run()
    write_batches(run, batches[half:], start=half)  # then an incremental fold into both
    Materializer(whole).run()
    second = Materializer(pieces).run()
    assert max(first.pieces, second.pieces) > 1
    assert view_rows(pieces) == view_rows(whole)
    # the change feed of the pieces' commits, applied in order, is the view
    changes = read_changes(pieces, 0).table.to_pylist()
    replayed = replay_changes(pieces, changes)
    assert replayed == view_rows(pieces)


class Stop(Exception):
    pass


def stop_at(point: str, nth: int):
    seen = {"n": 0}

    def hook(at: str) -> None:
        if at == point:
            seen["n"] += 1
            if seen["n"] == nth:
                raise Stop(f"{point} #{nth}")

    return hook


@pytest.mark.parametrize("mode", list(AccumulationMode))
@pytest.mark.parametrize(
    ("point", "nth"), [("after_piece", 1), ("after_piece", 3), ("before_merge", 2)]
)
def test_a_fold_stopped_between_pieces_is_finished_once(tmp_path, mode, point, nth):
    run = random_run(5, str(tmp_path), mode=mode, window_fn=FixedWindows(10 * S), multi=True)
    write_batches(run, chunked(run, random.Random(5)))
    whole, pieces = two_views(run.spec)
    Materializer(whole).run()
    with pytest.raises(Stop):
        Materializer(pieces, hook=stop_at(point, nth)).run()
    view = open_view(pieces)
    progress = fold_in_progress(view, view.transaction_version(pieces.app_id))
    assert progress is not None and progress[1] >= 1
    resumed = Materializer(pieces).run()
    assert resumed.first_piece == progress[1] and resumed.pieces == progress[0].pieces
    assert "the rest of a fold that was stopped" in resumed.line()
    assert view_rows(pieces) == view_rows(whole)  # (a piece folded twice: discarding doubles)
    assert Materializer(pieces).run().did_work is False


def test_the_key_hash_is_the_same_in_python_and_in_arrow():
    import pyarrow as pa

    rng = random.Random(1)
    texts = ["", "é", "key-1", "a\x1fb"] + [
        "".join(rng.choice("abcdé€ 0") for _ in range(rng.randint(0, 12))) for _ in range(200)
    ]
    numbers = [rng.randint(-(2**63), 2**63 - 1) for _ in texts]
    table = pa.table({"t": texts, "n": pa.array(numbers, pa.int64())})
    assert key_hashes(table, ["t"]).to_pylist() == [key_hash((t,)) for t in texts]
    assert key_hashes(table, ["t", "n"]).to_pylist() == [
        key_hash((t, n)) for t, n in zip(texts, numbers, strict=True)
    ]
