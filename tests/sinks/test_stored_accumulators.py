"""Accumulators through the lake (``panes.accumulator_text``): a pane's accumulator is stored
whatever it holds, so discarding mode folds every aggregate, and one of no text stops the batch
or the fold naming the window and the aggregate, never written as null."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")
pytest.importorskip("datasketches")

import pyarrow as pa

from panes import AccumulationMode, FixedWindows, combiners
from sinks.fold.reducer import fold_rows
from sinks.lake.column_types import arrow_type
from sinks.lake.errors import AccumulatorNotStorable, LakeError
from sinks.lake.pane_log import PaneLogLayout, pane_record
from sinks.lake.spec import ViewSpec
from tests.combiners_of_your_own import Opaque, OpaqueFrom, Seen, Trail
from tests.sinks.lakes import materialized_lake, view_dict, window_fns
from tests.sinks.test_pane_log import MIN, FakePane, Info, Timing, W


class _Seen(Seen):
    output_type = "long"


class _Trail(Trail):
    output_type = "long"


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(3))
def test_discarding_folds_sets_bytes_sketches_and_picked_values(tmp_path, seed):
    """Discarding panes of a user's set and bytes combiners beside a sketch, a mean and a first
    fold to the panes' own fold, and fold again from nothing (``materialize --rebuild``) to the
    same view. Before, the set and the bytes were written as null and no fold could succeed."""
    from sinks.fold.view_rebuild import rebuild_view

    aggregates = {
        "distinct": (_Seen(), pa.int64()),
        "spread": (_Trail(), pa.int64()),
        "users": (
            combiners.approx_count_distinct(),
            arrow_type("struct<estimate: long, sketch: binary>"),
        ),
        "avg": (combiners.mean(), pa.float64()),
        "first": (combiners.first(), pa.int64()),
    }
    run = materialized_lake(
        tmp_path,
        seed,
        mode=AccumulationMode.DISCARDING,
        window_fn=window_fns()[seed],
        aggregates=aggregates,
    )
    folded = view_dict(run.spec)
    expected = run.expected()
    assert folded.keys() == expected.keys() and folded, "windows were folded"
    for at, row in expected.items():
        got = folded[at]
        assert got["users"]["estimate"] == row["users"]["estimate"], at
        assert {n: got[n] for n in ("distinct", "spread", "avg", "first")} == {
            n: row[n] for n in ("distinct", "spread", "avg", "first")
        }, at
    rebuild_view(run.spec)
    assert view_dict(run.spec) == folded


def test_max_by_beside_a_sketch_folds_in_discarding_mode(tmp_path):
    """``max_by``'s (by, value) pair and a sketch's bytes in one accumulator: three discarding
    panes of a window fold to the window's answer (the reducer over pane-log rows)."""
    fn = combiners.aggregates(
        top=combiners.max_by("page", "s"), users=combiners.approx_count_distinct("page")
    )
    layout = PaneLogLayout(
        value_fields=(
            ("top", pa.string()),
            ("users", arrow_type("struct<estimate: long, sketch: binary>")),
        ),
        combine_fn=fn,
    )
    spec = ViewSpec(
        "p",
        str(tmp_path),
        ("key",),
        tuple(fn.fns.items()),
        FixedWindows(10 * MIN),
        AccumulationMode.DISCARDING,
        combine_fn=fn,
    )
    parts = [[("home", 3), ("cart", 9)], [("help", 9)], [("home", 1)]]
    rows = []
    for i, part in enumerate(parts):
        acc = fn.add_all(fn.create(), [{"page": p, "s": s} for p, s in part])
        info = Info(i, -1, Timing.EARLY, i == 0, False)
        pane = FakePane("a", W(0, 10 * MIN), fn.extract(acc), MIN, info, accumulator=acc)
        rows.append(pane_record(pane, layout))
    (row,) = fold_rows(spec, rows).values()
    assert row["top"] == "help"  # s 9 twice: the larger page
    assert row["users"]["estimate"] == 3


class _Grows(OpaqueFrom):
    """Whole values; an :class:`Opaque` once it adds one of 100 or more."""

    fields = ()
    limit = 100


def test_a_pane_whose_accumulator_has_no_text_stops_its_batch_naming_it():
    """Before, the pane's accumulator was written as null without a word."""
    fn = combiners.aggregates(avg=combiners.mean(), own=_Grows())
    layout = PaneLogLayout(
        key_fields=(("user", pa.string()),),
        value_fields=(("avg", pa.float64()), ("own", pa.int64())),
        combine_fn=fn,
    )
    acc = fn.add_all(fn.create(), [7, 500])
    pane = FakePane(
        "u7",
        W(0, MIN),
        {"avg": 1.0, "own": 0},
        MIN - 1,
        Info(0, 0, Timing.ON_TIME, True, True),
        accumulator=acc,
    )
    with pytest.raises(AccumulatorNotStorable) as e:
        pane_record(pane, layout)
    message = str(e.value)
    assert "\n" not in message
    assert "user='u7', window [1970-01-01T00:00:00+00:00, 1970-01-01T00:01:00+00:00)" in message
    assert "aggregate own" in message and "combiners_of_your_own.Opaque" in message
    assert "nothing of the batch was committed" in message


class _MergesToOpaque(_Grows):
    """Storable in every pane; its merge of two panes is an :class:`Opaque`."""

    def merge(self, accs):
        return Opaque()


def _spec(tmp_path, fn):
    return ViewSpec(
        "p",
        str(tmp_path),
        ("key",),
        tuple(fn.fns.items()),
        FixedWindows(10 * MIN),
        AccumulationMode.DISCARDING,
        combine_fn=fn,
    )


def _rows(fn, accs, texts=None):
    layout = PaneLogLayout(value_fields=(("avg", pa.float64()), ("own", pa.int64())), combine_fn=fn)
    rows = []
    for i, acc in enumerate(accs):
        info = Info(i, -1, Timing.EARLY, i == 0, False)
        pane = FakePane("a", W(0, 10 * MIN), fn.extract(acc), MIN, info, accumulator=acc)
        rows.append(pane_record(pane, layout))
    for row, text in zip(rows, texts or (), strict=False):
        row["accumulator"] = text
    return rows


def test_a_fold_whose_merged_accumulator_has_no_text_writes_nothing_naming_the_window(tmp_path):
    """Before, the view row's merged accumulator was written as null, and the next fold of the
    window failed for want of it."""
    fn = combiners.aggregates(avg=combiners.mean(), own=_MergesToOpaque())
    rows = _rows(fn, [fn.add_all(fn.create(), [v]) for v in (1, 2)])
    with pytest.raises(AccumulatorNotStorable) as e:
        fold_rows(_spec(tmp_path, fn), rows)
    message = str(e.value)
    assert "\n" not in message and "key='a', window [1970-01-01T00:00:00+00:00" in message
    assert "aggregate own" in message and "Nothing was written" in message


def test_an_accumulator_text_that_does_not_read_is_a_lake_error(tmp_path):
    """A text no version wrote (not JSON) is named on one line, not a traceback."""
    fn = combiners.aggregates(avg=combiners.mean(), own=_Grows())
    rows = _rows(fn, [fn.add_all(fn.create(), [v]) for v in (1, 2)], texts=["[[1.0,1],1", None])
    with pytest.raises(LakeError) as e:
        fold_rows(_spec(tmp_path, fn), rows)
    assert "cannot be read" in str(e.value) and "\n" not in str(e.value)
