"""The stateful operator's input, without Spark: blob rows and plain rows of one bucket group,
with a fake state handle (what transformWithStateInPandas hands the processor)."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

T0_US = 1_704_067_200 * 1_000_000
BIG = 2**53 + 1  # not a float64


class FakeState:
    def __init__(self) -> None:
        self.value = None

    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class FakeHandle:
    def __init__(self) -> None:
        self.state = FakeState()
        self.timers: set[int] = set()

    def getValueState(self, name, schema):
        return self.state

    def registerTimer(self, ms: int) -> None:
        self.timers.add(ms)

    def deleteTimer(self, ms: int) -> None:
        self.timers.discard(ms)


class Clocks:
    def getCurrentWatermarkInMs(self) -> int:
        return 0

    def getCurrentProcessingTimeInMs(self) -> int:
        return T0_US // 1000


def processor():
    from jobs.job import operator_config
    from jobs.operator import BucketProcessor
    from jobs.pipeline import pipeline_from_dict

    pipeline = pipeline_from_dict({
        "name": "p", "lake": "/tmp/unused", "keys": ["user"], "event_time": "t",
        "window": "FixedWindows(1m)",
        "trigger": "AfterWatermark(early=AfterCount(1), late=AfterCount(1))",
        "accumulation_mode": "accumulating", "aggregates": {"ns": "to_list(n)"},
        "source": {"path": "/tmp/unused", "schema": {"user": "long", "t": "timestamp",
                                                     "n": "long"}},
    })  # fmt: skip
    proc = BucketProcessor(operator_config(pipeline))
    proc.init(FakeHandle())
    return proc


def blob(rows: list[dict]) -> bytes:
    table = pa.Table.from_pylist(rows, pa.schema([("user", pa.int64()), ("ts_us", pa.int64()),
                                                  ("n", pa.int64())]))  # fmt: skip
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_plain_rows_keep_integers_exact_beside_blob_rows_and_nulls():
    # as Spark sends it: integer columns as decimal text, strings as UTF-8, blob rows' plain
    # columns null; pandas would hold the integers as float64 (BIG + 1 == BIG there)
    frame = pd.DataFrame({
        "pst_bucket": [3, 3, 3],
        "pst_blob": [blob([{"user": BIG, "ts_us": T0_US + 1, "n": BIG}]), None, None],
        "user": [None, str(BIG).encode(), str(BIG).encode()],
        "ts_us": [None, T0_US + 2, T0_US + 3],
        "n": [None, str(BIG + 2).encode(), None],
        "_1": [None, None, None], "_2": [None, None, None], "_3": [None, None, None],
    })  # fmt: skip
    out = pd.concat(list(processor().handleInputRows((3,), iter([frame]), Clocks())))
    panes = out[out["record_kind"] == "pane"]
    assert set(panes["user"]) == {BIG}
    last = panes.sort_values("pane_index").iloc[-1]
    assert list(last["ns"]) == [BIG, BIG + 2, None]
