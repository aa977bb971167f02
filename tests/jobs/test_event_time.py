"""jobs.event_time: the event times read in Arrow, and those left to Spark."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from jobs.event_time import MAX_US, event_time_us  # noqa: E402

T0_US = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z


def read(values, **kw):
    mask, us = event_time_us(pa.array(values), **kw)
    return [u if ok else None for ok, u in zip(mask.to_pylist(), us.to_pylist(), strict=True)]


def test_iso_text_forms():
    text = ["2024-01-01T00:00:00Z", "2024-01-01 01:00:00+01:00", "2024-01-01T00:00:00.5Z",
            "2024-01-01T00:00:00", "2023-02-29T00:00:00Z", "yesterday", None]  # fmt: skip
    assert read(text, epoch_us=None, naive_is_utc=True) == [
        T0_US, T0_US, T0_US + 500_000, T0_US, None, None, None]  # fmt: skip
    # without a zone, only where Spark's session time zone is UTC
    assert read(text[3:4], epoch_us=None, naive_is_utc=False) == [None]


def test_epochs_in_range():
    values = pa.array([T0_US // 1000, MAX_US // 1000 + 1, None], pa.int64())
    assert read(values, epoch_us=1000, naive_is_utc=True) == [T0_US, None, None]
