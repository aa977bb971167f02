"""The report (``panestore report``) opened in a real browser: headless Chromium renders
``index.html`` from disk, offline; what it shows is read from its rendered DOM and a
screenshot."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from sinks.presentation.run_plots import LATE_COLOR, WATERMARK_COLOR
from tests.jobs.test_report import ERROR, open_lake, record_runs
from tests.report_dom import pixels_of, read_page


def test_chromium_shows_the_status_the_last_run_and_the_pictures(tmp_path, browse):
    lake = open_lake(tmp_path)
    record_runs(lake.spec)
    out = tmp_path / "report"
    assert main(["report", lake.conf, "--out", str(out)]) == 0
    url = (out / "index.html").as_uri()

    page = read_page(browse("--dump-dom", url).stdout)
    assert page.text["title"] == "ad_views: pipeline report"
    assert page.text["state"] == "failed"  # the last run failed
    assert page.text["last-run-outcome"] == "failed"
    assert page.text["last-run-error"] == ERROR  # the text, not markup: escaped on the page
    assert page.text["run-count"] == "3" and page.rows["runs"] == 1 + 3
    assert "d1" in page.text["open-windows"] and "d2" in page.text["open-windows"]
    for name in ("skew-plot", "panes-plot", "dropped-plot"):
        assert page.images[name]["src"].startswith("data:image/png;base64,")

    shot = tmp_path / "shot.png"
    browse("--window-size=1280,4200", "--hide-scrollbars", f"--screenshot={shot}", url)
    # the pictures' colours are only in the pictures: they decoded and were drawn
    assert pixels_of(str(shot), WATERMARK_COLOR) > 300  # the watermark line
    assert pixels_of(str(shot), LATE_COLOR) > 300  # late records, late bars
    assert pixels_of(str(shot), "#ffffff") < 0.97 * 1280 * 4200  # not a blank page
