"""jobs.driver.watermark_marks: the mark format and the writer-side helpers."""

from __future__ import annotations

import json
import os

import pytest

from jobs.driver.watermark_marks import (
    MARKS_DIR,
    LandingWriter,
    Mark,
    MarkError,
    format_us,
    mark_path,
    mark_seqs,
    note_watermark,
    parse_mark,
    parse_time,
    read_mark,
    writer_names,
)

T = parse_time("2024-06-01T09:00:00Z")
S = 1_000_000


def test_time_text_round_trips_to_the_microsecond():
    assert parse_time("2024-06-01T09:00:00.000001Z") == T + 1
    assert parse_time("2024-06-01T11:00:00+02:00") == T
    assert format_us(T + 1) == "2024-06-01T09:00:00.000001Z"
    assert parse_time(format_us(-5)) == -5
    with pytest.raises(MarkError, match="no time zone"):
        parse_time("2024-06-01T09:00:00")
    with pytest.raises(MarkError, match="not an ISO-8601"):
        parse_time("yesterday")


def test_a_writer_lands_files_and_notes_them_in_order(tmp_path):
    w = LandingWriter(tmp_path, "gw-1")
    w.land("a.jsonl", ['{"x": 1}'])
    w.land("sub/b.jsonl", b'{"x": 2}\n')
    first = w.note(T, noted_at_us=T + 5 * S)
    assert first == tmp_path / MARKS_DIR / "gw-1" / "000000000000.json"
    assert (tmp_path / "a.jsonl").read_text() == '{"x": 1}\n'
    second = w.note(T + 60 * S)  # nothing landed since: a mark naming no file
    assert mark_seqs(tmp_path, "gw-1") == [0, 1] and writer_names(tmp_path) == ["gw-1"]
    assert read_mark(tmp_path, "gw-1", 0) == Mark(
        "gw-1", 0, T, ("a.jsonl", "sub/b.jsonl"), T + 5 * S
    )
    assert read_mark(tmp_path, "gw-1", 1).files == ()
    assert json.loads(second.read_text())["time"] == "2024-06-01T09:01:00.000000Z"
    assert not [p for p in tmp_path.rglob(".*")], "no temporary file left behind"


def test_notes_are_refused_when_they_would_mislead_the_job(tmp_path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    note_watermark(tmp_path, "w", T + 60 * S, ["a.jsonl"])
    with pytest.raises(MarkError, match="never decrease"):
        note_watermark(tmp_path, "w", T)
    with pytest.raises(MarkError, match="land the files first"):
        note_watermark(tmp_path, "w", T + 90 * S, ["later.jsonl"])
    with pytest.raises(MarkError, match="relative to the landing"):
        note_watermark(tmp_path, "w", T + 90 * S, ["../a.jsonl"])
    with pytest.raises(MarkError, match="hidden"):
        note_watermark(tmp_path, "w", T + 90 * S, ["_watermarks/w/000000000000.json"])
    with pytest.raises(MarkError, match="writer name"):
        note_watermark(tmp_path, "_w", T)
    assert mark_seqs(tmp_path, "w") == [0], "a refused note writes nothing"


def test_a_second_process_taking_the_same_sequence_number_is_refused(tmp_path, monkeypatch):
    note_watermark(tmp_path, "w", T)
    # another process notes seq 1 between this one's listing and its write
    import jobs.driver.watermark_marks as marks

    monkeypatch.setattr(marks, "mark_seqs", lambda landing, writer: [0])
    note_watermark(tmp_path, "w", T + S)
    with pytest.raises(MarkError, match="another process"):
        note_watermark(tmp_path, "w", T + 2 * S)
    assert read_mark(tmp_path, "w", 1).time_us == T + S, "the first mark 1 is kept"


def test_malformed_marks_are_named(tmp_path):
    good = Mark("w", 3, T, ("a.jsonl",), T).to_json()
    assert parse_mark(good, "x") == Mark("w", 3, T, ("a.jsonl",), T)
    bad = {
        "not json": "not JSON",
        json.dumps({"writer": "w"}): "exactly the fields",
        good.replace('"format": 1', '"format": 9'): "mark format 9",
        good.replace('"seq": 3', '"seq": -1'): "seq must be",
        good.replace('"a.jsonl"', '"/abs.jsonl"'): "relative",
        good.replace("09:00:00.000000Z", "09:00:00"): "no time zone",
    }
    for text, message in bad.items():
        with pytest.raises(MarkError, match=message) as e:
            parse_mark(text, "the/mark.json")
        assert "the/mark.json" in str(e.value)
    path = mark_path(tmp_path, "w", 4)
    os.makedirs(path.parent)
    path.write_text(good)  # seq 3 in the file named 4
    with pytest.raises(MarkError, match="not its own"):
        read_mark(tmp_path, "w", 4)


def test_the_batch_check_does_not_read_marks_as_data(tmp_path):
    from jobs.inspection.source_elements import landing_files

    w = LandingWriter(tmp_path, "w")
    w.land("a.jsonl", ["{}"])
    w.land("sub/b.jsonl", ["{}"])
    w.note(T)
    (tmp_path / "_other").mkdir()
    (tmp_path / "_other" / "c.jsonl").write_text("{}\n")
    assert landing_files(str(tmp_path)) == [
        str(tmp_path / "a.jsonl"),
        str(tmp_path / "sub" / "b.jsonl"),
    ]
