"""The MERGE of changes into the view: partitioned by day, it rewrites only the days it touches."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import (
    AccumulationMode,
    AfterCount,
    FixedWindows,
    Simulator,
    Windowing,
    combiners,
)
from panes.fold import fold
from sinks.fold.materializer import Materializer
from sinks.lake.spec import ViewSpec
from sinks.lake.tables import open_view, table_identity
from tests.sinks.lakes import (
    S,
    view_dict,
    view_of_fold,
)


@pytest.mark.heavy
def test_view_is_partitioned_by_day_and_a_merge_rewrites_only_the_days_it_touches(tmp_path):
    """Streaming panes touch recent windows: the MERGE must leave the other days' files alone."""
    from deltalake import DeltaTable

    from panes import Repeatedly
    from sinks.lake.pane_log import PaneLog, PaneLogLayout

    hour, day = 3600 * S, 86400 * S
    windowing = Windowing(
        FixedWindows(hour),
        trigger=Repeatedly(AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
    )
    spec = ViewSpec(
        "p",
        str(tmp_path),
        ("key",),
        (("value", combiners.sum()),),
        FixedWindows(hour),
        AccumulationMode.ACCUMULATING,
        combine_fn=combiners.sum(),
    )
    sim = Simulator(windowing, combiners.sum())
    log = PaneLog(
        spec.table_path("panes"), "p", PaneLogLayout(), **table_identity(spec, "panes", "pane log")
    )
    elements = [(k, 1.0, t) for t in range(0, 5 * day, 6 * hour) for k in "ab"]
    log.append(0, sim.add_elements(elements))
    Materializer(spec).run()
    view = DeltaTable(spec.table_path("current"))
    assert view.metadata().partition_columns == ["window_day"]
    before = set(view.file_uris())
    assert len(before) == 5  # one file per day
    recent = [(k, 2.0, 4 * day + t) for t in (S, 6 * hour + S) for k in "abc"]
    log.append(1, sim.add_elements(recent))
    result = Materializer(spec).run()
    assert result.metrics["num_target_files_scanned"] == 1
    after = set(DeltaTable(spec.table_path("current")).file_uris())
    gone = before - after
    assert len(gone) == 1 and "window_day=1970-01-05" in gone.pop()
    rows = {
        (r["key"], r["window_start_us"]): r for r in open_view(spec).to_pyarrow_table().to_pylist()
    }
    assert rows[("a", 4 * day)]["value"] == 3.0 and rows[("c", 4 * day + 6 * hour)]["value"] == 2.0
    assert rows[("a", 4 * day)]["window_day"].isoformat() == "1970-01-05"
    assert view_dict(spec) == view_of_fold(spec, fold(sim.panes, spec.mode, spec.combine_fn))
