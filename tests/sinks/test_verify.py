"""verify: the view against the pane log refolded and the batch over the raw events."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from sinks.tables import open_view
from tests.sinks.lakes import (
    MODES,
    materialized_lake,
    window_fns,
)


@pytest.mark.parametrize("seed", range(8))
def test_verify_passes_on_random_pipelines_and_fails_on_a_tampered_view(tmp_path, seed):
    from sinks.verify import verify

    run = materialized_lake(tmp_path, seed, mode=MODES[seed % 3], window_fn=window_fns()[seed % 4])
    report = verify(run.spec, elements=run.elements)
    assert report.ok, str(report)
    if seed == 0:
        dt = open_view(run.spec)
        k = run.spec.value_names[0]
        dt.update({k: f"{k} + 1"})
        bad = verify(run.spec, elements=run.elements)
        assert not bad.ok and "differs" in str(bad)
