"""A lake of state layout format 2 (state in Spark's ``transformWithState`` store) continues
under the operator's own shard files (format 3) as if it had never been upgraded.

The lake (``state_upgrade_format2.tar.gz``, made by panestore before format 3: see
``state_upgrade_fixture.py``, which regenerates it, and why it lives at a fixed directory) holds
open sessions of four keys, some with early panes, one closed on time and still within its
allowed lateness. The current code runs it twice over newly landed files, then drains. The first
run moves the state into shard files (:func:`jobs.driver.state_upgrade.upgrade_state`) and
records format 3; then:

* every bucket's state and timer is in the shard files, unchanged, and the ``transformWithState``
  store is out of Spark's sight (a query without its operator is refused otherwise);
* only the new files are read (the checkpoint's file log still holds the old ones);
* the whole pane log, the old code's panes and the new code's, equals the reference simulator
  over every batch the checkpoint recorded (a lost state would start its sessions afresh: other
  windows, counts and pane indexes; a doubled one would count twice);
* the sessions that span the upgrade end with every event, old and new;
* the view folded from the pane log equals the batch computation over all accepted events
  (:func:`sinks.verify.verify`).
"""

from __future__ import annotations

import fcntl
import io
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.spark import state_upgrade_fixture as fx
from tests.spark.support import (
    T0,
    committed_batches,
    norm_pane,
    offset_log,
    parse_view,
    put,
    replay,
)

pytestmark = pytest.mark.spark

US = 1_000_000


@pytest.fixture
def old_lake():
    """The format 2 lake and its landing directory, extracted at :data:`fx.ROOT` (one test at a
    time on this machine: a lock beside it), removed afterwards."""
    if fx.ROOT.parent.resolve() != fx.ROOT.parent:
        pytest.skip(f"{fx.ROOT.parent} is a symlink here: the fixture lake records {fx.ROOT}")
    with open(f"{fx.ROOT}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fx.extract()
        try:
            yield fx.ROOT
        finally:
            shutil.rmtree(fx.ROOT, ignore_errors=True)


def _keys(blob: bytes) -> set[str]:
    import pyarrow as pa

    with pa.ipc.open_stream(blob) as reader:
        return set(reader.read_all().column("device_id").to_pylist())


def test_a_format_2_lake_continues_under_shard_state(spark, old_lake):
    from deltalake import DeltaTable

    from jobs.cli.inspect import materialize_after_run
    from jobs.config.load import pipeline_from_dict
    from jobs.config.sink_spec import view_spec
    from jobs.driver.preflight import STATE_LAYOUT_FILE, STATE_LAYOUT_FORMAT
    from jobs.driver.runs import run
    from jobs.driver.source_elements import load_source_elements
    from jobs.driver.state_upgrade import RETIRED_STATE
    from jobs.driver.tws_state import read_bucket_states
    from jobs.executor.operator_input import spark_partition_of_int
    from jobs.executor.state_store import ShardStore, Stored, batch_versions
    from sinks.verify import verify

    pipeline = pipeline_from_dict(fx.conf(old_lake))
    ckpt = Path(pipeline.checkpoint_path)
    layout_file = pipeline.run_path / STATE_LAYOUT_FILE
    old_layout = json.loads(layout_file.read_text())
    assert old_layout["format"] == fx.OLD_FORMAT and "shards" not in old_layout

    # what the older code left: open sessions of a, b, c (closed, within its lateness) and g,
    # as of its last committed batch, a no-data batch at the watermark of 80 s
    last_old = max(committed_batches(ckpt))
    assert offset_log(ckpt)[-1][:2] == (last_old, fx.OLD_WATERMARK_MS)
    old_states = read_bucket_states(spark, str(ckpt))
    assert set().union(*(_keys(blob) for blob, _ in old_states.values())) == {"a", "b", "c", "g"}
    assert all(timer is not None for _, timer in old_states.values())
    old_panes = DeltaTable(pipeline.table_path("panes")).to_pyarrow_table().to_pylist()
    assert Counter((p["device_id"], p["timing"]) for p in old_panes) == {
        ("a", "EARLY"): 1,
        ("b", "EARLY"): 1,
        ("c", "ON_TIME"): 1,
    }

    # the current code: one run per new file, then a drain
    outputs, results = [], []

    def run_and_keep(**drain) -> None:
        out = io.StringIO()
        results.append(run(pipeline, spark=spark, progress=out, **drain))
        outputs.append(out.getvalue())

    [(first, lines), *others] = fx.NEW_FILES.items()
    put(old_lake / "landing", first, lines)
    run_and_keep()

    # every bucket's state and timer, in the shard Spark's partitioning sends it to, unchanged:
    # the version the older code's last batch would have written (shards keep their newest
    # versions: the first run's two steps wrote at most two more)
    root = str(ckpt / "state")
    moved = {}
    for shard in range(fx.SHUFFLE_PARTITIONS):
        stored = ShardStore(root, shard).load(batch_versions(last_old)[1] + 1)
        assert all(spark_partition_of_int(b, fx.SHUFFLE_PARTITIONS) == shard for b in stored)
        moved.update(stored)
    assert moved == {b: Stored(blob, timer) for b, (blob, timer) in old_states.items()}
    # the operator's transformWithState store is out of Spark's sight (it would refuse the query)
    assert not (ckpt / "state" / "0").exists() and (ckpt / RETIRED_STATE).is_dir()

    for name, lines in others:
        put(old_lake / "landing", name, lines)
        run_and_keep()
    run_and_keep(drain=True)

    # the first run moved the state, and recorded format 3 with the lake's own shards (the
    # older checkpoint's 3 shuffle partitions, not this session's 2); later runs did not
    assert ["moving the state of state layout format 2" in o for o in outputs] == [
        True,
        False,
        False,
    ]
    layout = json.loads(layout_file.read_text())
    assert layout == {**old_layout, "format": STATE_LAYOUT_FORMAT, "shards": fx.SHUFFLE_PARTITIONS}

    # the new runs read only the new files, each once
    assert [r.total("rows") for r in results] == [len(v) for v in fx.NEW_FILES.values()] + [0]
    first_new = last_old + 1
    assert results[0].batches[0].batch_id == first_new

    # the whole pane log equals the simulator over every batch, old and new
    got = DeltaTable(pipeline.table_path("panes")).to_pyarrow_table().to_pylist()
    from jobs.driver.plan import layout
    from sinks.pane_log import pane_record

    expected = [
        dict(pane_record(p, layout(pipeline)), batch_id=b)
        for b, panes, _ in replay(pipeline, parse_view, fires_from=first_new)
        for p in panes
    ]
    columns = set(expected[0])
    assert sorted(norm_pane(r, columns) for r in got) == sorted(
        norm_pane(r, columns) for r in expected
    )
    ids = [
        (r["device_id"], r["window_start_us"], r["window_end_us"], r["pane_index"])
        for r in got
        if not r["is_retraction"]
    ]
    assert len(ids) == len(set(ids))  # no pane twice

    # the sessions spanning the upgrade end with all their events: (plays, watched) of a
    # window's latest pane (a session that expires with nothing new has no pane marked last)
    def final(key: str, start_s: int, end_s: int) -> tuple:
        window = (key, (T0 + start_s) * US, (T0 + end_s) * US)
        panes = [
            r
            for r in got
            if (r["device_id"], r["window_start_us"], r["window_end_us"]) == window
            and not r["is_retraction"]
        ]
        last = max(panes, key=lambda r: (r["batch_id"], r["pane_index"]))
        return last["plays"], last["watched"]

    assert final("a", 1, 110) == (5, 14.0)  # 3 events before the upgrade, 2 after
    assert final("b", 3, 100) == (2, 6.0)  # before only, closed by the current code
    assert final("c", 5, 120) == (2, 4.0)  # closed before, a late event after
    assert final("g", 90, 160) == (2, 6.0)
    assert final("b", 120, 210) == (2, 3.0)  # after only
    assert any(r["watermark_us"] > 10**17 for r in got)  # the drain fired

    late = DeltaTable(pipeline.table_path("late")).to_pyarrow_table().to_pylist()
    assert late == []
    rejected = DeltaTable(pipeline.table_path("rejected")).to_pyarrow_table().to_pylist()
    assert {r["raw"]: r["reason"] for r in rejected} == fx.REJECTED

    # the view folded from the pane log equals the batch over all accepted events
    assert materialize_after_run(pipeline, out=lambda line: None) == 0
    report = verify(view_spec(pipeline), elements=load_source_elements(pipeline))
    assert report.ok, str(report)
    assert len(report.checks) == 2
