"""jobs.cli: configuration errors are reported naming the field, before Spark starts."""

from __future__ import annotations

from pathlib import Path

DEMO = str(Path(__file__).resolve().parents[2] / "conf" / "demo.toml")


def test_cli_check_and_config_errors(tmp_path, capsys):
    from jobs.cli import main

    assert main(["check", DEMO]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(DEMO).read_text().replace(
        'window = "Sessions(30m)"', 'window = "GlobalWindows()"'))  # fmt: skip
    bad.write_text(bad.read_text().replace(
        'trigger = "AfterWatermark(early=AfterAny(AfterCount(5), AfterProcessingTime(1m)), '
        'late=AfterCount(1))"', 'trigger = "DefaultTrigger()"'))  # fmt: skip
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "trigger:" in err and "never fires" in err
