"""The lake of state layout format 2 that ``test_state_upgrade.py`` upgrades, and how it is made.

``state_upgrade_format2.tar.gz`` (beside this file) holds a lake written by panestore before
its operator kept its own state (commit be39f6b, state layout format 2: each key bucket's state in
a ``transformWithStateInPandas`` value state in the checkpoint's RocksDB store), and the landing
directory it read: two scheduled runs over :data:`OLD_FILES`, leaving sessions open (some with
early panes, one closed but not yet expired) at a watermark of 80 s. The test extracts it and
runs the current code over :data:`NEW_FILES`, then a drain.

**Why a fixed directory** (:data:`ROOT`): a lake only runs where it was created. Spark's
checkpoint names every landing and control file it took by absolute ``file://`` URI, and its
stateful operator's metadata names its state schema files by absolute path; the lake's
``_lake_identity.json`` records the lake, checkpoint and landing directories, and a lake
without it is adopted only if the checkpoint's paths lie in it
(:mod:`jobs.driver.lake_identity`). A copy elsewhere is refused, and rightly: run anyway, it
would take every landing file again, and the state reader the upgrade uses
(:mod:`jobs.driver.tws_state`) looks for the state schema at the old place
(``FileNotFoundException``). So the lake is made in, and extracted to, the same absolute
directory, ``/tmp/panestore-test-state-format-2``; where ``/tmp`` is a symlink (macOS:
``/private/tmp``) the recorded identity cannot match and the test is skipped.

Regenerate (from the repository root; the pre-format-3 code from git, this interpreter):

    git worktree add --detach /tmp/panestore-be39f6b be39f6b
    PYTHONPATH=/tmp/panestore-be39f6b .venv/bin/python tests/spark/state_upgrade_fixture.py
    git worktree remove /tmp/panestore-be39f6b

The script refuses to run unless the ``jobs`` it imports writes state layout format 2. Only the
standard library and the tests' landing helpers (``tests/spark/support.py``) at import time: the
test imports the data below from it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

from tests.spark.support import T0, iso, put

ROOT = Path("/tmp/panestore-test-state-format-2")
"""Where the fixture's lake was made and where the test extracts it (the module doc)."""
ARCHIVE = Path(__file__).with_name("state_upgrade_format2.tar.gz")
OLD_FORMAT = 2
SHUFFLE_PARTITIONS = 3
"""The old lake's shuffle partitions: not the test session's 2, so the upgrade must keep the
lake's own (its state layout's shards)."""


def view(device: str, s: int, seconds: float = 1.0) -> str:
    return json.dumps({"device_id": device, "ts": iso(s), "seconds": seconds})


def conf(root: Path = ROOT) -> dict:
    """The pipeline (``jobs.config.load.pipeline_from_dict``): sessions with early and late
    firings, retractions, allowed lateness; the old and the new code run the same one."""
    return {
        "name": "upgraded",
        "lake": str(root / "lake"),
        "keys": ["device_id"],
        "event_time": "ts",
        "window": "Sessions(1m)",
        "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
        "accumulation_mode": "accumulating_and_retracting",
        "allowed_lateness": "30s",
        "source": {
            "path": str(root / "landing"),
            "max_files_per_trigger": 1,
            "schema": {"device_id": "string", "ts": "timestamp", "seconds": "double"},
        },
        "watermark": {"delay": "10s"},
        "aggregates": {"plays": "count()", "watched": "sum(seconds)"},
        "state_buckets": 8,
    }


# One scheduled run per file. Times in seconds after T0; the watermark trails by 10 s.
OLD_FILES = {
    # a [1, 80) with 2 events: an early pane; b, c: one event each
    "old-0.jsonl": [
        view("a", 1),
        view("a", 20, 2.0),
        view("b", 3, 5.0),
        view("c", 5),
        "not json at all",
    ],
    # a [1, 110): 3 events; b's two sessions merge into [3, 100): an early pane; g [90, 150).
    # The watermark moves to 80 s: c [5, 65) fires on time (kept until 95 s, allowed lateness)
    "old-1.jsonl": [
        view("a", 50),
        view("b", 40),
        view("g", 90, 4.0),
        '{"device_id": "d", "ts": "yesterday"}',
    ],
}
OLD_WATERMARK_MS = (T0 + 80) * 1000
NEW_FILES = {
    # a [1, 110) gets a 4th event; c late (its session [5, 65) grows to [5, 120)); b a new
    # session; the watermark moves to 120 s: a, b [3, 100) and c close on time
    "new-0.jsonl": [
        view("a", 30, 7.0),
        view("c", 60, 3.0),
        view("b", 120),
        view("h", 130),
        '{"ts": "' + iso(300) + '"}',
    ],
    # a late event in a's closed, not yet expired session; g's session grows (an early pane);
    # b's newer sessions merge; the watermark moves to 140 s
    "new-1.jsonl": [view("a", 35, 3.0), view("g", 100, 2.0), view("b", 150, 2.0)],
}
REJECTED = {
    "not json at all": "malformed record (not parseable with the source schema)",
    '{"device_id": "d", "ts": "yesterday"}': "unparseable event time (ts)",
    '{"ts": "' + iso(300) + '"}': "missing key (device_id)",
}


def extract(archive: Path = ARCHIVE, root: Path = ROOT) -> None:
    """Replace ``root`` by the archive's lake and landing directory."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "tar_filter"):  # Python 3.12, and 3.10.12 / 3.11.4 on
            tar.extractall(root, filter="tar")
        else:  # pragma: no cover - an archive of this repository's own
            tar.extractall(root)


def generate() -> None:  # pragma: no cover - run by hand with the older code (the module doc)
    from jobs.config.load import pipeline_from_dict
    from jobs.driver import runs
    from jobs.startup.session import get_session

    if runs.STATE_LAYOUT_FORMAT != OLD_FORMAT:
        sys.exit(
            f"the jobs package at {Path(runs.__file__).parents[2]} writes state layout format "
            f"{runs.STATE_LAYOUT_FORMAT}, not {OLD_FORMAT}: put the older code first on "
            "PYTHONPATH (the module doc)"
        )
    # Spark starts some Python processes with ``python -m`` in its working directory, which
    # Python puts first on their path: there the older code must be found, not this checkout's
    os.chdir(Path(runs.__file__).parents[2])
    shutil.rmtree(ROOT, ignore_errors=True)
    pipeline = pipeline_from_dict(conf())
    spark = get_session("panestore-fixture", shuffle_partitions=SHUFFLE_PARTITIONS)
    try:
        for name, lines in OLD_FILES.items():
            put(ROOT / "landing", name, lines)
            result = runs.run(pipeline, spark=spark, progress=sys.stderr)
            assert result.batches, f"{name}: no batch ran"
    finally:
        spark.stop()
    layout = json.loads((ROOT / "lake" / runs.STATE_LAYOUT_FILE).read_text())
    assert layout["format"] == OLD_FORMAT, layout

    def leave_out(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        # the run lock's file names the process that made the lake: nothing a run needs
        return None if info.name == "lake/_locks" else info

    with tarfile.open(ARCHIVE, "w:gz") as tar:
        for part in ("lake", "landing"):
            tar.add(ROOT / part, arcname=part, filter=leave_out)
    print(f"wrote {ARCHIVE} ({ARCHIVE.stat().st_size} bytes) from {ROOT}")


if __name__ == "__main__":
    generate()
