"""verify: the view against the pane log refolded and the batch over the raw events."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import END_OF_TIME, AccumulationMode, AfterCount, Sessions
from sinks.lake.tables import open_view
from tests.sinks.lakes import (
    MODES,
    materialized_lake,
    scripted_run,
    view_dict,
    window_fns,
    write_lake,
)


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(8))
def test_verify_passes_on_random_pipelines_and_fails_on_a_tampered_view(tmp_path, seed):
    from sinks.verification.view_check import verify

    run = materialized_lake(tmp_path, seed, mode=MODES[seed % 3], window_fn=window_fns()[seed % 4])
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    if seed == 0:
        dt = open_view(run.spec)
        k = run.spec.value_names[0]
        dt.update({k: f"{k} + 1"})
        bad = verify(run.spec, elements=run.elements)
        assert not bad.ok and "differs" in str(bad)


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(8))
def test_verify_compares_first_and_last_with_the_batch_exactly(tmp_path, seed):
    """first() and last() of whole values in every mode, fixed, sliding windows and sessions: the
    batch picks by event time in DuckDB SQL (fixed, sliding) or panes.fold.batch (sessions),
    ties by the value as the engine does; a tampered value is a difference."""
    import pyarrow as pa

    from panes import combiners
    from sinks.verification.batch_check import sql_expressible
    from sinks.verification.view_check import verify

    aggregates = {
        "first": (combiners.first(), pa.int64()),
        "last": (combiners.last(), pa.int64()),
    }
    run = materialized_lake(
        tmp_path,
        700 + seed,
        mode=MODES[seed % 3],
        window_fn=window_fns()[seed % 3],
        aggregates=aggregates,
    )
    assert sql_expressible(run.spec) == (not run.spec.window_fn.is_merging)
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    assert report.checks[1].windows > 0
    if seed < 2:
        open_view(run.spec).update({"last": "last + 1"})
        assert not verify(run.spec, elements=run.elements).ok


# -- a lake whose watermark has not closed every window (a run that has not drained) ---------------

S = 1_000_000


def _sessions_lake(tmp_path):
    """Sessions of 10 s, no allowed lateness, a sum fired every 2 elements (nothing at the end of
    a window: a session's last elements reach the view with its closing pane, when the watermark
    passes its merge horizon, end - 1 + gap).

    Key a: [0 s, 11 s) fires 3; an element at 10 s merges it into [0 s, 20 s) (no firing: one
    element since). Key b: [0 s, 10 s) holds 7, unfired. The watermark then moves to 25 s: b's
    horizon (19 s) is behind it, b closes with its pane 7 (watermark 25 s, in the pane log); a's
    session keeps its state until 29 s (its end plus the lateness is behind the watermark, but
    an element at 19 s would still merge with it), and the view still holds the early [0 s, 11 s).
    """
    from panes import Repeatedly, Windowing

    windowing = Windowing(
        Sessions(10 * S),
        trigger=Repeatedly(AfterCount(2)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
    )
    script = [
        [("a", 1, 0), ("a", 2, 1 * S)],
        5 * S,
        [("a", 4, 10 * S), ("b", 7, 0)],
        25 * S,
    ]
    run = scripted_run(str(tmp_path), windowing, script)
    write_lake(run, run.steps, run.dropped)
    return run


@pytest.mark.heavy
def test_verify_before_a_drain_compares_the_final_windows_and_counts_the_open_ones(tmp_path):
    from sinks.verification.view_check import verify

    run = _sessions_lake(tmp_path)
    assert run.live == {(("a",), (0, 20 * S))}  # the engine still holds a's session
    assert view_dict(run.spec) == {
        (("a",), (0, 11 * S)): {"value": 3},
        (("b",), (0, 10 * S)): {"value": 7},
    }

    report = verify(run.spec, elements=run.elements)
    text = str(report)
    assert report.ok, text
    assert report.watermark_us == 25 * S
    refold, batch = report.checks
    assert (refold.windows, refold.open) == (2, None)  # the refold compares every window
    assert (batch.windows, batch.open) == (1, 1)
    assert text.splitlines()[-1] == (
        "verify: OK: 1 window compared, 1 still open (watermark 1970-01-01T00:00:25.000Z)"
    )

    # a difference in a final window fails: an element the view never counted in b's session
    bad = verify(run.spec, elements=[*run.elements, ("b", 100, 2 * S)])
    assert not bad.ok
    assert "extra in view: key 'b' window [0, 10000000) = {'value': 7}" in str(bad)
    assert "missing in view: key 'b' window [0, 12000000) (expected {'value': 107})" in str(bad)
    # one in the open session does not (it may still come: a's session has not closed)
    assert verify(run.spec, elements=[*run.elements, ("a", 100, 15 * S)]).ok

    # the drain: every window final, compared
    assert run.sim is not None
    more = scripted_run(str(tmp_path), run.windowing, [END_OF_TIME], sim=run.sim)
    write_lake(run, more.steps, more.dropped, start=len(run.steps))
    drained = verify(run.spec, elements=run.elements)
    assert drained.ok, str(drained)
    assert (drained.checks[1].windows, drained.checks[1].open) == (2, 0)
    assert str(drained).splitlines()[-1] == (
        "verify: OK: 2 windows compared, 0 still open (watermark: the end of time)"
    )


@pytest.mark.heavy
def test_a_window_within_its_allowed_lateness_is_still_open(tmp_path):
    """Fixed windows of 10 s, 20 s of allowed lateness, late panes every 2 elements: a late
    element of [0 s, 10 s) waits in the engine until the watermark passes 30 s."""
    from panes import AfterWatermark, FixedWindows, Windowing
    from sinks.verification.view_check import verify

    windowing = Windowing(
        FixedWindows(10 * S), trigger=AfterWatermark(late=AfterCount(2)), allowed_lateness=20 * S
    )
    script = [[("k", 1, 1 * S)], 10 * S, [("k", 2, 2 * S), ("k", 3, 12 * S)], 25 * S]
    run = scripted_run(str(tmp_path), windowing, script)
    write_lake(run, run.steps, run.dropped)
    assert view_dict(run.spec) == {
        (("k",), (0, 10 * S)): {"value": 1},  # the late 2 not fired yet
        (("k",), (10 * S, 20 * S)): {"value": 3},
    }
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    assert (report.checks[1].windows, report.checks[1].open) == (0, 2)

    more = scripted_run(str(tmp_path), windowing, [31 * S], sim=run.sim)
    write_lake(run, more.steps, more.dropped, start=len(run.steps))
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    assert (report.checks[1].windows, report.checks[1].open) == (1, 1)
    # [0 s, 10 s) is final now: a difference there fails
    assert not verify(run.spec, elements=[*run.elements, ("k", 5, 3 * S)]).ok


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(12))
def test_verify_passes_on_random_pipelines_that_have_not_drained(tmp_path, seed):
    """Stopped anywhere: the view equals the batch over every window final at the pane log's
    watermark, and no window the engine still holds is compared."""
    from sinks.verification.view_check import verify

    run = materialized_lake(
        tmp_path, seed, mode=MODES[seed % 3], window_fn=window_fns()[seed % 4], drain=False
    )
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    batch = report.checks[1]
    expected = run.expected_batch()
    assert batch.windows + batch.open == len(expected)
    assert batch.open >= len(run.live & set(expected))


# -- the batch's SQL of the picked aggregates ----------------------------------------------------

NAN = float("nan")


@pytest.mark.parametrize("seed", range(6))
def test_the_batch_sql_of_picked_aggregates_is_panes_fold_batch_ties_nulls_and_nan_included(seed):
    """verify's DuckDB forms of max_by, min_by, first and last break ties as the combiners do:
    over random records (few distinct orderings, nulls, NaN) both batches give the same
    windows and values."""
    import random

    from panes import AccumulationMode, FixedWindows, SlidingWindows, combiners
    from sinks.lake.spec import ViewSpec
    from sinks.verification.batch_check import batch_engine, batch_sql, elements_table

    rng = random.Random(seed)
    aggregates = (
        ("hi", combiners.max_by("page", "by")),
        ("lo", combiners.min_by("page", "by")),
        ("opening", combiners.first("page")),
        ("latest", combiners.last("page")),
    )
    window_fn = FixedWindows(10) if seed % 2 else SlidingWindows(20, 10)
    spec = ViewSpec("p", "lake", ("user",), aggregates, window_fn, AccumulationMode.DISCARDING)
    elements = [
        (
            rng.choice("ab"),
            {"page": rng.choice(["x", "y", "z", None]), "by": rng.choice([None, 1.0, 2.0, NAN])},
            rng.randint(0, 8) * 5,
        )
        for _ in range(60)
    ]
    table = elements_table(spec, elements)
    expected = batch_engine(spec, table)
    assert expected and batch_sql(spec, table) == expected
