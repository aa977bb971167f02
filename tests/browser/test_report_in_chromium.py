"""The report (``panestore report``) opened in a real browser: headless Chromium renders
``index.html`` from disk, offline; what it shows is read from its rendered DOM and a
screenshot."""

from __future__ import annotations

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from jobs.cli.commands import main
from sinks.run_plots import LATE_COLOR, WATERMARK_COLOR
from tests.jobs.test_report import ERROR, open_lake, record_runs
from tests.report_dom import read_page


def _pixels_of(png: str, color: str) -> int:
    """How many pixels of the screenshot ``png`` are ``color`` (#rrggbb), give or take the
    anti-aliasing."""
    import matplotlib.image as mpimg
    import numpy as np

    image = mpimg.imread(png)[..., :3]
    rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return int((np.abs(image - rgb).max(axis=-1) < 0.04).sum())


def test_chromium_shows_the_status_the_last_run_and_the_pictures(tmp_path, browse):
    lake = open_lake(tmp_path)
    record_runs(lake.spec)
    out = tmp_path / "report"
    assert main(["report", lake.conf, "--out", str(out)]) == 0
    url = (out / "index.html").as_uri()

    page = read_page(browse("--dump-dom", url).stdout)
    assert page.text["title"] == "ad_views: pipeline report"
    assert page.text["state"] == "ok"
    assert page.text["last-run-outcome"] == "failed"
    assert page.text["last-run-error"] == ERROR  # the text, not markup: escaped on the page
    assert page.text["run-count"] == "3" and page.rows["runs"] == 1 + 3
    assert "d1" in page.text["open-windows"] and "d2" in page.text["open-windows"]
    for name in ("skew-plot", "panes-plot", "dropped-plot"):
        assert page.images[name]["src"].startswith("data:image/png;base64,")

    shot = tmp_path / "shot.png"
    browse("--window-size=1280,4200", "--hide-scrollbars", f"--screenshot={shot}", url)
    # the pictures' colours are only in the pictures: they decoded and were drawn
    assert _pixels_of(str(shot), WATERMARK_COLOR) > 300  # the watermark line
    assert _pixels_of(str(shot), LATE_COLOR) > 300  # late records, late bars
    assert _pixels_of(str(shot), "#ffffff") < 0.97 * 1280 * 4200  # not a blank page
