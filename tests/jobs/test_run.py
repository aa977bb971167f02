"""jobs.driver.runs: a lake remembers how its operator state is laid out, and refuses a run that
would lose it."""

from dataclasses import replace
from pathlib import Path

import pytest

from jobs.config.load import load_pipeline
from jobs.config.values import PipelineConfigError
from jobs.driver.preflight import check_state_layout
from tests.jobs.test_changes_cli import demo_conf

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


@pytest.mark.parametrize("older", [1, 2, 3, 4, 5, 6])
def test_a_lake_of_an_older_layout_format_is_refused_in_one_line_saying_how_to_rebuild(
    tmp_path, older
):
    """Lakes of formats 1-6 are not migrated (0.1.0): the refusal names the layout file, its
    format and how to rebuild (set the lake aside, and the checkpoint directory when apart)."""
    import json

    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    check_state_layout(pipeline, partitions=2)
    path = tmp_path / "lake" / "_state_layout.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": older}))
    with pytest.raises(PipelineConfigError) as error:
        check_state_layout(pipeline, partitions=2)
    message = str(error.value)
    assert error.value.field == "lake" and "\n" not in message
    assert f"{path} records state layout format {older}" in message
    assert f"{pipeline.set_aside} and run again" in message
    apart = load_pipeline(
        DEMO,
        overrides={"lake": str(tmp_path / "lake"), "checkpoint": str(tmp_path / "ckpt")},
    )
    check_state_layout(apart, partitions=2)
    path = tmp_path / "ckpt" / "_state_layout.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": older}))
    with pytest.raises(PipelineConfigError, match="its checkpoint directory") as error:
        check_state_layout(apart, partitions=2)
    assert str(tmp_path / "ckpt") in str(error.value)


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


def test_panestore_run_refuses_a_lake_of_an_older_layout_before_spark_starts(
    tmp_path, monkeypatch, capsys
):
    """``panestore run`` over a format-6 lake: one line naming the layout file, its format and
    how to rebuild, exit status 2, and no Spark session started."""
    import json

    from jobs.cli.commands import main
    from jobs.driver.preflight import check_run
    from jobs.startup.session import SessionOptions

    conf = demo_conf(tmp_path)
    pipeline = load_pipeline(conf)
    check_run(pipeline, 2)  # what a first run records, before Spark
    path = tmp_path / "lake" / "_state_layout.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 6}))

    def no_spark(self):
        raise AssertionError("Spark started")

    monkeypatch.setattr(SessionOptions, "start", no_spark)
    capsys.readouterr()
    try:
        status = main(["run", str(conf)])
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("panestore") and err.count("\n") == 1, err
    assert f"{path} records state layout format 6" in err
    assert f"mv {tmp_path / 'lake'} {tmp_path / 'lake'}.old) and run again" in err
