"""The reference fold and batch work on record values (dicts), as pipelines produce them."""

from panes import (
    AccumulationMode,
    AfterCount,
    FixedWindows,
    Repeatedly,
    Simulator,
    Windowing,
    combiners,
)
from panes.fold import batch, fold


def test_fold_and_batch_of_record_values_with_drops():
    agg = combiners.aggregates(plays=combiners.count(), watched=combiners.sum("s"))
    windowing = Windowing(
        FixedWindows(10),
        trigger=Repeatedly(AfterCount(1)),
        accumulation_mode=AccumulationMode.DISCARDING,
    )
    sim = Simulator(windowing, agg)
    sim.add_elements([("k", {"s": 1}, 5), ("k", {"s": 2}, 15)])
    sim.advance_watermark(30)
    sim.add_elements([("k", {"s": 4}, 6)])  # expired: dropped, and left out of the batch
    elements = [("k", {"s": 1}, 5), ("k", {"s": 2}, 15), ("k", {"s": 4}, 6)]
    expected = batch(elements, windowing.window_fn, agg, sim.dropped)
    assert [d.value for d in sim.dropped] == [{"s": 4}]
    assert fold(sim.panes, windowing.accumulation_mode, agg) == expected
    assert sorted(v["watched"] for v in expected.values()) == [1, 2]
