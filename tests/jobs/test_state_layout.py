"""A lake remembers how its operator state is laid out, and refuses a run that would lose it."""

from pathlib import Path

import pytest

from jobs.pipeline import PipelineConfigError, load_pipeline
from jobs.run import check_state_layout

DEMO = Path(__file__).resolve().parents[2] / "conf" / "demo.toml"


def test_a_changed_state_buckets_is_refused_naming_the_field(tmp_path):
    pipeline = load_pipeline(DEMO, overrides={"lake": str(tmp_path / "lake")})
    check_state_layout(pipeline)  # first run: records the setting
    check_state_layout(pipeline)  # same setting: fine
    changed = pipeline.with_overrides(state_buckets=pipeline.state_buckets * 2)
    with pytest.raises(PipelineConfigError) as error:
        check_state_layout(changed)
    assert error.value.field == "state_buckets"
    assert f"state_buckets = {pipeline.state_buckets}" in str(error.value)
