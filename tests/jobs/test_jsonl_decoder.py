"""The JSON-lines decoder (pure: Arrow batches in, Arrow batches out; no Spark).

It is the one tagger of the lines of a pipeline it serves: these tests pin which lines it decodes
and which it rejects, with which reason (strict JSON: docs/sources.md);
``tests/spark/test_decoder_equivalence.py`` checks that on strict JSON the outcome is Spark's own
path's.
"""

from __future__ import annotations

import json
import pickle

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("xxhash")

from jobs.executor import rejection_reasons as why  # noqa: E402

US = 1_000_000
T0 = 1_704_067_200  # 2024-01-01T00:00:00Z


def decoder(**over):
    """A decoder of a record shape (no filtered aggregates: its values are source columns)."""
    from jobs.executor.jsonl_decoder import JsonlDecoder
    from jobs.executor.record_rules import RecordShape

    conf = dict(
        columns=(
            ("device", "string"),
            ("ts", "timestamp"),
            ("seconds", "double"),
            ("ok", "boolean"),
        ),
        keys=("device",),
        event_time="ts",
        values=("seconds",),
        buckets=8,
    )
    conf.update(over)
    return JsonlDecoder(RecordShape(**conf), conf["values"])


def run(dec, lines: list[str]):
    """-> (decoded rows as dicts, with their bucket; {rejected raw line: reason}; blob rows)."""
    batch = pa.RecordBatch.from_pydict(
        {"_raw": pa.array(lines, pa.string()), "_source_file": ["f.jsonl"] * len(lines)}
    )
    out = pickle.loads(pickle.dumps(dec)).decode(batch).to_pydict()
    rows, rejected, blobs = [], {}, []
    for bucket, ts, blob, raw, file, reason in zip(*out.values(), strict=True):
        if blob is None:
            assert bucket is None and ts is None and file == "f.jsonl" and reason
            rejected[raw] = reason
            continue
        assert raw is None and file is None and reason is None
        table = pa.ipc.open_stream(blob).read_all()
        got = table.to_pylist()
        # the blob's event time is its latest element's
        assert int(ts.timestamp() * US) == max(r["ts_us"] for r in got)
        blobs.append(bucket)
        rows += [dict(r, bucket=bucket) for r in got]
    assert len(blobs) == len(set(blobs))  # one blob per bucket and batch
    return rows, rejected, blobs


def line(device="a", ts="2024-01-01T00:00:01Z", **more):
    return json.dumps({"device": device, "ts": ts, "seconds": 1.5, **more})


def test_blank_lines_are_neither_records_nor_rejected():
    """The decoder reads a file's lines as Spark's text source gives them, blank ones too: an
    empty line or one of spaces is no record (nothing decoded, nothing rejected); a line of
    other white space is not blank, and is not strict JSON."""
    lines = ["", line("a"), "   ", line("b"), "\t", " " * 3000, line("c"), "  " + line("d")]
    rows, rejected, _ = run(decoder(), lines)
    assert sorted(r["device"] for r in rows) == ["a", "b", "c", "d"]
    assert list(rejected) == ["\t"]
    for blank in (["", "  "], ["", ""]):
        rows, rejected, blobs = run(decoder(), blank)
        assert rows == [] and rejected == {} and blobs == []


def test_valid_lines_are_decoded_into_their_key_buckets():
    from jobs.executor.record_rules import KeyBuckets

    lines = [line(f"d{i % 13}", f"2024-01-01T00:{i % 60:02d}:00.{i:06d}Z") for i in range(200)]
    rows, rejected, _ = run(decoder(), lines)
    assert rejected == {}
    assert len(rows) == 200
    hasher = KeyBuckets(("string",), 8)
    assert all(r["bucket"] == hasher.bucket(r["device"]) for r in rows)
    assert {r["device"] for r in rows} == {f"d{i}" for i in range(13)}
    assert rows[0].keys() == {"device", "ts_us", "seconds", "bucket"}
    i = 7
    mine = [r for r in rows if r["ts_us"] == (T0 + (i % 60) * 60) * US + i]
    assert mine == [
        {
            "device": "d7",
            "ts_us": (T0 + 420) * US + 7,
            "seconds": 1.5,
            "bucket": hasher.bucket("d7"),
        }
    ]


NOT_STRICT = [
    "not json",
    "{'device': 'a'}",  # single quotes (Spark's from_json reads them)
    '{"device": "a", "device": "b", "ts": "2024-01-01T00:00:01Z"}',  # a duplicate field
    '{"device": "a", "ts": "2024-01-01T00:00:01Z"}{"device": "b"}',  # two objects
    '{"device": 5, "ts": "2024-01-01T00:00:01Z"}',  # a number for a string column
    '{"device": "a", "ts": "2024-01-01T00:00:01Z", "seconds": 1e400}',  # beyond a double
    '{"device": "a", "ts": "2024-01-01T00:00:01Z", "seconds": "1.5"}',  # text for a number
    '{"device": "a", "ts": "2024-01-01T00:00:01Z", "ok": "yes"}',  # unused column too
    "[1, 2]",
    '{"device": "\\ud800", "ts": "2024-01-01T00:00:01Z"}',
]
INVALID = {
    '{"device": null, "ts": "2024-01-01T00:00:01Z"}': why.missing_key("device"),
    '{"ts": "2024-01-01T00:00:01Z"}': why.missing_key("device"),
    '{"device": " ", "ts": "2024-01-01T00:00:01Z"}': why.empty_key("device"),
    '{"device": "a"}': why.missing_event_time("ts"),
    '{"device": "a", "ts": null}': why.missing_event_time("ts"),
    '{"device": "a", "ts": "yesterday"}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": "2024-01-01T00:00:01.1234567Z"}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": "2024-02-30T00:00:01Z"}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": "2023-02-29T00:00:01Z"}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": "2024-01-01T24:00:00Z"}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": "2024-01-01T00:00:01+18:00"}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": 1704067201}': why.unparseable_event_time("ts"),
    '{"device": "a", "ts": "10000-01-01T00:00:00Z"}': why.event_time_out_of_range("ts"),
    '{"device": "a", "ts": "2024-01-01T00:00:01Z", "seconds": NaN}': why.not_finite("seconds"),
    '{"device": "a", "ts": "2024-01-01T00:00:01Z", "seconds": -Infinity}': why.not_finite(
        "seconds"
    ),
    '{"device": "a", "ts": "2024-01-01T00:00:01Z", "seconds": Inf}': why.not_finite("seconds"),
}


@pytest.mark.parametrize("bad", [*NOT_STRICT, *INVALID])
def test_every_line_is_decoded_or_rejected_with_its_reason(bad):
    good = [line("a", f"2024-01-01T00:00:{s:02d}Z") for s in range(40)]
    lines = [*good[:20], bad, *good[20:]]
    rows, rejected, _ = run(decoder(), lines)
    assert rejected == {bad: INVALID.get(bad, why.NOT_STRICT_JSON)}
    # a bad line costs no other line
    assert sorted(r["ts_us"] for r in rows) == [(T0 + s) * US for s in range(40)]


def test_lines_that_are_not_utf8_are_rejected_as_such():
    good = line("a").encode()
    bad = b'{"device": "\xff", "ts": "2024-01-01T00:00:01Z"}'
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([good, bad, good], pa.binary()).cast(pa.string(), safe=False),
            pa.array(["f"] * 3),
        ],
        names=["_raw", "_source_file"],
    )
    out = decoder().decode(batch)
    assert out.column("_error").to_pylist() == [None, why.NOT_UTF8]  # one blob, the line
    assert out.column("_raw").cast(pa.binary())[1].as_py() == bad  # kept as it was


def test_a_byte_order_mark_is_skipped():
    rows, rejected, _ = run(decoder(), ["\ufeff" + line("a"), line("b")])
    assert rejected == {} and sorted(r["device"] for r in rows) == ["a", "b"]


def test_accepted_timestamp_forms():
    forms = {
        "2024-01-01T00:00:01Z": (T0 + 1) * US,
        "2024-01-01 00:00:01Z": (T0 + 1) * US,
        "2024-01-01T00:00:01.5Z": (T0 + 1) * US + 500_000,
        "2024-01-01T00:00:01.000007+00:00": (T0 + 1) * US + 7,
        "2024-01-01T01:00:01+01:00": (T0 + 1) * US,
        "2023-12-31T23:30:01-00:30": (T0 + 1) * US,
        "2024-02-29T00:00:00Z": (T0 + 59 * 86400) * US,
        "2024-01-01T00:00:01": (T0 + 1) * US,  # no zone: the session's, UTC
        " 2024-01-01T00:00:01 ": (T0 + 1) * US,  # trimmed
        "2024-01-01": T0 * US,  # (every form of jobs.config.event_time.FORMS: test_event_time)
    }
    rows, rejected, _ = run(decoder(), [line("a", ts) for ts in forms])
    assert rejected == {}
    assert [r["ts_us"] for r in rows] == list(forms.values())  # one key: in arrival order


def test_epoch_event_time_and_integer_keys():
    dec = decoder(
        columns=(("user", "int"), ("region", "string"), ("t", "long"), ("n", "long")),
        keys=("user", "region"),
        event_time="t",
        values=("n",),
        epoch_us=1000,
    )

    def rec(user, t, region="eu"):
        return json.dumps({"user": user, "region": region, "t": t, "n": 2})

    # an epoch may be its digits as text (jobs.config.event_time.FORMS)
    valid = [rec(7, 1_704_067_201_000), rec(-3, 1_704_067_201_500), rec(8, " 1704067201000 ")]
    rows, rejected, _ = run(dec, valid)
    assert rejected == {}
    from jobs.executor.record_rules import KeyBuckets

    hasher = KeyBuckets(("int", "string"), 8)
    expected = [
        {
            "user": 7,
            "region": "eu",
            "ts_us": (T0 + 1) * US,
            "n": 2,
            "bucket": hasher.bucket((7, "eu")),
        },
        {
            "user": -3,
            "region": "eu",
            "ts_us": (T0 + 1) * US + 500_000,
            "n": 2,
            "bucket": hasher.bucket((-3, "eu")),
        },
        {
            "user": 8,
            "region": "eu",
            "ts_us": (T0 + 1) * US,
            "n": 2,
            "bucket": hasher.bucket((8, "eu")),
        },
    ]
    assert sorted(rows, key=repr) == sorted(expected, key=repr)
    padding = [rec(i, 1_704_067_201_000 + i) for i in range(40)]
    bad_lines = {
        rec(7, 1.5e12): why.unparseable_event_time("t"),  # not an integer
        rec(7, "1.5e12"): why.unparseable_event_time("t"),
        rec(7, 2**62): why.unparseable_event_time("t"),  # beyond µs in 64 bits
        rec(7, None): why.missing_event_time("t"),
        rec(2**31, 0): why.unparseable("key", "user"),  # beyond an int
        rec("7", 0): why.NOT_STRICT_JSON,  # text for an integer key
    }
    for bad, reason in bad_lines.items():
        rows, rejected, _ = run(dec, [*padding[:20], bad, *padding[20:]])
        assert rejected == {bad: reason} and len(rows) == 40


def test_pipelines_the_decoder_cannot_serve():
    from jobs.config.load import pipeline_from_dict
    from jobs.sources.files.landing import jsonl_decoder

    def pipeline(**over):
        conf = {
            "name": "p",
            "lake": "/tmp/unused",
            "keys": ["device"],
            "event_time": "ts",
            "window": "FixedWindows(1m)",
            "trigger": "AfterWatermark(late=AfterCount(1))",
            "accumulation_mode": "discarding",
            "aggregates": {"s": "sum(seconds)"},
            "source": {
                "path": "/tmp/unused",
                "schema": {"device": "string", "ts": "timestamp", "seconds": "double"},
            },
        }
        for k, v in over.items():
            if k == "schema":
                conf["source"]["schema"] = v
            elif k == "format":
                conf["source"]["format"] = v
            else:
                conf[k] = v
        return pipeline_from_dict(conf)

    assert jsonl_decoder(pipeline()) is not None
    assert jsonl_decoder(pipeline(format="csv")) is None
    assert jsonl_decoder(pipeline(watermark={"policy": "ingestion_time"})) is None
    as_float = {"device": "string", "ts": "timestamp", "seconds": "float"}
    assert jsonl_decoder(pipeline(schema=as_float)) is None
    # (keys of other types than string and integer are refused by the configuration)
    # a value column that is also the key: Spark hands over the text it read
    assert jsonl_decoder(pipeline(aggregates={"n": "count()", "d": "max(device)"})) is None

    # the decoder's record shape is the plan's, built once for the pipeline: its value rules in
    # the same order (a filtered count's condition column before the sum's column)
    from jobs.sources.shape import record_shape

    filtered = pipeline(
        aggregates={"late": "count() filter (lag > 1.5)", "s": "sum(seconds)"},
        schema={"device": "string", "ts": "timestamp", "seconds": "double", "lag": "double"},
    )
    dec = jsonl_decoder(filtered)
    assert dec is not None and dec.shape == record_shape(filtered)
    assert dec.shape.values == ("lag", "seconds") and dec.values == (
        filtered.conditions[0].flag,
        "seconds",
    )
    both = '{"device": "a", "ts": "2024-01-01T00:00:01Z", "seconds": NaN, "lag": NaN}'
    _, rejected, _ = run(dec, [both])  # both values not finite: the plan's first value rule
    assert rejected == {both: why.not_finite("lag")}


def test_a_failing_decoder_stops_the_task(monkeypatch):
    """The decoder is the lines' one tagger: a failure of its own is an error, not a reason to
    reject (or pass on) valid lines."""
    from jobs.executor.jsonl_decoder import JsonlDecoder

    def broken(self, table):
        raise RuntimeError("boom")

    monkeypatch.setattr(JsonlDecoder, "judged", broken)
    batch = pa.RecordBatch.from_pydict({"_raw": [line("a")], "_source_file": ["f.jsonl"]})
    with pytest.raises(RuntimeError, match="boom"):
        list(decoder()(iter([batch])))


def test_spark_batches_are_decoded_in_chunks_with_the_same_outcome(monkeypatch):
    """Spark hands the decoder 10,000 lines at a time; it joins them into chunks of
    ``CHUNK_ROWS`` lines (one blob per bucket and chunk, not per batch), with the same outcome:
    each line either decoded into its row or rejected, the bad line rejected."""
    from jobs.executor import jsonl_decoder

    monkeypatch.setattr(jsonl_decoder, "CHUNK_ROWS", 100)
    good = [line(f"d{i % 7}", f"2024-01-01T00:{i % 60:02d}:{i % 59:02d}Z") for i in range(330)]
    lines = [*good[:150], "not json", *good[150:]]
    sizes = [40, 0, 40, 40, 31, 100, 80]  # an empty batch too; 331 lines in all
    batches, at = [], 0
    for n in sizes:
        part = lines[at : at + n]
        at += n
        batches.append(
            pa.RecordBatch.from_pydict(
                {"_raw": pa.array(part, pa.string()), "_source_file": ["f.jsonl"] * len(part)}
            )
        )
    dec = decoder()
    chunks = list(dec(iter(batches)))
    assert len(chunks) == 3  # 120 | 111 | 100 lines

    def decoded(outputs) -> tuple[list, list[str]]:
        rows, rejected = [], []
        for out in outputs:
            buckets = out.column(0).drop_null().to_pylist()
            assert len(buckets) == len(set(buckets))  # one blob per bucket and chunk
            for bucket, blob, raw in zip(
                out.column(0).to_pylist(),
                out.column(2).to_pylist(),
                out.column(3).to_pylist(),
                strict=True,
            ):
                if blob is None:
                    rejected.append(raw)
                else:
                    table = pa.ipc.open_stream(blob).read_all()
                    rows += [(bucket, *r.values()) for r in table.to_pylist()]
        return sorted(rows), rejected

    rows, rejected = decoded(chunks)
    assert rejected == ["not json"]
    expected, _ = decoded(  # the valid lines: decoded alike in one batch
        [dec.decode(pa.RecordBatch.from_pydict({"_raw": good, "_source_file": ["f"] * len(good)}))]
    )
    assert rows == expected
    blobs_alone = sum(len(dec.decode(b).column(0).drop_null()) for b in batches if b.num_rows)
    assert sum(len(c.column(0).drop_null()) for c in chunks) < blobs_alone


def test_a_bad_line_costs_five_parses_not_a_halving_of_its_chunk(monkeypatch):
    """Arrow names the row it failed on: the chunk is cut there (the line and the one before
    it read alone, the bad one loosely once more), so a bad line costs five parses whatever
    the size of its chunk."""
    from jobs.executor.jsonl_decoder import JsonlDecoder

    calls = []
    parse = JsonlDecoder._parse

    def counted(self, *args, **kwargs):
        calls.append(args[1:3])
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(JsonlDecoder, "_parse", counted)
    good = [line(f"d{i % 7}", f"2024-01-01T00:{i % 60:02d}:00Z") for i in range(2000)]
    bad = ["{not json", '{"device": 5, "ts": "2024-01-01T00:00:01Z"}', '{"device": "a"} x']
    lines = [b for i, g in enumerate(good) for b in ([g, bad[i % 3]] if i % 20 == 19 else [g])]
    rows, rejected, _ = run(decoder(), lines)
    assert len(rows) == 2000 and len(rejected) == 3  # (the same three texts, 100 lines)
    assert len(calls) <= 1 + 100 * 5


def test_a_deduplicated_pipelines_records_carry_their_id_line_and_file():
    dec = decoder(dedup=("ok", "ts"))  # the event time in an id: as µs, whatever its text form
    lines = [
        line(ok=True, ts="2024-01-01T00:00:01Z"),
        line(ok=True, ts="2024-01-01 00:00:01+00:00"),
        line(ok=None),
        "garbage",
    ]
    rows, rejected, _ = run(dec, lines)
    assert rejected == {"garbage": why.NOT_STRICT_JSON}
    ids = [r["pst_dedup_id"] for r in rows]
    us = str((T0 + 1) * US)
    assert sorted(ids, key=str) == [f"4:true|{len(us)}:{us}"] * 2 + [None]
    assert sorted(r["pst_raw"] for r in rows) == sorted(lines[:3])
    assert {r["pst_source_file"] for r in rows} == {"f.jsonl"}
    plain, _, _ = run(decoder(), lines[:1])  # without dedup: the element columns only
    assert set(plain[0]) == {"device", "ts_us", "seconds", "bucket"}


def test_a_lines_reasons_are_the_record_rules_not_the_decoders_own(monkeypatch):
    """What the decoder finds of a line as it reads it (not UTF-8, not read, its event time
    missing or unreadable) it names by the record rule's test; the statement of the rules
    (:func:`jobs.executor.record_rules.rules`) gives the reason. A reason changed there is the
    decoder's at once: it writes none of its own."""
    from jobs.executor import record_rules
    from jobs.executor.record_rules import EventTimeUs, IsNull, NotUtf8, Raw, Rule, Unparsed

    lines = ["{'device': 'a'}", json.dumps({"device": "a"}), json.dumps({"device": "a", "ts": 7})]
    dec = decoder()
    _, rejected, _ = run(dec, lines)
    rules = dec.rules
    assert [rejected[x] for x in lines] == [
        rules.reason_of(Unparsed()),
        rules.reason_of(IsNull(Raw("ts"))),
        rules.reason_of(IsNull(EventTimeUs())),
    ]
    stated = record_rules.rules

    def renamed(shape):  # the same rules, their reasons reworded
        return tuple(Rule(r.test, f"R{i}") for i, r in enumerate(stated(shape)))

    monkeypatch.setattr(record_rules, "rules", renamed)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"\xff{}", *(x.encode() for x in lines)], pa.binary()).cast(
                pa.string(), safe=False
            ),
            pa.array(["f"] * 4),
        ],
        names=["_raw", "_source_file"],
    )
    out = decoder().decode(batch).column("_error").to_pylist()
    order = [r.test for r in stated(dec.shape)]
    tests = (NotUtf8(), Unparsed(), IsNull(Raw("ts")), IsNull(EventTimeUs()))
    assert out == [f"R{order.index(t)}" for t in tests]


def test_an_input_of_several_is_decoded_as_that_input(tmp_path):
    """The decoder of one of several inputs tags its records as the pipeline's tagging does
    (``Pipeline.tag_as``): only the input's own columns are read (another input's are null
    whatever a line holds), ``input`` is its name, ids are its own, and its latest event time
    goes on its lane's marker row, not on its blobs."""
    from jobs.executor.operator_input import DEDUP_ID, lane_marker
    from jobs.sources.files.landing import jsonl_decoder
    from tests.jobs.test_inputs_config import config, load

    p = load(config(tmp_path))
    impressions, clicks = p.inputs
    late, flags = "2024-01-01T00:00:09Z", [c.flag for c in p.conditions]

    def decoded(one, lines):
        batch = pa.RecordBatch.from_pydict(
            {"_raw": pa.array(lines, pa.string()), "_source_file": ["f.jsonl"] * len(lines)}
        )
        out = pickle.loads(pickle.dumps(jsonl_decoder(p, one))).decode(batch).to_pylist()
        rows = [
            r
            for o in out
            if o["pst_blob"]
            for r in pa.ipc.open_stream(o["pst_blob"]).read_all().to_pylist()
        ]
        assert all(o["pst_ts"] is None for o in out if o["pst_blob"])  # no clock on a blob
        markers = [o for o in out if o["pst_blob"] is None and o["pst_bucket"] is not None]
        rejected = {o["_raw"]: o["_error"] for o in out if o["_error"]}
        return rows, markers, rejected

    shown = [  # a field of another input's column, or naming another input, is not read
        json.dumps({"campaign": "a", "ts": "2024-01-01T00:00:01Z", "cost": 9.0}),
        json.dumps({"campaign": "b", "ts": late, "input": "clicks", "click_id": "x"}),
        json.dumps({"campaign": "c"}),
    ]
    rows, markers, rejected = decoded(impressions, shown)
    assert sorted((r["campaign"], r["cost"], r["input"], r[DEDUP_ID]) for r in rows) == [
        ("a", None, "impressions", None),
        ("b", None, "impressions", None),
    ]
    assert all([r[f] for f in flags] == [True, False] for r in rows)  # impressions, not clicks
    assert [(m["pst_bucket"], m["pst_ts"].isoformat()) for m in markers] == [
        (lane_marker(0), "2024-01-01T00:00:09+00:00")
    ]
    assert rejected == {shown[2]: why.missing_event_time("ts")}

    clicked = [json.dumps({"campaign": "a", "click_ts": T0 + 5, "click_id": "x", "cost": 0.5})]
    rows, markers, _ = decoded(clicks, clicked)
    assert [(r["input"], r["cost"], r[DEDUP_ID], r["pst_raw"]) for r in rows] == [
        ("clicks", 0.5, "clicks:1:x", clicked[0])
    ]
    assert [rows[0][f] for f in flags] == [False, True]
    assert [m["pst_bucket"] for m in markers] == [lane_marker(1)]

    # beside a retracting upstream's pane log, each record weighs +1
    from dataclasses import replace

    dec = jsonl_decoder(p, clicks)
    assert dec is not None and dec.as_input is not None
    weighed = replace(dec, as_input=replace(dec.as_input, weighted=True))
    batch = pa.RecordBatch.from_pydict({"_raw": clicked, "_source_file": ["f.jsonl"]})
    (blob,) = [o["pst_blob"] for o in weighed.decode(batch).to_pylist() if o["pst_blob"]]
    assert pa.ipc.open_stream(blob).read_all().column("pst_weight").to_pylist() == [1]
