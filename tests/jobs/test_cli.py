"""jobs.cli.commands: configuration errors are reported naming the field, before Spark starts."""

from __future__ import annotations

from pathlib import Path

DEMO = str(Path(__file__).resolve().parents[2] / "conf" / "demo.toml")


def test_cli_check_and_config_errors(tmp_path, capsys):
    from jobs.cli.commands import main

    assert main(["check", DEMO]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(
        Path(DEMO).read_text().replace('window = "Sessions(30m)"', 'window = "GlobalWindows()"')
    )
    bad.write_text(
        bad.read_text().replace(
            'trigger = "AfterWatermark(early=AfterAny(AfterCount(5), AfterProcessingTime(1m)), '
            'late=AfterCount(1))"',
            'trigger = "DefaultTrigger()"',
        )
    )
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "trigger:" in err and "never fires" in err


def test_note_watermark_writes_a_mark_or_says_why_not(tmp_path, capsys):
    from jobs.cli.commands import main
    from jobs.driver.watermark_marks import parse_time, read_mark

    (tmp_path / "v1.jsonl").write_text("{}\n")
    args = ["note-watermark", DEMO, "--source", str(tmp_path), "--writer", "gw-1"]
    assert main([*args, "--time", "2024-06-01T09:05:00Z", "--files", "v1.jsonl"]) == 0
    assert capsys.readouterr().out.strip().endswith("_watermarks/gw-1/000000000000.json")
    mark = read_mark(tmp_path, "gw-1", 0)
    assert mark.time_us == parse_time("2024-06-01T09:05:00Z") and mark.files == ("v1.jsonl",)
    assert main([*args, "--time", "2024-06-01T09:00:00Z"]) == 2
    assert "never decrease" in capsys.readouterr().err
    assert main([*args, "--time", "9am"]) == 2
    assert "ISO-8601" in capsys.readouterr().err
