"""jobs.driver.runs: a lake remembers how its operator state is laid out, and refuses a run that
would lose it."""

from dataclasses import replace
from pathlib import Path

import pytest

from jobs.config.load import load_pipeline
from jobs.config.pipeline import PipelineConfigError
from jobs.driver.runs import check_state_layout

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
    ids = check_state_layout(pipeline, partitions=2)
    assert len(set(ids)) == len(ids) == pipeline.state_buckets and min(ids) >= 0
    per_partition = [spark_partition_of_int(i, 2) for i in ids]
    assert per_partition.count(0) == per_partition.count(1)
    # the plain numbers 0..63 would not be: Spark's Murmur3 puts 27 and 37 on each
    assert [spark_partition_of_int(i, 2) for i in range(64)].count(0) == 27
    assert check_state_layout(pipeline, partitions=5) == ids  # recorded: a lake keeps its values
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


def test_a_lake_of_the_pickled_bucket_layout_is_read_and_recorded_as_the_newer_one(tmp_path):
    import json

    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    ids = check_state_layout(pipeline, partitions=2)
    path = tmp_path / "lake" / "_state_layout.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 1}))
    assert check_state_layout(pipeline, partitions=2) == ids
    assert json.loads(path.read_text())["format"] == 2  # an older panestore now refuses it


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
