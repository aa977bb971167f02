"""The materializer: the current view equals panes.fold.fold and panes.fold.batch, per mode."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import (
    END_OF_TIME,
    AccumulationMode,
    AfterCount,
    AfterProcessingTime,
    AfterWatermark,
    FixedWindows,
    OnTimeBehavior,
    Sessions,
    Simulator,
    Windowing,
    combiners,
)
from sinks.fold.materializer import Materializer
from sinks.lake.spec import ViewSpec
from sinks.lake.tables import open_view, table_identity
from tests.examples import seeds
from tests.sinks.lakes import (
    MODES,
    S,
    chunked,
    random_run,
    view_dict,
    view_of_fold,
    window_fns,
    write_batches,
)


def close(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(a[k] == b[k] for k in a)


@pytest.mark.heavy
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name.lower())
@pytest.mark.parametrize("vectorized", [None, False], ids=["auto", "python"])
def test_random_runs_fold_incrementally_equal_fold_and_batch(tmp_path, mode, vectorized):
    for seed in seeds(0, 4):
        rng = random.Random(seed)
        run = random_run(
            seed * 7 + len(mode.name),
            str(tmp_path / f"{seed}"),
            mode=mode,
            window_fn=window_fns()[seed % 4],
        )
        batches = chunked(run, rng)
        mat = Materializer(run.spec, vectorized=vectorized)
        log = None
        folded = []
        for i, b in enumerate(batches):
            log = write_batches(run, [b], start=i)
            folded += b
            if rng.random() < 0.6 or i == len(batches) - 1:
                mat.run()
                expected = view_of_fold(run.spec, _fold(run.spec, folded))
                assert view_dict(run.spec) == expected, (seed, i)
        assert log is not None
        assert view_dict(run.spec) == run.expected()
        assert view_dict(run.spec) == run.expected_batch()
        # a second run (duplicate folding attempt) changes nothing
        v = open_view(run.spec).version()
        assert not mat.run().did_work
        assert open_view(run.spec).version() == v


def _fold(spec, panes):
    from panes.fold import fold

    return fold(panes, spec.mode, spec.combine_fn)


@pytest.mark.heavy
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name.lower())
def test_out_of_order_versions_end_in_the_fold(tmp_path, mode):
    for seed in seeds(0, 5):
        rng = random.Random(100 + seed)
        run = random_run(
            200 + seed, str(tmp_path / f"{seed}"), mode=mode, window_fn=window_fns()[seed % 4]
        )
        chunks = chunked(run, rng, shuffle=True)
        mat = Materializer(run.spec, vectorized=None if seed % 2 else False)
        for i, c in enumerate(chunks):
            write_batches(run, [c], start=i)
            if rng.random() < 0.5:
                mat.run()
        mat.run()
        assert view_dict(run.spec) == run.expected(), seed
        # the same panes folded from nothing, in the same version order, agree too
        rows = open_view(run.spec).to_pyarrow_table()
        assert len(rows) == len(run.expected())


@pytest.mark.heavy
def test_view_rows_record_pane_index_and_version(tmp_path):
    run = random_run(
        3, str(tmp_path), mode=AccumulationMode.ACCUMULATING, window_fn=FixedWindows(10 * S)
    )
    write_batches(run, chunked(run, random.Random(1)))
    Materializer(run.spec).run()
    from sinks.lake.tables import open_pane_log

    log = open_pane_log(run.spec).to_pyarrow_table().to_pylist()
    for r in open_view(run.spec).to_pyarrow_table().to_pylist():
        k = run.spec.keys[0]
        panes = [p for p in log if (p[k], p["window_start_us"]) == (r[k], r["window_start_us"])]
        top = max(panes, key=lambda p: p["pane_index"])
        assert r["pane_index"] == top["pane_index"]
        assert r["timing"] == top["timing"]
        assert r["pane_log_version"] >= 1


@pytest.mark.heavy
def test_several_panes_of_one_window_in_one_version_do_not_multi_match(tmp_path):
    for mode in MODES:
        for vectorized in (None, False):
            lake = str(tmp_path / f"{mode.name}{vectorized}")
            run = random_run(11, lake, mode=mode, window_fn=FixedWindows(10 * S))
            write_batches(run, [run.panes])  # everything in one version
            Materializer(run.spec, vectorized=vectorized).run()
            assert view_dict(run.spec) == run.expected()


@pytest.mark.heavy
def test_crash_between_merge_and_next_run_never_folds_twice(tmp_path):
    run = random_run(
        5, str(tmp_path), mode=AccumulationMode.DISCARDING, window_fn=FixedWindows(10 * S)
    )
    batches = chunked(run, random.Random(2))
    write_batches(run, batches[:1])

    def crash_after(point):
        if point == "after_merge":
            raise KeyboardInterrupt("killed after the MERGE commit")

    with pytest.raises(KeyboardInterrupt):
        Materializer(run.spec, hook=crash_after).run()
    committed = view_dict(run.spec)
    assert not Materializer(run.spec).run().did_work  # the retry sees the txn: nothing twice
    assert view_dict(run.spec) == committed

    def crash_before(point):
        if point == "before_merge":
            raise KeyboardInterrupt("killed before the MERGE commit")

    write_batches(run, batches[1:], start=1)
    v = open_view(run.spec).version()
    with pytest.raises(KeyboardInterrupt):
        Materializer(run.spec, hook=crash_before).run()
    assert open_view(run.spec).version() == v
    Materializer(run.spec).run()
    assert view_dict(run.spec) == run.expected() == run.expected_batch()


@pytest.mark.heavy
def test_discarding_sums_are_not_applied_twice_by_repeated_runs(tmp_path):
    run = random_run(9, str(tmp_path), mode=AccumulationMode.DISCARDING, window_fn=Sessions(10 * S))
    batches = chunked(run, random.Random(3))
    for i, b in enumerate(batches):
        write_batches(run, [b], start=i)
        for _ in range(2):
            Materializer(run.spec).run()
    assert view_dict(run.spec) == run.expected() == run.expected_batch()


@pytest.mark.heavy
def test_the_paper_figure_14_sequence_ends_as_39_and_12(tmp_path):
    windowing = Windowing(
        Sessions(60 * S),
        trigger=AfterWatermark(early=AfterProcessingTime(60 * S), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING,
        allowed_lateness=3600 * S,
        on_time_behavior=OnTimeBehavior.FIRE_IF_NON_EMPTY,
    )
    sim = Simulator(windowing, combiners.sum())
    steps = []

    def at(processing_s, *, elements=(), watermark_s=None):
        fired = sim.advance(processing_time=processing_s * S)
        fired += sim.add_elements([("k", v, t * S) for v, t in elements])
        if watermark_s is not None:
            fired += sim.advance_watermark(watermark_s * S)
        steps.append(fired)

    at(0, elements=[(5, 10), (7, 120)])
    at(60)
    at(70, elements=[(3, 220), (4, 230), (3, 240)])
    at(130)
    at(150, elements=[(8, 170)])
    at(200, watermark_s=310)
    at(250, elements=[(9, 65)])
    at(300, elements=[(3, 400)])
    at(360)
    at(370, elements=[(8, 430), (1, 440)])
    at(380, watermark_s=600)
    steps.append(sim.advance_watermark(END_OF_TIME))
    import pyarrow as pa

    from sinks.lake.pane_log import PaneLog, PaneLogLayout

    layout = PaneLogLayout(value_fields=(("value", pa.int64()),))
    for vectorized in (None, False):
        lake = str(tmp_path / str(vectorized))
        spec = ViewSpec(
            "paper",
            lake,
            ("key",),
            (("value", combiners.sum()),),
            Sessions(60 * S),
            windowing.accumulation_mode,
            combine_fn=combiners.sum(),
        )
        identity = table_identity(spec, "panes", "pane log")
        log = PaneLog(spec.table_path("panes"), "paper", layout, **identity)
        mat = Materializer(spec, vectorized=vectorized)
        for i, step in enumerate(steps):
            log.append(i, step)
            mat.run()
        rows = sorted(open_view(spec).to_pyarrow_table().to_pylist(), key=lambda r: r["value"])
        assert [r["value"] for r in rows] == [12, 39]
        assert [(r["window_start_us"] // S, r["window_end_us"] // S) for r in rows] == [
            (400, 500),
            (10, 300),
        ]
        big = rows[1]
        assert {(a["start_us"] // S, a["end_us"] // S) for a in big["absorbed"]} >= {(10, 70)}


def _acc_aggregates():
    import pyarrow as pa

    return {
        "mean": {"avg": (combiners.mean(), pa.float64())},
        "to_list": {"xs": (combiners.to_list(), pa.list_(pa.int64()))},
        "mixed": {
            "n": (combiners.count(), pa.int64()),
            "avg": (combiners.mean(), pa.float64()),
            "xs": (combiners.to_list(), pa.list_(pa.int64())),
            "hi": (combiners.max(), pa.int64()),
        },
        # (event_time, value) accumulators, folded from their JSON
        "picked": {
            "first": (combiners.first(), pa.int64()),
            "last": (combiners.last(), pa.int64()),
            "n": (combiners.count(), pa.int64()),
        },
    }


@pytest.mark.heavy
@pytest.mark.parametrize("aggs", ["mean", "to_list", "mixed", "picked"])
@pytest.mark.parametrize("vectorized", [None, False], ids=["auto", "python"])
def test_discarding_mean_and_to_list_fold_equal_fold_and_batch(tmp_path, aggs, vectorized):
    for seed in seeds(0, 6):
        rng = random.Random(seed)
        run = random_run(
            500 + seed,
            str(tmp_path / f"{seed}"),
            mode=AccumulationMode.DISCARDING,
            window_fn=window_fns()[seed % 4],
            aggregates=_acc_aggregates()[aggs],
        )
        batches = chunked(run, rng)
        # A merged session's list concatenates its parts in pane-log order, and a batch's rows
        # are in canonical (not emission) order: lists compare as multisets there.
        ordered = _sorted_lists if run.spec.window_fn.is_merging else (lambda v: v)
        mat = Materializer(run.spec, vectorized=vectorized)
        folded = []
        for i, b in enumerate(batches):
            write_batches(run, [b], start=i)
            folded += b
            if rng.random() < 0.6 or i == len(batches) - 1:
                mat.run()
                expected = view_of_fold(run.spec, _fold(run.spec, folded))
                assert ordered(view_dict(run.spec)) == ordered(expected), (seed, i)
        assert ordered(view_dict(run.spec)) == ordered(run.expected())
        assert _sorted_lists(view_dict(run.spec)) == _sorted_lists(run.expected_batch())
        v = open_view(run.spec).version()
        assert not mat.run().did_work
        assert open_view(run.spec).version() == v


def _sorted_lists(view: dict) -> dict:
    """to_list values as sorted lists (batch lists elements in another order than panes do)."""
    return {
        at: {n: sorted(x) if isinstance(x, list) else x for n, x in row.items()}
        for at, row in view.items()
    }


@pytest.mark.heavy
def test_discarding_mean_folds_from_nothing_and_out_of_order(tmp_path):
    for seed in seeds(0, 5):
        run = random_run(
            600 + seed,
            str(tmp_path / f"{seed}"),
            mode=AccumulationMode.DISCARDING,
            window_fn=window_fns()[seed % 4],
            aggregates=_acc_aggregates()["mean"],
        )
        rng = random.Random(seed)
        for i, c in enumerate(chunked(run, rng, shuffle=True)):
            write_batches(run, [c], start=i)
            if rng.random() < 0.5:
                Materializer(run.spec).run()
        Materializer(run.spec).run()
        assert view_dict(run.spec) == run.expected(), seed
