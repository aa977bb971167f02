"""The JSON-lines decoder, the one tagger of a pipeline's JSON lines, judges strict JSON as Spark's
``from_json`` and the plan's tagging would: Spark agrees on buckets (and on the shuffle partition
of a bucket's grouping value), and a job over a landing zone of strict JSON lines, invalid ones
among them, writes the same tables with and without it. Lines that are not strict JSON, which
``from_json`` may read, the decoder rejects (``tests/jobs/test_jsonl_decoder.py``; here: through
the job).

The run without the decoder also has its operator tasks write every row themselves
(:mod:`jobs.executor.task_files`: at most one row sent on, files of seven rows), where the run with
it sends its few rows to the writer task: who writes the files changes no outcome either."""

from __future__ import annotations

import json
import random

import pytest

from tests.spark.support import iso, put

pytestmark = pytest.mark.spark


def test_key_buckets_equal_sparks(spark):
    from pyspark.sql import functions as F

    from jobs.executor.record_rules import KeyBuckets

    rnd = random.Random(7)
    text = ["", "a", "key-0776", "é", "日本語", "x" * 31, "y" * 32, "z" * 33, "q" * 100]
    text += ["".join(rnd.choice("ab€😀") for _ in range(rnd.randint(0, 70))) for _ in range(200)]
    ints = [0, 1, -1, 2**31 - 1, -(2**31)] + [rnd.randint(-(2**31), 2**31 - 1) for _ in text[5:]]
    longs = [0, -1, 2**63 - 1, -(2**63)] + [rnd.randint(-(2**63), 2**63 - 1) for _ in text[4:]]
    rows = list(zip(text, ints, longs, strict=True))
    df = spark.createDataFrame(rows, "s string, i int, l bigint")
    cases = [
        (["s"], ("string",), 64),
        (["i"], ("int",), 7),
        (["l"], ("long",), 1000),
        (["s", "i", "l"], ("string", "int", "long"), 5),
    ]
    for cols, types, n in cases:
        got = df.select(*cols, F.pmod(F.xxhash64(*cols), F.lit(n)).alias("b")).collect()
        hasher = KeyBuckets(types, n)
        assert [r["b"] for r in got] == [
            hasher.bucket(r[0] if len(cols) == 1 else tuple(r[c] for c in cols)) for r in got
        ]


def test_the_shuffle_partition_of_a_bucket_value_equals_sparks(spark):
    from pyspark.sql import functions as F

    from jobs.executor.operator_input import spark_partition_of_int

    values = [*range(300), -1, -(2**31), 2**31 - 1, 123_456_789]
    df = spark.createDataFrame([(v,) for v in values], "v int")
    for n in (2, 3, 8):
        got = df.select("v", F.pmod(F.hash("v"), F.lit(n)).alias("p")).collect()
        assert [r["p"] for r in got] == [spark_partition_of_int(r["v"], n) for r in got]


def _pipeline(tmp_path, name: str):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": "views",
            "lake": str(tmp_path / name),
            "keys": ["device_id"],
            "event_time": "ts",
            "window": "Sessions(1m)",
            "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
            "accumulation_mode": "accumulating_and_retracting",
            "allowed_lateness": "30s",
            "source": {
                "path": str(tmp_path / "landing"),
                "max_files_per_trigger": 1,
                "schema": {
                    "device_id": "string",
                    "ts": "timestamp",
                    "seconds": "double",
                    "n": "int",
                },
            },
            "watermark": {"delay": "10s"},
            "aggregates": {"plays": "count()", "watched": "sum(seconds)", "most": "max(n)"},
            "state_buckets": 4,
        }
    )


AWKWARD = [  # strict JSON, rejected by both with the same reason
    '{"device_id": "a", "ts": "2024-01-01T00:00:09Z", "seconds": Infinity}',
    '{"device_id": null, "ts": "2024-01-01T00:00:11Z"}',
    '{"ts": "2024-01-01T00:00:11Z"}',
    '{"device_id": " ", "ts": "2024-01-01T00:00:11Z"}',
    '{"device_id": "a"}',
    '{"device_id": "a", "ts": "yesterday"}',
    '{"device_id": "a", "ts": "2024-01-01T00:00:12 UTC"}',  # not a form of jobs.config.event_time
    '{"device_id": "a", "ts": "2024-01-01T00:00:12.1234567Z"}',
    '{"device_id": "a", "ts": "2024-02-30T00:00:12Z"}',
    '{"device_id": "a", "ts": 1704067212}',
]
NOT_STRICT = [  # Spark's from_json reads some of these; the decoder rejects them all
    "not json",
    "{'device_id': 'q', 'ts': '2024-01-01T00:00:05Z'}",  # single quotes: Spark reads it
    '{"device_id": "a", "device_id": "b", "ts": "2024-01-01T00:00:06Z"}',  # Spark: "b"
    '{"device_id": "c", "ts": "2024-01-01T00:00:07Z"}{"device_id": "z"}',  # Spark: the first
    '{"device_id": 5, "ts": "2024-01-01T00:00:08Z", "seconds": 1}',  # Spark: key "5"
    '{"device_id": "a", "ts": "2024-01-01T00:00:10Z", "n": 3000000000}',
    '{"device_id": "a", "ts": "2024-01-01T00:00:10Z", "n": "3"}',
    "[1, 2]",
]
# unusual, but read the same by both: decoded
ODD = [
    '{"device_id": "a", "ts": "2024-01-01 00:00:13"}',
    '{"device_id": "a", "ts": "2024-01-01T01:00:14+01:00", "seconds": 2.5}',
    '{"device_id": "a", "ts": " 2024-01-01T00:00:12Z "}',  # trimmed by both
    '{"device_id": "\\u00e9", "ts": "2024-01-01T00:00:15Z", "extra": [1, {"x": null}]}',
]


def _landing(seed: int, start: int) -> list[str]:
    rnd = random.Random(seed)
    lines = []
    for i in range(300):
        s = start + 60 + i * 0.5 - rnd.choice([0, 0, 0, 0, 20, 45])  # some out of order, some late
        record = {
            "device_id": f"d{rnd.randint(0, 11)}",
            "ts": iso(s),
            "seconds": rnd.choice([0.5, 1.0, None]),
            "n": rnd.randint(0, 9),
        }
        lines.append(json.dumps(record))
    for bad in AWKWARD + ODD:
        lines.insert(rnd.randint(0, len(lines)), bad)
    return lines


def test_lines_that_are_not_strict_json_are_rejected_through_the_job(spark, tmp_path):
    from deltalake import DeltaTable

    from jobs.driver.runs import run
    from jobs.executor.rejection_reasons import NOT_STRICT_JSON

    pipeline = _pipeline(tmp_path, "strict")
    put(tmp_path / "landing", "views.jsonl", [*_landing(3, 0), *NOT_STRICT])
    run(pipeline, spark=spark, progress=None, drain=True)
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    reasons = {r["raw"]: r["reason"] for r in rejected}
    assert {line: reasons.get(line) for line in NOT_STRICT} == dict.fromkeys(
        NOT_STRICT, NOT_STRICT_JSON
    )
    assert all(r["source_file"].endswith("views.jsonl") for r in rejected)


def test_the_job_writes_the_same_tables_with_and_without_the_decoder(spark, tmp_path, monkeypatch):
    import pyarrow as pa
    from deltalake import DeltaTable

    from jobs.driver.batch_sink import BatchSink
    from jobs.driver.runs import run
    from jobs.executor.task_files import TaskWriting
    from jobs.sources.files.landing import jsonl_decoder, read_landing_zone

    files = [_landing(1, 0), _landing(2, 140)]
    decoder = jsonl_decoder(_pipeline(tmp_path, "with"))
    assert decoder is not None

    def rejected(lines: list[str]) -> list[str]:
        batch = pa.RecordBatch.from_pydict({"_raw": lines, "_source_file": ["f"] * len(lines)})
        return [r for r in decoder.decode(batch).column("_raw").to_pylist() if r is not None]

    for lines in files:  # the decoder decodes the valid lines, rejects every awkward one
        assert sorted(rejected(lines)) == sorted(AWKWARD)
    plain = json.dumps({"device_id": "d1", "ts": iso(1), "seconds": 1.0, "n": 1})
    assert rejected([*ODD, plain]) == []

    pipelines = {name: _pipeline(tmp_path, name) for name in ("with", "without")}
    default = BatchSink.task_writing

    def task_writing(sink: BatchSink) -> TaskWriting | None:
        if sink.pipeline.lake_path != pipelines["without"].lake_path:
            return default.fget(sink)
        return TaskWriting(sink.tables, rows_as_rows=1, rows_per_file=7)

    monkeypatch.setattr(BatchSink, "task_writing", property(task_writing))

    def run_both(drain: bool = False) -> None:  # the same batches for both lakes
        for name, pipeline in pipelines.items():
            records = read_landing_zone(spark, pipeline, python_decoder=name == "with")
            run(pipeline, spark=spark, progress=None, records=records, drain=drain)

    for i, lines in enumerate(files):
        put(tmp_path / "landing", f"views-{i}.jsonl", lines)
        run_both()
    run_both(drain=True)
    tables = {
        name: {
            t: DeltaTable(p.table_path(t)).to_pyarrow_table().to_pylist()
            for t in ("panes", "late", "rejected")
        }
        for name, p in pipelines.items()
    }

    def comparable(rows: list[dict]) -> list[tuple]:
        skip = {"processing_time_us", "processing_time", "record_id", "pane_id", "batch_id"}
        return sorted(repr(sorted((k, v) for k, v in r.items() if k not in skip)) for r in rows)

    with_, without = tables["with"], tables["without"]
    assert len(with_["panes"]) > 50 and with_["late"] and len(with_["rejected"]) >= 10
    for t in ("panes", "late", "rejected"):
        assert comparable(with_[t]) == comparable(without[t]), t
    for t in ("panes", "rejected"):  # written by the operator's tasks / by the writer task
        names = {
            n: [f.rsplit("/", 1)[-1] for f in DeltaTable(p.table_path(t)).file_uris()]
            for n, p in pipelines.items()
        }
        assert any("-t0" in f for f in names["without"]), t
        assert not any("-t0" in f for f in names["with"]), t
        if t == "panes":  # files of about seven rows
            assert len(names["without"]) > len(names["with"])
