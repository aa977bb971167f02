"""``panestore changes``: the view's change feed in the output formats of ``query`` (no Spark: the
lake is written with the sinks API under the demo configuration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from jobs.config.load import load_pipeline
from jobs.config.sink_spec import view_spec
from jobs.driver.batch_sink import BatchSink
from panes import END_OF_TIME, Simulator
from sinks.fold.materializer import Materializer
from sinks.lake.tables import arrow_schema, open_view
from tests.sinks.lakes import replay_changes, view_dict

DEMO = Path(__file__).resolve().parents[2] / "conf" / "demo.toml"
MIN = 60_000_000


def demo_conf(tmp_path: Path) -> Path:
    """The demo configuration written to ``tmp_path/demo.toml``, its lake and landing directory
    under ``tmp_path`` (not created)."""
    conf = tmp_path / "demo.toml"
    text = DEMO.read_text().replace('"demo-data/lake"', repr(str(tmp_path / "lake")))
    conf.write_text(text.replace('"demo-data/landing"', repr(str(tmp_path / "landing"))))
    return conf


def demo_lake(tmp_path: Path) -> tuple[str, object]:
    """The demo configuration on a lake under ``tmp_path``, the view materialized after each of
    three rounds: device d1's first session closes, then a late play between it and d1's
    second session merges the two (the first is retracted, the merged one emitted); d2's
    session gets late plays (refined twice)."""
    conf = demo_conf(tmp_path)
    pipeline = load_pipeline(conf)
    spec = view_spec(pipeline)
    sink = BatchSink(pipeline)
    sink.create_tables()
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())
    rounds = [
        ([("d1", 0), ("d1", 40 * MIN), ("d2", 5 * MIN)], 40 * MIN),
        ([("d1", 20 * MIN), ("d2", 5 * MIN)], 80 * MIN),
        ([("d2", 5 * MIN)], END_OF_TIME),
    ]
    for batch, (plays, watermark) in enumerate(rounds):
        panes = sim.add_elements([((d, "DE"), {"seconds": 10.0}, t) for d, t in plays])
        panes += sim.advance_watermark(watermark)
        sink.pane_log.append(batch, panes)
        Materializer(spec).run()
    return str(conf), spec


@pytest.mark.heavy
def test_changes_prints_the_feed_in_the_formats_of_query(tmp_path, capsys):
    conf, spec = demo_lake(tmp_path)
    latest = open_view(spec).version()

    assert main(["changes", conf, "--since", "0", "--format", "json"]) == 0
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert out.err.strip().endswith(f"continue with --since {latest + 1}")
    kinds = {r["_change_type"] for r in rows}
    assert kinds == {"insert", "update_preimage", "update_postimage", "delete"}
    replayed = replay_changes(spec, rows)
    assert {at: {"plays": r["plays"], "watched": r["watched"]} for at, r in replayed.items()} == (
        view_dict(spec)
    )
    d1 = [r for r in rows if r["device_id"] == "d1"]
    assert [r["_change_type"] for r in d1 if r["_change_type"] == "delete"]  # merged away

    assert main(["changes", conf, "--since", "0", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split(",")
    assert header[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    assert header[:-3] == arrow_schema(open_view(spec)).names
    assert len(lines) == len(rows) + 1

    parquet = tmp_path / "changes.parquet"
    args = ["changes", conf, "--since", "1", "--until", str(latest), "--format", "parquet"]
    assert main([*args, "--out", str(parquet)]) == 0
    import pyarrow.parquet as pq

    assert pq.read_table(parquet).num_rows == sum(r["_commit_version"] >= 1 for r in rows)


@pytest.mark.heavy
def test_changes_caught_up_and_errors(tmp_path, capsys):
    conf, spec = demo_lake(tmp_path)
    latest = open_view(spec).version()
    assert main(["changes", conf, "--since", str(latest + 1), "--format", "csv"]) == 0
    out = capsys.readouterr()
    assert out.out.count("\n") == 1  # the header only
    assert f"continue with --since {latest + 1}" in out.err
    assert main(["changes", conf, "--since", str(latest + 5)]) == 2  # misuse
    assert f"after the latest version of the current view at {spec.lake}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["changes", conf, "--since", "-1"])
    assert e.value.code == 2
    assert "expected a view version" in capsys.readouterr().err
