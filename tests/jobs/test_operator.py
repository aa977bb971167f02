"""jobs.executor.operator without Spark: a bucket group's blobs through the processor, with a fake
state handle (what transformWithStateInPandas hands it), and the canonical order of a key's rows."""

from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from jobs.executor.operator_input import blob_of  # noqa: E402
from tests.operator_fakes import Clocks, FakeHandle  # noqa: E402

T0_US = 1_704_067_200 * 1_000_000
BIG = 2**53 + 1  # not a float64


def processor(init: bool = True):
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config
    from jobs.executor.operator import BucketProcessor

    pipeline = pipeline_from_dict(
        {
            "name": "p",
            "lake": "/tmp/unused",
            "keys": ["user"],
            "event_time": "t",
            "window": "FixedWindows(1m)",
            "trigger": "AfterWatermark(early=AfterCount(1), late=AfterCount(1))",
            "accumulation_mode": "accumulating",
            "aggregates": {"ns": "to_list(n)"},
            "source": {
                "path": "/tmp/unused",
                "schema": {"user": "long", "t": "timestamp", "n": "long"},
            },
        }
    )
    proc = BucketProcessor(operator_config(pipeline))
    if init:
        proc.init(FakeHandle())
    return proc


def blob(rows: list[dict]) -> bytes:
    return blob_of(
        pa.Table.from_pylist(
            rows, pa.schema([("user", pa.int64()), ("ts_us", pa.int64()), ("n", pa.int64())])
        )
    )


def test_input_rows_of_both_encodings_keep_integers_exact_and_nulls():
    # pandas would hold integer columns with nulls as float64 (BIG + 1 == BIG there)
    frame = pd.DataFrame(
        {
            "pst_bucket": [3, 3, 3],
            "pst_blob": [
                blob([{"user": BIG, "ts_us": T0_US + 1, "n": BIG}]),
                blob(
                    [
                        {"user": BIG, "ts_us": T0_US + 2, "n": BIG + 2},
                        {"user": BIG, "ts_us": T0_US + 3, "n": None},
                    ]
                ),
                None,
            ],
            # a row in the row encoding (a record Spark parsed, beside the decoder's blobs)
            "pst_row": [None, None, f'{{"user":{BIG},"ts_us":{T0_US + 4},"n":{BIG + 4}}}'.encode()],
        }
    )
    out = pd.concat(list(processor().handleInputRows((3,), iter([frame]), Clocks())))
    panes = out[out["record_kind"] == "pane"]
    assert set(panes["user"]) == {BIG}
    last = panes.sort_values("pane_index").iloc[-1]
    assert list(last["ns"]) == [BIG, BIG + 2, None, BIG + 4]


def test_rejected_records_pass_through_stamped_with_the_batch_time():
    rejected = pa.table(
        {
            "pst_raw": ["{bad", "{}"],
            "pst_source_file": ["f1", "f2"],
            "pst_reason": ["malformed record", "missing key (user)"],
        }
    )
    frame = pd.DataFrame({"pst_bucket": [-1], "pst_blob": [blob_of(rejected)], "pst_row": [None]})
    out = pd.concat(list(processor().handleInputRows((-1,), iter([frame]), Clocks())))
    assert list(out["record_kind"]) == ["rejected", "rejected"]
    assert list(out["raw"]) == ["{bad", "{}"] and list(out["source_file"]) == ["f1", "f2"]
    assert list(out["reason"]) == ["malformed record", "missing key (user)"]
    assert set(out["processing_time_us"]) == {T0_US}


@pytest.mark.parametrize("seed", range(5))
def test_any_arrival_order_gives_the_same_sequence(seed):
    from jobs.executor.operator import canonical_order

    rows = [({"s": v}, ts) for ts in (3, 5, 5, 5, 9) for v in (ts, ts + 1)]
    shuffled = rows[:]
    random.Random(seed).shuffle(shuffled)
    canonical_order(shuffled)
    expected = sorted(rows, key=lambda e: (e[1], repr(e[0])))
    assert shuffled == expected


def test_the_shell_spark_ships_handles_rows_as_the_processor_does():
    """What Spark unpickles (also on the driver, only to run ``init``) is the shell: it makes
    the bucket's state in ``init`` and hands it to the operator it unpickles on first use."""
    import pickle

    from jobs.executor.operator import BucketProcessor, state_spark_schema
    from jobs.executor.processor_shell import ProcessorShell

    frame = pd.DataFrame(
        {
            "pst_bucket": [3],
            "pst_blob": [
                blob(
                    [
                        {"user": 7, "ts_us": T0_US + 1, "n": 1},
                        {"user": 7, "ts_us": T0_US + 2, "n": 2},
                    ]
                )
            ],
            "pst_row": [None],
        }
    )
    shipped = ProcessorShell(
        processor(init=False), BucketProcessor.STATE_NAME, state_spark_schema()
    )
    shell = pickle.loads(pickle.dumps(shipped))
    handle = FakeHandle()
    shell.init(handle)
    got = pd.concat(list(shell.handleInputRows((3,), iter([frame]), Clocks())))
    want = pd.concat(list(processor().handleInputRows((3,), iter([frame]), Clocks())))
    assert len(got) > 0
    assert got.to_dict("records") == want.to_dict("records")
    assert handle.state.value is not None  # the state made in the shell's init holds the bucket
    assert pickle.loads(pickle.dumps(shell))._processor is None  # never ships a loaded operator
