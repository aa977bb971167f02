"""optimize and vacuum keep time travel and folding."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, FixedWindows
from sinks.fold.materializer import Materializer
from sinks.lake.tables import open_view
from tests.sinks.lakes import (
    S,
    chunked,
    random_run,
    view_dict,
    write_batches,
)


@pytest.mark.heavy
def test_optimize_and_vacuum_keep_time_travel_and_folding(tmp_path):
    from sinks.lake.errors import LakeError
    from sinks.presentation.duck import current_as_of
    from sinks.upkeep.maintenance import optimize, vacuum

    run = random_run(
        8, str(tmp_path), mode=AccumulationMode.DISCARDING, window_fn=FixedWindows(10 * S)
    )
    batches = chunked(run, random.Random(8))
    half = len(batches) // 2
    write_batches(run, batches[:half])
    Materializer(run.spec).run()
    first = view_dict(run.spec)
    v = open_view(run.spec).version()
    optimize(run.spec)
    write_batches(run, batches[half:], start=half)
    Materializer(run.spec).run()  # skips the OPTIMIZE commits of the pane log
    assert view_dict(run.spec) == run.expected()
    with pytest.raises(LakeError, match="break time travel"):
        vacuum(run.spec, retention_hours=0)
    vacuum(run.spec)  # default retention: nothing recent goes
    assert view_dict(run.spec, current_as_of(run.spec, v)) == first
