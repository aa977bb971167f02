"""jobs.driver.runs: a lake remembers how its operator state is laid out, and refuses a run that
would lose it."""

from dataclasses import replace
from pathlib import Path

import pytest

from jobs.config.load import load_pipeline
from jobs.config.pipeline import PipelineConfigError
from jobs.driver.preflight import check_state_layout

DEMO = Path(__file__).resolve().parents[2] / "conf" / "demo.toml"


def test_a_changed_state_buckets_is_refused_naming_the_field(tmp_path):
    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    check_state_layout(pipeline)  # first run: records the setting
    check_state_layout(pipeline)  # same setting: fine
    changed = replace(pipeline, state_buckets=pipeline.state_buckets * 2)
    with pytest.raises(PipelineConfigError) as error:
        check_state_layout(changed)
    assert error.value.field == "state_buckets"
    assert f"state_buckets = {pipeline.state_buckets}" in str(error.value)


def test_a_new_lake_spreads_its_buckets_evenly_over_the_shuffle_partitions(tmp_path):
    import json

    from jobs.executor.operator_input import spark_partition_of_int

    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    ids = check_state_layout(pipeline, partitions=2).bucket_ids
    assert len(set(ids)) == len(ids) == pipeline.state_buckets and min(ids) >= 0
    per_partition = [spark_partition_of_int(i, 2) for i in ids]
    assert per_partition.count(0) == per_partition.count(1)
    # the plain numbers 0..63 would not be: Spark's Murmur3 puts 27 and 37 on each
    assert [spark_partition_of_int(i, 2) for i in range(64)].count(0) == 27
    kept = check_state_layout(pipeline, partitions=5)  # recorded: a lake keeps its values
    assert kept.bucket_ids == ids and kept.shards == 2
    recorded = json.loads((tmp_path / "lake" / "_state_layout.json").read_text())
    assert tuple(recorded["bucket_ids"]) == ids


def test_a_lake_of_another_layout_format_is_refused(tmp_path):
    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "_state_layout.json").write_text(
        f'{{"state_buckets": {pipeline.state_buckets}}}'
    )
    with pytest.raises(PipelineConfigError, match="state layout format None") as error:
        check_state_layout(pipeline, partitions=2)
    assert error.value.field == "lake"
    # a lake whose checkpoint predates the layout file is refused too
    other = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "old")})
    Path(other.checkpoint_path).mkdir(parents=True)
    with pytest.raises(PipelineConfigError, match=r"no _state_layout\.json"):
        check_state_layout(other, partitions=2)


def test_a_lake_of_an_older_layout_keeps_its_checkpoint_partitions_as_shards(tmp_path):
    """Formats 1 and 2 kept the state in Spark's store, spread by the checkpoint's shuffle
    partitions: the run upgrading it (tests/spark/test_state_upgrade.py) keeps them as shards."""
    import json

    from jobs.driver.preflight import STATE_LAYOUT_FORMAT, record_state_layout

    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    ids = check_state_layout(pipeline, partitions=2).bucket_ids
    path = tmp_path / "lake" / "_state_layout.json"
    older = {k: v for k, v in json.loads(path.read_text()).items() if k != "shards"}
    path.write_text(json.dumps({**older, "format": 2}))
    offsets = Path(pipeline.checkpoint_path) / "offsets"
    offsets.mkdir(parents=True)
    conf = {"spark.sql.shuffle.partitions": "5"}
    (offsets / "0").write_text("v1\n" + json.dumps({"batchTimestampMs": 1, "conf": conf}) + "\n")
    layout = check_state_layout(pipeline, partitions=2)
    assert (layout.bucket_ids, layout.shards, layout.format) == (ids, 5, 2)
    record_state_layout(pipeline, layout)
    recorded = json.loads(path.read_text())
    assert (recorded["format"], recorded["shards"]) == (STATE_LAYOUT_FORMAT, 5)
    assert check_state_layout(pipeline, partitions=2).format == STATE_LAYOUT_FORMAT


@pytest.mark.parametrize("older", [3, 4, 5])
def test_a_lake_of_shard_state_format_3_to_5_is_read_and_recorded_as_the_current_format(
    tmp_path, older
):
    """Formats 3 (shard files, every bucket per key), 4 (window tables without windows the
    engine holds) and 5 (window tables whose held keys the engine holds whole) need no move:
    their buckets change form when visited; recording the current format makes an older
    panestore refuse the lake."""
    import json

    from jobs.driver.preflight import STATE_LAYOUT_FORMAT, record_state_layout

    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    check_state_layout(pipeline, partitions=2)
    path = tmp_path / "lake" / "_state_layout.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": older}))
    layout = check_state_layout(pipeline, partitions=2)
    assert (layout.format, layout.shards) == (older, 2)
    record_state_layout(pipeline, layout)
    assert json.loads(path.read_text())["format"] == STATE_LAYOUT_FORMAT == 6
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 7}))
    with pytest.raises(PipelineConfigError, match="format 7"):
        check_state_layout(pipeline, partitions=2)


def test_progress_lines_count_input_records_and_say_what_control_rows_were():
    """A drain batch read one control row (the sentinel) and no record: its line says 0 rows, and
    the run's summary does not count the control row as input."""
    from types import SimpleNamespace as Progress

    from jobs.driver.batch_sink import BatchStats
    from jobs.driver.runs import BatchReport, RunResult

    def progress(batch_id: int, records: int, control: int) -> Progress:
        sources = [Progress(numInputRows=records), Progress(numInputRows=control)]
        return Progress(
            batchId=batch_id,
            numInputRows=records + control,
            sources=sources,
            eventTime={},
            durationMs={},
        )

    data = BatchReport.of(progress(0, 98, 0), BatchStats(0, panes=98, committed=True))
    drain = BatchReport.of(progress(1, 0, 1), BatchStats(1, panes=4, committed=True))
    assert (data.rows, data.control_rows, drain.rows, drain.control_rows) == (98, 0, 0, 1)
    assert drain.line().startswith("batch 1: 0 rows (+1 control row: watermark moves) -> 4 panes")
    assert (
        RunResult([data, drain])
        .summary()
        .startswith("2 batches, 98 rows (+1 control row: watermark moves), 102 panes")
    )
