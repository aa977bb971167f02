"""A corpus of bad records: each ends in ``rejected`` with its reason, each good one in the view.

Extend it by adding a line to a corpus below: ``(line, None)`` for a record the view must
count under its key, ``(line, reason)`` for one the ``rejected`` table must hold with a reason
starting with ``reason``. One run per source format, all files of a format in one lake.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.spark.support import put

pytestmark = pytest.mark.spark

TS = "2024-01-01T00:%02d:00Z"
SCHEMA = {"device_id": "string", "ts": "timestamp", "seconds": "double", "n": "long"}
MALFORMED = "malformed record"
NOT_FINITE = "not a finite number (seconds)"
OUT_OF_RANGE = "event time out of range (ts)"


def rec(device, ts=TS % 1, seconds=1.0, n=1) -> str:
    return json.dumps({"device_id": device, "ts": ts, "seconds": seconds, "n": n})


JSONL = [
    (rec("plain"), None),
    (rec("L" * 10_000), None),  # a long key
    (rec("ctl\u0001\u001f"), None),  # control characters, escaped in JSON
    (rec("ü→😀"), None),
    (rec("fraction", "2024-01-01T00:06:00.123456Z"), None),
    (rec("null-value", seconds=None), None),  # a null value: the sum leaves it out
    ("{not json", MALFORMED),
    ("[1, 2, 3]", MALFORMED),
    ('{"device_id": "x", "ts": "' + TS % 2 + '"} trailing', MALFORMED),
    (rec(None), "missing key (device_id)"),
    (json.dumps({"ts": TS % 1, "seconds": 1.0, "n": 1}), "missing key (device_id)"),
    (rec(""), "empty key (device_id)"),
    (rec("   "), "empty key (device_id)"),
    (rec("no-ts", None), "missing event time (ts)"),
    (rec("empty-ts", ""), "unparseable event time (ts)"),
    (rec("word-ts", "yesterday"), "unparseable event time (ts)"),
    (rec("feb-30", "2024-02-30T00:00:00Z"), "unparseable event time (ts)"),
    (rec("number-ts", 1704067200), "unparseable event time (ts)"),
    (rec("year-10000", "10000-01-01T00:00:00Z"), OUT_OF_RANGE),
    (rec("year-0", "0000-01-01T00:00:00Z"), OUT_OF_RANGE),
    (rec("last-ms", "9999-12-31T23:59:59.999Z"), OUT_OF_RANGE),  # the drain sentinel's time
    (rec("nan", seconds="NaN"), MALFORMED),  # strict JSON: text for a number
    ('{"device_id": "nan2", "ts": "' + TS % 1 + '", "seconds": NaN, "n": 1}', NOT_FINITE),
    ('{"device_id": "inf", "ts": "' + TS % 1 + '", "seconds": -Infinity, "n": 1}', NOT_FINITE),
    ('{"device_id": "e400", "ts": "' + TS % 1 + '", "seconds": 1e400, "n": 1}', MALFORMED),
    (rec("huge-long", n=10**30), MALFORMED),
    (rec("float-long", n=1.5), MALFORMED),
    (rec("text-long", n="seven"), MALFORMED),
]
EPOCH = [  # event time as epoch milliseconds (source.epoch_unit = "ms")
    (json.dumps({"device_id": "ms", "ts": 1_704_067_200_000, "seconds": 1.0}), None),
    (json.dumps({"device_id": "ms-text", "ts": "1704067200000", "seconds": 1.0}), None),
    (json.dumps({"device_id": "ms-huge", "ts": 10**18, "seconds": 1.0}), "unparseable event"),
    (json.dumps({"device_id": "ms-max", "ts": 2**63 - 1, "seconds": 1.0}), "unparseable event"),
    (json.dumps({"device_id": "ms-neg", "ts": -(10**18), "seconds": 1.0}), "unparseable event"),
    (json.dumps({"device_id": "ms-over", "ts": 10**30, "seconds": 1.0}), "unparseable event"),
    (json.dumps({"device_id": "ms-frac", "ts": 1.5, "seconds": 1.0}), "unparseable event"),
    (json.dumps({"device_id": "ms-null", "ts": None, "seconds": 1.0}), "missing event time"),
]
CSV = [
    (f"csv-plain,{TS % 1},1.5,2", None),
    (f'"csv,comma",{TS % 1},1,1', None),
    (f'"csv""quote",{TS % 1},1,1', None),
    (f'csv-quoted-ts,"{TS % 1}",1,1', None),
    (f'"csv\nnewline",{TS % 1},1,1', "unbalanced quotes"),  # both halves of the record
    (f'"csv-open,{TS % 1},1,1', "unbalanced quotes"),
    (f"csv-text,{TS % 1},abc,1", MALFORMED),
    (f"csv-short,{TS % 1}", MALFORMED),
    (f"csv-long,{TS % 1},1,1,extra", MALFORMED),
    (f",{TS % 1},1,1", "missing key (device_id)"),
    (f"csv-nan,{TS % 1},NaN,1", NOT_FINITE),
]


def make_pipeline(tmp_path, fmt: str, **source):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": f"bad_{fmt}",
            "lake": str(tmp_path / "lake"),
            "keys": ["device_id"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "source": {
                "format": fmt,
                "path": str(tmp_path / "landing"),
                "schema": SCHEMA,
                **source,
            },
            "aggregates": {"plays": "count()", "watched": "sum(seconds)"},
        }
    )


def tables(spark, pipeline) -> tuple[dict, list[dict]]:
    """Run and drain; ({key: plays} of the folded view, rejected rows)."""
    from deltalake import DeltaTable

    from jobs.api import materialize
    from jobs.driver.runs import run

    run(pipeline, spark=spark, drain=True, progress=None)
    materialize(pipeline)
    view = DeltaTable(pipeline.table_path("current")).to_pyarrow_table().to_pylist()
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    return {r["device_id"]: r["plays"] for r in view}, rejected


def check(corpus, view: dict, rejected: list[dict], raw_of=lambda line: [line]) -> None:
    """Every good record counted in the view, every bad one rejected with its reason."""
    good = Counter(json.loads(line)["device_id"] for line, why in corpus if why is None)
    reasons = {r["raw"]: r["reason"] for r in rejected}
    for line, why in corpus:
        if why is None:
            continue
        for raw in raw_of(line):
            assert raw in reasons, f"bad record not rejected: {raw!r}"
            assert reasons[raw].startswith(why), (raw, reasons[raw], why)
    assert view == dict(good)


def test_jsonl_records(spark, tmp_path):
    pipeline = make_pipeline(tmp_path, "jsonl")
    landing = tmp_path / "landing"
    put(landing, "corpus.jsonl", [line for line, _ in JSONL])
    # CRLF line ends, a byte-order mark, and a last line cut short without its newline
    (landing / "crlf.jsonl").write_bytes(f"{rec('crlf')}\r\n{rec('crlf')}\r\n".encode())
    (landing / "bom.jsonl").write_bytes("\ufeff".encode() + rec("bom").encode() + b"\n")
    (landing / "truncated.jsonl").write_text(rec("whole") + "\n" + rec("cut")[:25])
    (landing / "empty.jsonl").write_bytes(b"")
    (landing / "binary.jsonl").write_bytes(bytes(range(256)) * 8)
    view, rejected = tables(spark, pipeline)

    extra = [(rec("crlf"), None)] * 2 + [(rec("bom"), None), (rec("whole"), None)]
    check(JSONL + extra, view, [r for r in rejected if r["source_file"].endswith("corpus.jsonl")])
    by_file = Counter(r["source_file"].rsplit("/", 1)[1] for r in rejected)
    assert by_file["truncated.jsonl"] == 1 and "crlf.jsonl" not in by_file
    binary = [r for r in rejected if r["source_file"].endswith("binary.jsonl")]
    assert binary and all(r["reason"].startswith(("not valid UTF-8", MALFORMED)) for r in binary)
    assert any(r["reason"].startswith("not valid UTF-8") for r in binary)


def test_epoch_event_times(spark, tmp_path):
    pipeline = make_pipeline(
        tmp_path,
        "jsonl",
        epoch_unit="ms",
        schema={"device_id": "string", "ts": "long", "seconds": "double"},
    )
    put(tmp_path / "landing", "epochs.jsonl", [line for line, _ in EPOCH])
    check(EPOCH, *tables(spark, pipeline))


def test_csv_records(spark, tmp_path):
    pipeline = make_pipeline(tmp_path, "csv", csv_header=True)
    put(tmp_path / "landing", "corpus.csv", ["device_id,ts,seconds,n"] + [x for x, _ in CSV])
    view, rejected = tables(spark, pipeline)
    # the keys of the good lines, as CSV unquotes them
    keys = iter(["csv-plain", "csv,comma", 'csv"quote', "csv-quoted-ts"])
    as_json = [(json.dumps({"device_id": next(keys)}) if why is None else x, why) for x, why in CSV]
    check(as_json, view, rejected, raw_of=lambda line: line.split("\n"))


def test_parquet_files_of_another_schema(spark, tmp_path):
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    pipeline = make_pipeline(tmp_path, "parquet")
    landing = tmp_path / "landing"
    landing.mkdir()
    ts = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    good = {"device_id": "pq", "ts": ts, "seconds": 1.0, "n": 1}
    pq.write_table(
        pa.Table.from_pylist([good, {**good, "seconds": float("nan")}]), landing / "good.parquet"
    )
    # a column missing (the key), a column more
    pq.write_table(
        pa.Table.from_pylist([{"ts": ts, "seconds": 1.0, "n": 1, "other": "x"}]),
        landing / "no-key.parquet",
    )
    view, rejected = tables(spark, pipeline)
    assert view == {"pq": 1}
    assert sorted((r["source_file"].rsplit("/", 1)[1], r["reason"]) for r in rejected) == [
        ("good.parquet", NOT_FINITE),
        ("no-key.parquet", "missing key (device_id)"),
    ]


def test_a_sum_beyond_64_bits_stops_the_run_with_one_line_naming_the_pane(spark, tmp_path):
    """A window whose integer sum leaves 64 bits when it fires cannot be written to the pane
    log's bigint column: the run fails with one line naming the key, window and aggregate, the
    batch commits nothing anywhere, and a run again stops at the same place (nothing lost)."""
    from deltalake import DeltaTable

    from jobs.config.load import pipeline_from_dict
    from jobs.driver.runs import run
    from sinks.lake.errors import PaneValueOutOfRange

    pipeline = pipeline_from_dict(
        {
            "name": "too_big",
            "lake": str(tmp_path / "lake"),
            "keys": ["device_id"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "source": {"format": "jsonl", "path": str(tmp_path / "landing"), "schema": SCHEMA},
            "aggregates": {"total": "sum(n)"},
        }
    )
    put(tmp_path / "landing", "big.jsonl", [rec("small"), rec("big", n=2**62), rec("big", n=2**62)])
    for _ in range(2):
        with pytest.raises(PaneValueOutOfRange) as raised:
            run(pipeline, spark=spark, drain=True, progress=None)
        message = str(raised.value)
        assert "\n" not in message and "device_id='big'" in message
        assert f"total = {2**63}" in message and "2024-01-01T00:00:00+00:00" in message
    panes = DeltaTable(pipeline.table_path("panes"))
    assert panes.to_pyarrow_table().num_rows == 0
