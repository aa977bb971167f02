"""Opening tables: missing, foreign, of another configuration or lake format; nothing is written."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, FixedWindows, Sessions, SlidingWindows, combiners
from sinks.fold.materializer import Materializer
from sinks.lake.errors import (
    ConfigMismatch,
    ForeignTable,
    FormatMismatch,
    TableMissing,
)
from sinks.lake.tables import open_view
from tests.sinks.lakes import (
    S,
    chunked,
    materialized_lake,
    random_run,
    write_batches,
)


@pytest.mark.heavy
def test_errors_leave_tables_untouched(tmp_path):
    run = materialized_lake(
        tmp_path, 2, mode=AccumulationMode.DISCARDING, window_fn=FixedWindows(10 * S)
    )
    v = open_view(run.spec).version()
    with pytest.raises(TableMissing, match="pane log not found"):
        Materializer(replace(run.spec, lake=str(tmp_path / "nowhere"))).run()
    (tmp_path / "foreign" / "panes").mkdir(parents=True)
    (tmp_path / "foreign" / "panes" / "x.csv").write_text("a,b\n")
    with pytest.raises(ForeignTable, match="not a Delta table"):
        Materializer(replace(run.spec, lake=str(tmp_path / "foreign"))).run()
    # another configuration: other window function, other aggregate
    with pytest.raises(ConfigMismatch):
        Materializer(replace(run.spec, window_fn=SlidingWindows(20 * S, 10 * S))).run()
    other = replace(run.spec, aggregates=(("total", combiners.sum()),))
    with pytest.raises(ConfigMismatch, match="other keys or aggregates"):
        Materializer(other).run()
    with pytest.raises(ForeignTable, match="belongs to pipeline"):
        Materializer(replace(run.spec, name="other")).run()
    assert open_view(run.spec).version() == v


def test_tables_of_another_lake_format_are_refused_untouched(tmp_path):
    """One lake format version in the table properties, checked when a table is opened: a table
    without it (an older panestore's) or with another one is neither appended to nor folded."""
    import os

    from deltalake import DeltaTable

    from sinks.lake.lake_format import FORMAT_PROPERTY
    from sinks.lake.pane_log import pane_log_schema

    for found, configuration in (
        ("no panestore format", None),
        ("lake format 2", {FORMAT_PROPERTY: "2"}),
    ):
        run = random_run(7, str(tmp_path / found.replace(" ", "_")), window_fn=Sessions(10 * S))
        path = run.spec.table_path("panes")
        DeltaTable.create(
            path,
            pane_log_schema(run.layout),
            configuration=configuration,
            raise_if_key_not_exists=False,
        )
        with pytest.raises(FormatMismatch, match=rf"{found}.*Nothing was written"):
            write_batches(run, chunked(run, random.Random(1)))
        with pytest.raises(FormatMismatch, match=rf"pane log at .* {found}"):
            Materializer(run.spec).run()
        assert DeltaTable(path).version() == 0
        assert not os.path.exists(run.spec.table_path("current"))
