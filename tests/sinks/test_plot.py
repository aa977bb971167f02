"""plot writes a PNG of a key's panes."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, Sessions
from tests.sinks.lakes import (
    S,
    materialized_lake,
)


@pytest.mark.heavy
def test_plot_writes_a_png(tmp_path):
    from sinks.presentation.key_plot import plot

    run = materialized_lake(
        tmp_path, 6, window_fn=Sessions(10 * S), mode=AccumulationMode.ACCUMULATING_AND_RETRACTING
    )
    key = next(iter(run.expected()))[0][0]
    out = plot(run.spec, key, str(tmp_path / "k.png"))
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
