"""jobs.driver.plan: tables record their pipeline's configuration fingerprint; another configuration
is refused."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("deltalake")

from jobs.config.load import pipeline_from_dict
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import BatchSink
from sinks.fold.materializer import Materializer
from sinks.lake.errors import ConfigMismatch
from sinks.lake.lake_format import FINGERPRINT_PROPERTY
from tests.jobs.test_pipeline import base


def _versions(p) -> dict[str, int]:
    from deltalake import DeltaTable

    return {t: DeltaTable(p.table_path(t)).version() for t in ("panes", "late", "rejected")}


@pytest.mark.parametrize(
    "change",
    [
        {"window": "FixedWindows(2m)"},
        {"aggregates": {"plays": "count()", "watched": "mean(seconds)"}},
    ],
    ids=["window", "aggregates"],
)
def test_tables_of_another_configuration_are_refused_untouched(tmp_path, change):
    from deltalake import DeltaTable

    first = pipeline_from_dict(base(lake=str(tmp_path / "lake")))
    sink = BatchSink(first)
    sink.create_tables()
    assert sink.pane_log.append(0, [])
    conf = DeltaTable(first.table_path("panes")).metadata().configuration
    assert conf[FINGERPRINT_PROPERTY] == view_spec(first).fingerprint
    Materializer(view_spec(first)).run()
    before = _versions(first)

    other = pipeline_from_dict(base(lake=str(tmp_path / "lake"), **change))
    assert view_spec(other).fingerprint != view_spec(first).fingerprint
    with pytest.raises(ConfigMismatch, match=r"different pipeline configuration.*Nothing was"):
        BatchSink(other).create_tables()
    with pytest.raises(ConfigMismatch, match="different pipeline configuration"):
        BatchSink(other).pane_log.append(1, [])
    with pytest.raises(ConfigMismatch, match="different pipeline configuration"):
        Materializer(view_spec(other)).run()
    assert _versions(first) == before

    # the first configuration still opens them
    sink = BatchSink(first)
    sink.create_tables()
    assert sink.pane_log.append(1, [])


def test_the_materializer_refuses_a_pane_log_of_another_configuration(tmp_path):
    first = pipeline_from_dict(base(lake=str(tmp_path / "lake")))
    BatchSink(first).create_tables()
    other = pipeline_from_dict(base(lake=str(tmp_path / "lake"), window="Sessions(1m)"))
    with pytest.raises(ConfigMismatch, match=r"pane log at .* different pipeline configuration"):
        Materializer(view_spec(other)).run()
    assert not os.path.exists(first.table_path("current"))
