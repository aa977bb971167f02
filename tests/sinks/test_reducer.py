"""The reference reducer: pane rows folded from nothing equal panes.fold.fold."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from sinks.fold.reducer import fold_rows
from tests.examples import seeds
from tests.sinks.lakes import (
    chunked,
    random_run,
    write_batches,
)


@pytest.mark.heavy
def test_fold_rows_from_nothing_equals_fold(tmp_path):
    for seed in seeds(0, 10):
        run = random_run(300 + seed, str(tmp_path / str(seed)))
        write_batches(run, chunked(run, random.Random(seed)))
        from sinks.fold.pane_log_changes import pane_log_commits, read_pane_rows
        from sinks.lake.tables import open_pane_log

        dt = open_pane_log(run.spec)
        rows = read_pane_rows(dt, pane_log_commits(dt, -1, dt.version()))
        got = {
            at: {n: r[n] for n in run.spec.value_names}
            for at, r in fold_rows(run.spec, rows).items()
        }
        assert got == run.expected()
