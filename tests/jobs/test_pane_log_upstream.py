"""A pane log read as another pipeline's input: columns, version ranges, the final view."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from jobs.reading.pane_log.upstream import (
    EVENT_TIME_US,
    WATERMARK_US,
    WEIGHT,
    final_view_elements,
    latest_version,
    pane_log_columns,
    read_elements,
)
from panes import (
    END_OF_TIME,
    AccumulationMode,
    DefaultTrigger,
    FixedWindows,
    Retracted,
    Sessions,
    Simulator,
    Windowing,
    combiners,
)
from panes.fold import batch, fold
from sinks.fold.materializer import Materializer
from sinks.lake.errors import ForeignTable
from tests.sinks.lakes import S, chunked, random_run, write_batches

RETRACTING = AccumulationMode.ACCUMULATING_AND_RETRACTING
COLUMNS = [("key", pa.string()), ("value", pa.int64())]


@pytest.fixture
def upstream(tmp_path):
    """A retracting sessions run written to a pane log in several versions, materialized."""
    for seed in range(1, 50):  # a run whose sessions merged and were withdrawn
        run = random_run(seed, str(tmp_path / f"lake{seed}"), RETRACTING, Sessions(10 * S), False)
        if any(p.is_retraction for p in run.panes) and any(p.supersedes for p in run.panes):
            break
    else:
        raise AssertionError("no run with merged sessions")
    write_batches(run, chunked(run, random.Random(seed)))
    Materializer(run.spec).run()
    return run


def test_the_columns_of_a_pane_log_and_its_mode(upstream):
    cols = pane_log_columns(upstream.spec.table_path("panes"))
    assert (cols.pipeline, cols.keys, cols.values) == (
        "p",
        (("key", "string"),),
        (("value", "long"),),
    )
    assert cols.retracting
    with pytest.raises(ForeignTable, match="belongs to pipeline 'p', not 'other'"):
        pane_log_columns(upstream.spec.table_path("panes"), "other")


def test_version_ranges_read_each_pane_once_with_its_weight_and_a_replay_reads_the_same(upstream):
    path, last = (
        upstream.spec.table_path("panes"),
        latest_version(upstream.spec.table_path("panes")),
    )
    whole = read_elements(path, "p", -1, last, COLUMNS)
    assert whole.num_rows == len(upstream.panes)
    assert sorted(whole.column(WEIGHT).to_pylist()) == sorted(
        -1 if p.is_retraction else 1 for p in upstream.panes
    )
    assert sorted(whole.column(EVENT_TIME_US).to_pylist()) == sorted(
        p.timestamp for p in upstream.panes
    )
    cut = last // 2
    parts = [
        read_elements(path, "p", -1, cut, COLUMNS),
        read_elements(path, "p", cut, last, COLUMNS),
    ]
    assert pa.concat_tables(parts).equals(whole)
    assert read_elements(path, "p", cut, last, COLUMNS).equals(parts[1])  # a replay
    assert read_elements(path, "p", last, last, COLUMNS).num_rows == 0
    with pytest.raises(ForeignTable, match="not 'other'"):
        read_elements(path, "other", -1, last, COLUMNS)


def test_a_downstream_over_the_version_ranges_equals_the_batch_over_the_final_view(upstream):
    """What the Spark job does with the rows, in pure Python: one bundle per version range, the
    watermark the largest upstream watermark of the earlier ranges."""
    path, last = (
        upstream.spec.table_path("panes"),
        latest_version(upstream.spec.table_path("panes")),
    )
    totals = combiners.aggregates(total=combiners.sum("value"), n=combiners.count())
    windowing = Windowing(
        FixedWindows(30 * S), DefaultTrigger(), RETRACTING, allowed_lateness=10**6 * S
    )
    down = Simulator(windowing, totals, weighted=True)
    watermark = None
    for after in range(-1, last):
        rows = read_elements(path, "p", after, after + 1, COLUMNS).to_pylist()
        if watermark is not None:
            down.advance_watermark(watermark)
        values = [{"value": r["value"]} for r in rows]
        down.add_elements(
            [
                ("all", v if r[WEIGHT] > 0 else Retracted(v), r[EVENT_TIME_US])
                for r, v in zip(rows, values, strict=True)
            ]
        )
        marks = [r[WATERMARK_US] for r in rows if r[WATERMARK_US] is not None]
        watermark = max([*marks, *([watermark] if watermark is not None else [])], default=None)
    down.advance_watermark(END_OF_TIME)
    assert not down.dropped
    final = final_view_elements(upstream.spec.table_path("current"), ["key", "value"]).to_pylist()
    expected = batch(
        [("all", {"value": r["value"]}, r["ts_us"]) for r in final], FixedWindows(30 * S), totals
    )
    assert fold(down.panes, RETRACTING, totals) == expected
    assert len(final) == len(fold(upstream.panes, RETRACTING, upstream.spec.combine_fn))


def test_a_replay_after_optimize_and_a_forced_vacuum_reads_the_same_rows(upstream):
    from sinks.upkeep.maintenance import optimize, vacuum

    path = upstream.spec.table_path("panes")
    last = latest_version(path)
    before = read_elements(path, "p", 0, last, COLUMNS)
    optimize(upstream.spec, tables=("panes",))
    vacuum(upstream.spec, retention_hours=0, force=True, tables=("panes",))
    assert latest_version(path) > last  # maintenance commits, which add no rows
    assert read_elements(path, "p", 0, last, COLUMNS).equals(before)
    assert read_elements(path, "p", last, latest_version(path), COLUMNS).num_rows == 0
