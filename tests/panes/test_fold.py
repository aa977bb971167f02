"""The reference fold and batch work on record values (dicts), as pipelines produce them; the
fold of the Dataflow paper's retracting panes is the paper's final result."""

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
from tests.scenarios.format import load_all
from tests.scenarios.on_simulator import run

S = 1_000_000


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


def test_the_paper_session_example_folds_to_its_two_final_sessions():
    """``paper.toml`` (its panes are checked step by step in test_simulator) ends at the end of
    time: the retractions net out to the sessions [10s, 300s) and [400s, 500s)."""
    sc = load_all()["dataflow_paper_session_example"]
    _, sim = run(sc)
    view = fold(sim.panes, sim.windowing.accumulation_mode, combiners.sum())
    assert sorted(view.values()) == [12, 39]
    assert sum(view.values()) == 51
    assert [(w.start // S, w.end // S) for _, w in sorted(view)] == [(10, 300), (400, 500)]
