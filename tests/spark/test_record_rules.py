"""The record rules (:mod:`jobs.executor.record_rules`), stated once, judge random records alike in
both renderings: in Arrow (the JSON-lines decoder's) and in Spark SQL (the plan's). Same accepted
or rejected, same reason, and for an accepted record the same typed keys, event time, values,
condition flags, dedup id and key bucket.

A record is drawn as the decoder's strict reading holds it (:attr:`JsonlDecoder.read_schema`:
anything else is a malformed line, rejected before these rules) and handed to Spark as Spark's
own parsers hand it over (:func:`jobs.sources.files.landing.read_schema_ddl`: keys and the event
time as text, the other columns in their types). Malformed in every other way: missing fields
(null), integers beyond an ``int`` key's range and an epoch beyond µs, event times in and out of
the accepted forms and range, empty and blank keys, NaN and infinities, text of any code point.
Lines that are not UTF-8 or not strict JSON are the line's rules, the decoder's reading
(``tests/jobs/test_jsonl_decoder.py``), and the plan's on Spark's reading
(``tests/spark/test_bad_input.py``).

One Spark job per drawn batch of records, in the shared session."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

pytestmark = pytest.mark.spark

COLUMNS = (
    ("device", "string"),
    ("n", "int"),
    ("ts", "timestamp"),
    ("seconds", "double"),
    ("count", "long"),
    ("ok", "boolean"),
    ("tag", "string"),
)
KEYS = ("device", "n")
CONDITIONS = ("tag = 'x' or seconds > 1.5", "ok = false and count >= 3")
DEDUP = ("device", "ts", "n", "count", "ok", "tag", "seconds")


def decoder(epoch: bool):
    from jobs.executor.jsonl_decoder import JsonlDecoder
    from jobs.executor.record_rules import RecordShape
    from panes.conditions import parse_condition

    conditions = tuple(parse_condition(c) for c in CONDITIONS)
    columns = tuple((c, "long" if epoch and c == "ts" else t) for c, t in COLUMNS)
    shape = RecordShape(
        columns=columns,
        keys=KEYS,
        event_time="ts",
        values=("seconds", "count", "tag", "ok"),  # the values' columns and the conditions'
        buckets=7,
        epoch_us=1000 if epoch else None,
        dedup=DEDUP,
        conditions=conditions,
    )
    return JsonlDecoder(shape, ("seconds", "count", "tag", *(c.flag for c in conditions)))


INT64 = st.integers(-(2**63), 2**63 - 1)
BOUNDS = st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 0, -1, 2**63 - 1, -(2**63)])
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
KEY_TEXT = st.one_of(st.sampled_from(["", " ", "  ", "a", " a ", "\t", "é", "x" * 40]), TEXT)


def _iso() -> st.SearchStrategy[str]:
    """Event-time text in the accepted ISO forms (most), near them, and off them."""
    instant = st.datetimes(
        min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59)
    )
    valid = st.tuples(
        instant,
        st.sampled_from(
            ["%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]
        ),
        st.sampled_from(["", "Z", "+01:00", "-0530", "+17", "-17:59"]),
    ).map(lambda t: t[0].strftime(t[1]).rjust(10, "0") + ("" if len(t[1]) == 8 else t[2]))
    two = st.integers(0, 39).map(lambda i: f"{i:02d}")
    year = st.one_of(
        st.sampled_from(["0000", "0001", "1969", "1970", "2024", "9999", "10000", "99999"]),
        st.integers(0, 99999).map(lambda y: f"{y:04d}"),
        st.integers(0, 999).map(str),
    )
    time = st.tuples(
        st.sampled_from(["T", " ", "t", "T"]),
        two,
        st.just(":"),
        two,
        st.one_of(st.just(""), two.map(lambda s: ":" + s)),
        st.one_of(st.just(""), st.integers(0, 10**7).map(lambda f: f".{f}")),
        st.sampled_from(["", "Z", "+01:00", "-0530", "+18", "-17:59", "+5", " UTC", "z"]),
    ).map("".join)
    near = st.tuples(
        st.sampled_from(["", " "]),
        year,
        st.just("-"),
        two,
        st.just("-"),
        two,
        st.one_of(st.just(""), time),
        st.sampled_from(["", " ", "\n"]),
    ).map("".join)
    return st.one_of(valid, valid, valid, near, TEXT)


def _records(epoch: bool) -> st.SearchStrategy[list[dict]]:
    def maybe(s: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(s, s, s, s, s, st.none())  # missing now and then

    record = st.fixed_dictionaries(
        {
            "device": maybe(st.one_of(st.sampled_from(["a", "b", "é"]), KEY_TEXT)),
            "n": maybe(st.one_of(st.integers(-5, 5), st.integers(-5, 5), BOUNDS, INT64)),
            "ts": maybe(
                st.one_of(st.integers(-(10**13), 10**13), INT64, BOUNDS) if epoch else _iso()
            ),
            "seconds": maybe(
                st.one_of(st.floats(-10, 10), st.floats(allow_nan=True, allow_infinity=True))
            ),
            "count": maybe(st.one_of(BOUNDS, INT64)),
            "ok": maybe(st.booleans()),
            "tag": maybe(st.one_of(st.just("x"), TEXT)),
        }
    )
    return st.lists(record, min_size=1, max_size=80)


def _as_spark_reads_it(records: list[dict]) -> list[dict]:
    """Keys and the event time as text (as Spark's parsers hand them over), the rest typed."""
    text = {"device", "n", "ts"}
    return [
        {c: (str(v) if c in text and v is not None else v) for c, v in r.items()} for r in records
    ]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and type(a) is type(b)


def _judge_both(spark, epoch: bool, records: list[dict]) -> tuple[list[dict], list[dict]]:
    from pyspark.sql import functions as F

    from jobs.executor.record_rules import ArrowRecords, SparkRecords, bucket_expression

    dec = decoder(epoch)
    shape = dec.shape
    values = dec.values

    # Arrow: the decoder's table
    table = pa.Table.from_pylist(records, schema=dec.read_schema)
    arrow = ArrowRecords(shape)
    reason, us = arrow.judged(table)
    keys = [arrow.typed(table, k) for k in KEYS]
    by_arrow = []
    ids = arrow.dedup_id(table, us).to_pylist()
    buckets = [None] * len(records)
    ok = [r is None for r in reason.to_pylist()]
    kept = pa.array([i for i, o in enumerate(ok) if o], pa.int64())
    if len(kept):
        for i, b in zip(kept.to_pylist(), arrow.buckets([k.take(kept) for k in keys]), strict=True):
            buckets[i] = int(b)
    carried = {v: arrow.carried(table, v).to_pylist() for v in values}
    key_values = [k.to_pylist() for k in keys]
    for i, why in enumerate(reason.to_pylist()):
        row: dict = {"reason": why}
        if why is None:
            row |= {
                "keys": tuple(k[i] for k in key_values),
                "ts_us": us[i].as_py(),
                **{v: carried[v][i] for v in values},
                "id": ids[i],
                "bucket": buckets[i],
            }
        by_arrow.append(row)

    # Spark: the plan's rendering, as Spark's parsers hand the records over
    types = ", ".join(
        f"`{c}` {'string' if c in ('device', 'n', 'ts') else t}"
        for c, t in ((c, {"int": "int", "long": "bigint"}.get(t, t)) for c, t in shape.columns)
    )
    names = [c for c, _ in shape.columns]
    rows = [(i, *(r[c] for c in names)) for i, r in enumerate(_as_spark_reads_it(records))]
    df = spark.createDataFrame(rows, f"i int, {types}")
    rendered = SparkRecords(shape, dict(df.dtypes))
    ts, _ = rendered.event_time(df)
    typed_prefix = "pst_typed_"
    read = dict.fromkeys(c for cond in shape.conditions for c in cond.columns)
    checked = df.select(
        "*",
        ts.alias("pst_ts"),
        replace(rendered, event_time_us=F.unix_micros(ts)).reason().alias("pst_reason"),
        *[rendered.typed(c).alias(typed_prefix + c) for c in read],
    )
    ids_spark = replace(rendered, event_time_us=F.unix_micros(F.col("pst_ts")))
    out = checked.select(
        "i",
        "pst_reason",
        *[rendered.typed(k).alias(k) for k in KEYS],
        F.unix_micros("pst_ts").alias("ts_us"),
        *[rendered.carried(v, lambda c: f"`{typed_prefix}{c}`").alias(v) for v in values],
        ids_spark.dedup_id().alias("id"),
    )
    out = out.select("*", bucket_expression(KEYS, shape.buckets).alias("bucket"))
    by_spark = []
    for r in sorted(out.collect(), key=lambda r: r["i"]):
        row = {"reason": r["pst_reason"]}
        if r["pst_reason"] is None:
            row |= {
                "keys": tuple(r[k] for k in KEYS),
                "ts_us": r["ts_us"],
                **{v: r[v] for v in values},
                "id": r["id"],
                "bucket": r["bucket"],
            }
        by_spark.append(row)
    return by_arrow, by_spark


def _compare(records, by_arrow, by_spark) -> None:
    assert len(by_arrow) == len(by_spark) == len(records)
    for record, a, s in zip(records, by_arrow, by_spark, strict=True):
        assert a.keys() == s.keys(), (record, a, s)
        for k in a:
            assert _same(a[k], s[k]), (record, k, a, s)


EXAMPLES = max(6, settings.default.max_examples // 12)
"""Each example is a batch of records, one Spark job of some seconds: a twelfth of the
profile's count (each example holds up to 80 records)."""


def _every_rule(epoch: bool) -> list[dict]:
    """A batch that meets every rule (and acceptance), beside the random ones."""
    good = {
        "device": "a",
        "n": 1,
        "ts": 1_717_232_403_000 if epoch else "2024-06-01T09:00:03Z",
        "seconds": 1.5,
        "count": 2**62,
        "ok": False,
        "tag": "x",
    }
    far = 3 * 10**14 if epoch else "10000-01-01T00:00:00Z"  # in ms: the year 11476
    bad = [
        {"ts": None},
        {"ts": 2**62 if epoch else "yesterday"},  # in ms: beyond µs
        {"ts": far},
        {"device": None},
        {"device": "  "},
        {"n": None},
        {"n": 2**31},
        {"n": -(2**31) - 1},
        {"seconds": float("nan")},
        {"seconds": float("-inf")},
        {"count": None, "ok": None, "tag": None, "seconds": None},
        {"n": 2**31 - 1, "device": " é "},
        # a double's id text: Spark writes 1.0E20 where Arrow writes 1e+20; -0.0 is 0.0
        *({"seconds": v} for v in (1e20, -0.0, 0.0, 5e-324, 0.1, -1.7976931348623157e308)),
    ]
    return [good, *({**good, **b} for b in bad)]


@pytest.mark.parametrize("epoch", [False, True], ids=["iso", "epoch"])
def test_both_renderings_judge_random_records_alike(spark, epoch):
    seen: dict[str, int] = {}

    @settings(max_examples=EXAMPLES)
    @given(records=_records(epoch))
    @example(records=_every_rule(epoch))
    def check(records):
        by_arrow, by_spark = _judge_both(spark, epoch, records)
        _compare(records, by_arrow, by_spark)
        for row in by_arrow:
            seen[row["reason"] or "accepted"] = seen.get(row["reason"] or "accepted", 0) + 1

    check()
    # the draws reached every rule (and acceptance)
    from jobs.executor import rejection_reasons as why

    wanted = {
        "accepted",
        why.missing_event_time("ts"),
        why.unparseable_event_time("ts"),
        why.missing_key("device"),
        why.missing_key("n"),
        why.unparseable("key", "n"),
        why.empty_key("device"),
        why.not_finite("seconds"),
        why.event_time_out_of_range("ts"),
    }
    assert wanted <= set(seen), sorted(wanted - set(seen))


def test_the_statement_orders_the_rules_as_documented():
    """The first rule that holds is the reason: line, event time, keys (missing, not converted,
    empty), values (not converted, not finite)."""
    from jobs.executor import rejection_reasons as why
    from jobs.executor.record_rules import NotConvertedReason, rules

    stated = [r.reason for r in rules(decoder(False).shape)]
    assert stated == [
        why.NOT_UTF8,
        None,
        why.missing_event_time("ts"),
        why.unparseable_event_time("ts"),
        why.event_time_out_of_range("ts"),
        why.missing_key("device"),
        NotConvertedReason("key", "device", "string"),
        why.empty_key("device"),
        why.missing_key("n"),
        NotConvertedReason("key", "n", "int"),
        NotConvertedReason("value", "seconds", "double"),
        why.not_finite("seconds"),
        NotConvertedReason("value", "count", "long"),
        NotConvertedReason("value", "tag", "string"),
        NotConvertedReason("value", "ok", "boolean"),
    ]
