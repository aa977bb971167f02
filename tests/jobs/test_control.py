"""jobs.driver.control: control rows."""

from __future__ import annotations

from pathlib import Path

DEMO = str(Path(__file__).resolve().parents[2] / "conf" / "demo.toml")


def test_a_control_row_carries_its_exact_millisecond_and_a_drain_reaches_the_end_of_time(tmp_path):
    """A control row's ``ts`` is its event time to the millisecond, the drain sentinel's too:
    read back (the text the control source's pattern takes out of the line), minus the
    watermark delay, it is a Spark watermark the operator maps to the end of time, so a drain
    closes every window, a global one included."""
    import datetime as dt
    import re

    from jobs.config.load import load_pipeline
    from jobs.driver.control import SENTINEL_MS, TS_FIELD, write_control, write_drain_sentinel
    from jobs.driver.plan import operator_config, watermark_delay_ms
    from panes.time import END_OF_TIME

    p = load_pipeline(DEMO, overrides={"lake": str(tmp_path)})
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

    def read_ms(path: Path) -> int:
        found = re.search(TS_FIELD, path.read_text())
        assert found is not None
        return (dt.datetime.fromisoformat(found.group(1)) - epoch) // dt.timedelta(milliseconds=1)

    for ms in (0, 1_704_067_200_123, 1_704_067_200_999, SENTINEL_MS - 1):
        assert read_ms(Path(write_control(p, "writers", ms))) == ms
    drained = read_ms(Path(write_drain_sentinel(p)))
    assert drained == SENTINEL_MS
    config = operator_config(p)
    assert config.model_watermark(drained - watermark_delay_ms(p)) == END_OF_TIME
