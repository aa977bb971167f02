"""jobs.config.event_time: one table of accepted forms, and every path that reads event times
agrees.

A corpus of good and bad event times (ISO forms, epochs, out of range, garbage) with the outcome
each must have: its µs, :data:`UNREADABLE` (rejected as ``unparseable event time``) or
:data:`OUT_OF_RANGE`. Here: the Arrow reading (:func:`jobs.config.event_time.event_time_us`), the
JSON-lines decoder (decodes exactly the accepted records, with that time, and rejects the others
with their reason) and ``verify``'s own reading of the landing zone in DuckDB
(:mod:`jobs.inspection.source_elements`), which uses none of the job's event-time code.
``tests/spark/test_event_time.py`` holds Spark's reading to the same corpus.
"""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

pa = pytest.importorskip("pyarrow")

from jobs.config.event_time import (  # noqa: E402
    MAX_EVENT_TIME_US,
    MIN_EVENT_TIME_US,
    _zoned_iso_us,
    accepted,
    event_time_us,
)

UNREADABLE, OUT_OF_RANGE = "unreadable", "out of range"
T0_US = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z


def _us(*args: int) -> int:
    t = dt.datetime(*args, tzinfo=dt.timezone.utc)
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


TEXT = [  # a timestamp column's text (JSON string), its outcome
    ("2024-01-01T00:00:00Z", T0_US),
    ("2024-01-01 01:00:00+01:00", T0_US),
    ("2023-12-31T19:00:00-05:00", T0_US),
    ("2024-01-01T05:30:00+0530", T0_US),
    ("2024-01-01T02:00:00+02", T0_US),
    ("2024-01-01T00:00:00.5Z", T0_US + 500_000),
    ("2024-01-01T00:00:00.123456Z", T0_US + 123_456),
    ("2024-01-01T00:00:00", T0_US),  # no zone: UTC
    ("2024-01-01T00:00", T0_US),
    ("2024-01-01T01:00+01:00", T0_US),  # minutes, then a zone
    ("2024-01-01T00:00Z", T0_US),
    ("2024-01-01", T0_US),
    ("  2024-01-01T00:00:00Z  ", T0_US),  # spaces are trimmed
    ("2024-02-29T12:00:00Z", _us(2024, 2, 29, 12)),
    ("0500-03-01T00:00:00Z", _us(500, 3, 1)),
    ("0001-01-01T00:00:00Z", MIN_EVENT_TIME_US),
    ("9999-12-31T23:59:59.998999Z", MAX_EVENT_TIME_US),
    ("9999-12-31T23:59:59.999Z", OUT_OF_RANGE),  # the drain sentinel's time
    ("10000-01-01T00:00:00Z", OUT_OF_RANGE),
    ("0000-01-01T00:00:00Z", OUT_OF_RANGE),
    ("0001-01-01T00:00:00+01:00", OUT_OF_RANGE),
    ("2023-02-29T00:00:00Z", UNREADABLE),
    ("2024-04-31T00:00:00Z", UNREADABLE),
    ("2024-13-01T00:00:00Z", UNREADABLE),
    ("2024-01-01T24:00:00Z", UNREADABLE),
    ("2024-01-01T00:00:60Z", UNREADABLE),
    ("2024-01-01T00:00:00.1234567Z", UNREADABLE),
    ("2024-01-01T00:00:00+18:00", UNREADABLE),
    ("2024-01-01T00:00:00 UTC", UNREADABLE),
    ("2024-01-01T00:00:00Z\n", UNREADABLE),
    ("2024-1-1T00:00:00Z", UNREADABLE),
    ("2024-01-01Z", UNREADABLE),
    ("\uff12\uff10\uff12\uff14-01-01", UNREADABLE),  # full-width digits
    ("1704067200", UNREADABLE),  # a number in a timestamp column
    ("yesterday", UNREADABLE),
    ("", UNREADABLE),
]
EPOCH_MS = [  # an epoch column in ms (a JSON number, or text), its outcome
    (1_704_067_200_000, T0_US),
    ("1704067200000", T0_US),
    (" 1704067200000 ", T0_US),
    ("+1704067200000", T0_US),
    (-1, -1000),
    (10**15, OUT_OF_RANGE),  # 10**18 µs: year 33658
    (-(10**15), OUT_OF_RANGE),
    (10**18, UNREADABLE),  # too large for µs
    (-(10**18), UNREADABLE),
    (2**63 - 1, UNREADABLE),
    (10**30, UNREADABLE),
    (1.5, UNREADABLE),
    ("1e3", UNREADABLE),
    ("abc", UNREADABLE),
]


def outcome(us: int | None) -> int | str:
    if us is None:
        return UNREADABLE
    return us if MIN_EVENT_TIME_US <= us <= MAX_EVENT_TIME_US else OUT_OF_RANGE


def as_text(value) -> str:
    """What Spark's JSON parser (and verify's reader) hands over for a JSON value read as text."""
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize(("raw", "expected"), TEXT)
def test_text_forms(raw, expected):
    (us,) = event_time_us(pa.array([raw]), epoch_us=None).to_pylist()
    assert outcome(us) == expected


def test_a_batch_reads_each_text_as_alone():
    """A batch whose texts all carry a zone takes Arrow's ISO-8601 reading, any other the
    part-by-part one: each text's outcome is its own either way."""
    readable = [(r, e) for r, e in TEXT if e not in (UNREADABLE, OUT_OF_RANGE)]
    with_zone = re.compile(r"[T ]\d\d:\d\d.*(Z|[+-]\d\d(:?\d\d)?)$")
    zoned = [(r, e) for r, e in readable if with_zone.search(r.strip())]
    assert len(zoned) >= 6
    assert _zoned_iso_us(pa.array([r.strip() for r, _ in zoned])) is not None  # the fast path
    for batch in (TEXT, readable, zoned):
        got = event_time_us(pa.array([r for r, _ in batch]), epoch_us=None).to_pylist()
        assert [outcome(us) for us in got] == [e for _, e in batch]


@pytest.mark.parametrize(("raw", "expected"), EPOCH_MS)
def test_epochs_as_text_and_as_numbers(raw, expected):
    (us,) = event_time_us(pa.array([as_text(raw)]), epoch_us=1000).to_pylist()
    assert outcome(us) == expected
    if isinstance(raw, int) and -(2**63) <= raw < 2**63:
        (us,) = event_time_us(pa.array([raw], pa.int64()), epoch_us=1000).to_pylist()
        assert outcome(us) == expected


def test_timestamps_nulls_and_sessions_not_in_utc():
    stamps = pa.array(
        [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), None], pa.timestamp("us", "UTC")
    )
    assert event_time_us(stamps, epoch_us=None).to_pylist() == [T0_US, None]
    assert event_time_us(pa.array([None], pa.string()), epoch_us=None).to_pylist() == [None]
    # without a zone: UTC, whatever a Spark session's time zone is (tests/spark/test_event_time)
    text = pa.array(["2024-01-01T00:00:00", "2024-01-01T00:00:00Z", "2024-01-01"])
    assert event_time_us(text, epoch_us=None).to_pylist() == [T0_US, T0_US, T0_US]
    assert accepted(pa.array([T0_US, None, MAX_EVENT_TIME_US + 1])).to_pylist() == [
        True,
        False,
        False,
    ]


# -- every path -----------------------------------------------------------------------------


def corpus_lines() -> list[tuple[str, str, int | str]]:
    """(pipeline kind, JSON line, outcome) for every corpus entry, key ``k<i>``."""
    lines = []
    for kind, corpus in (("text", TEXT), ("epoch", EPOCH_MS)):
        for i, (raw, expected) in enumerate(corpus):
            lines.append((kind, json.dumps({"k": f"k{i}", "ts": raw, "v": 1}), expected))
    return lines


def pipeline(tmp_path, kind: str):
    from jobs.config.load import pipeline_from_dict

    return pipeline_from_dict(
        {
            "name": f"p_{kind}",
            "lake": str(tmp_path / "lake"),
            "keys": ["k"],
            "event_time": "ts",
            "window": "FixedWindows(1h)",
            "aggregates": {"n": "count()"},
            "source": {
                "path": str(tmp_path / kind),
                "format": "jsonl",
                "epoch_unit": "ms" if kind == "epoch" else "s",
                "schema": {
                    "k": "string",
                    "ts": "timestamp" if kind == "text" else "long",
                    "v": "long",
                },
            },
        }
    )


@pytest.mark.parametrize("kind", ["text", "epoch"])
def test_the_decoder_decodes_exactly_the_accepted_event_times(tmp_path, kind):
    from jobs.executor import rejection_reasons as why
    from jobs.executor.operator_input import unpack
    from jobs.sources.files.landing import jsonl_decoder

    cases = [(line, expected) for k, line, expected in corpus_lines() if k == kind]
    decoder = jsonl_decoder(pipeline(tmp_path, kind))
    reasons = {UNREADABLE: why.unparseable_event_time("ts"), OUT_OF_RANGE: "event time out of"}
    for line, expected in cases:
        batch = pa.RecordBatch.from_pydict({"_raw": [line], "_source_file": ["f"]})
        out = decoder.decode(batch).to_pydict()
        blobs = [b for b in out["pst_blob"] if b is not None]
        if isinstance(expected, int):
            assert unpack(blobs).column("ts_us").to_pylist() == [expected], line
        else:
            assert not blobs and out["_raw"] == [line], line
            assert out["_error"][0].startswith(reasons[expected]), (line, out["_error"])


@pytest.mark.parametrize("kind", ["text", "epoch"])
def test_verify_reads_the_landing_zone_to_the_same_outcomes(tmp_path, kind):
    from jobs.inspection.source_elements import load_source_elements

    cases = [(line, expected) for k, line, expected in corpus_lines() if k == kind]
    (tmp_path / kind).mkdir()
    (tmp_path / kind / "corpus.jsonl").write_text("".join(line + "\n" for line, _ in cases))
    table = load_source_elements(pipeline(tmp_path, kind))
    got = dict(zip(table.column("k").to_pylist(), table.column("ts_us").to_pylist(), strict=True))
    want = {json.loads(line)["k"]: e for line, e in cases if isinstance(e, int)}
    assert got == want


def test_verify_reads_event_times_with_code_the_job_does_not_use(tmp_path, monkeypatch):
    """A decoder that misread zone offsets (the wall time taken as UTC) would make other
    elements than ``verify`` reads: verify's reading (DuckDB's) does not move with the job's."""
    import pyarrow.compute as pc

    from jobs.config import event_time
    from jobs.executor import record_rules as decoder_module  # the decoder's Arrow rendering
    from jobs.executor.operator_input import unpack
    from jobs.inspection.source_elements import load_source_elements
    from jobs.sources.files.landing import jsonl_decoder

    stamps = ["2024-01-01T01:00:00+01:00", "2023-12-31T19:00:00-05:00", "2024-01-01T05:30:00+0530"]
    stamps.append("2024-01-01T00:00:00Z")
    lines = [json.dumps({"k": f"k{i}", "ts": ts, "v": 1}) for i, ts in enumerate(stamps)]
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.jsonl").write_text("".join(line + "\n" for line in lines))
    p = pipeline(tmp_path, "text")

    def decoded() -> dict:
        batch = pa.RecordBatch.from_pydict({"_raw": lines, "_source_file": ["f"] * len(lines)})
        blobs = [b for b in jsonl_decoder(p).decode(batch).column("pst_blob").to_pylist() if b]
        t = unpack(blobs)
        return dict(zip(t.column("k").to_pylist(), t.column("ts_us").to_pylist(), strict=True))

    def verified() -> dict:
        t = load_source_elements(p)
        return dict(zip(t.column("k").to_pylist(), t.column("ts_us").to_pylist(), strict=True))

    right = {f"k{i}": T0_US for i in range(len(stamps))}
    assert decoded() == verified() == right
    real = event_time.event_time_us

    def offsets_ignored(values, *, epoch_us):
        wall = pc.replace_substring_regex(event_time.flat(values), r"(Z|[+-]\d\d(:?\d\d)?)$", "")
        return real(wall, epoch_us=epoch_us)

    monkeypatch.setattr(decoder_module, "event_time_us", offsets_ignored)
    monkeypatch.setattr(event_time, "event_time_us", offsets_ignored)
    assert decoded() == {
        **right,
        "k0": T0_US + 3_600_000_000,
        "k1": T0_US - 18_000_000_000,
        "k2": T0_US + 19_800_000_000,
    }
    assert verified() == right  # a batch check over these elements differs from the view


def test_verify_leaves_out_the_lines_that_are_not_strict_json(tmp_path):
    """The job rejects a field of another JSON type than its column's (strict JSON,
    docs/sources.md); verify's DuckDB reading leaves the same records out, where DuckDB alone
    would read ``5`` as the text "5" or "7" as the number 7."""
    from jobs.inspection.source_elements import load_source_elements
    from jobs.sources.files.landing import jsonl_decoder

    ts = "2024-01-01T00:00:00Z"
    lines = [
        {"k": "good", "ts": ts, "v": 1},
        {"k": 5, "ts": ts, "v": 1},
        {"k": "text-for-long", "ts": ts, "v": "7"},
        {"k": "fraction-for-long", "ts": ts, "v": 1.5},
        {"k": "number-for-time", "ts": 1704067200, "v": 1},
        {"k": "null-value", "ts": ts, "v": None, "other": [1, "x"]},
    ]
    text = [json.dumps(x) for x in lines] + ["{'k': 'single-quotes', 'ts': '" + ts + "'}"]
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.jsonl").write_text("".join(t + "\n" for t in text))
    p = pipeline(tmp_path, "text")
    batch = pa.RecordBatch.from_pydict({"_raw": text, "_source_file": ["f"] * len(text)})
    rejected = set(jsonl_decoder(p).decode(batch).column("_raw").drop_null().to_pylist())
    decoded = {json.loads(t)["k"] for t in text if t not in rejected}
    assert decoded == {"good", "null-value"}
    assert set(load_source_elements(p).column("k").to_pylist()) == decoded
