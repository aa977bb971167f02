"""What ``panestore status`` reports of the operator's state (jobs.executor.state_summary,
jobs.inspection.state_summary), without Spark: the operator's steps run in-process on each of its
paths, then the state they stored is summarized against what was fed."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from jobs.executor.operator_input import blob_of  # noqa: E402
from jobs.executor.state_summary import OpenWindow, summarize  # noqa: E402
from tests.operator_fakes import T0_MS, ShardRun, clocks  # noqa: E402

T0 = T0_MS * 1000
M = 60_000_000  # a minute in µs: the windows' size
PATHS = ("columnar", "lifted", "per element")
AFTER_FIRST_MINUTE_MS = T0_MS + 60_001  # a watermark past the first window's end


def settings(lake: str = "/tmp/unused", **more) -> dict:
    base = {
        "name": "p",
        "lake": lake,
        "keys": ["user"],
        "event_time": "t",
        "window": "FixedWindows(1m)",
        "aggregates": {"total": "sum(n)", "rows": "count()"},
        "source": {
            "path": "/tmp/unused",
            "schema": {"user": "string", "t": "timestamp", "n": "long", "event_id": "string"},
        },
    }
    return {**base, **more}


def on_path(conf, path: str):
    if path == "lifted":
        return replace(conf, columnar_windows=False)
    if path == "per element":
        return replace(conf, columnar_windows=False, lift_combiners=False)
    return conf


def operator(path: str, **more):
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config

    return on_path(operator_config(pipeline_from_dict(settings(**more))), path)


def started(conf, path: str, root: str | None = None) -> ShardRun:
    run = ShardRun(conf, root)
    assert run.processor().path.value == path
    return run


def feed(run: ShardRun, events: list[tuple[str, int]], bucket: int = 3, ids: bool = False):
    """One batch of ``(user, event time)`` events (n = 1 each; ``ids``: each event's id is its
    user and time, for a deduplicated pipeline)."""
    columns: dict[str, list] = {
        "user": [u for u, _ in events],
        "ts_us": [t for _, t in events],
        "n": [1] * len(events),
    }
    if ids:
        columns["pst_dedup_id"] = [f"{len(f'{u}{t}')}:{u}{t}" for u, t in events]
        columns["pst_raw"] = columns["pst_source_file"] = ["r"] * len(events)
    run.step(blob_of(pa.table(columns)), clocks(0), bucket=bucket)


def fire(run: ShardRun, watermark_ms: int) -> None:
    """A batch without input that moves the watermark (the due windows fire)."""
    run.step(None, clocks(watermark_ms))


# a: 3 events in [T0, T0+1m) and 1 in [T0+2m, T0+3m); b: 2 in [T0+1m, T0+2m); c: 1 in the first
EVENTS = [
    ("a", T0 + 1),
    ("b", T0 + M + 1),
    ("a", T0 + 2),
    ("c", T0 + 4),
    ("a", T0 + 2 * M + 5),
    ("a", T0 + 3),
    ("b", T0 + M + 2),
]


def window(key: str, minute: int, elements: int, panes: int = 0) -> OpenWindow:
    return OpenWindow(key, T0 + minute * M, T0 + (minute + 1) * M, elements, panes)


@pytest.mark.parametrize("path", PATHS)
def test_keys_windows_the_oldest_and_the_largest_are_those_fed_and_not_yet_closed(path):
    run = started(operator(path), path)
    feed(run, EVENTS)  # batch 0
    fire(run, AFTER_FIRST_MINUTE_MS)  # batch 1: the first minute's windows fire and are gone

    fed = summarize(run.root, 0, 1, run.config)
    assert fed is not None and fed.batch_id == 0
    assert (fed.keys, fed.windows, fed.closed, fed.dedup_ids) == (3, 4, 0, 0)
    assert fed.complete and fed.decoded_keys == 3
    assert fed.oldest == window("a", 0, 3)  # a's and c's start together: the smaller key
    assert fed.largest == (
        window("a", 0, 3),
        window("b", 1, 2),
        window("c", 0, 1),
        window("a", 2, 1),
    )

    fired = summarize(run.root, 1, 1, run.config)
    assert fired is not None
    assert (fired.keys, fired.windows, fired.closed, fired.open) == (2, 2, 0, 2)  # c is gone
    assert fired.oldest == window("b", 1, 2)
    assert fired.largest == (window("b", 1, 2), window("a", 2, 1))
    assert summarize(run.root, 1, 1, run.config, largest=1).largest == (window("b", 1, 2),)


@pytest.mark.parametrize("path", PATHS)
def test_a_window_whose_trigger_finished_is_held_closed_until_its_lateness_ends(path):
    conf = operator(
        path,
        trigger="AfterWatermark()",
        allow_finishing_trigger=True,
        allowed_lateness="5m",
    )
    run = started(conf, path)
    feed(run, EVENTS)
    fire(run, AFTER_FIRST_MINUTE_MS)  # the first minute's windows fire on time and close
    summary = summarize(run.root, 1, 1, run.config)
    assert summary is not None
    assert (summary.keys, summary.windows, summary.closed, summary.open) == (3, 4, 2, 2)
    assert summary.oldest == window("b", 1, 2)  # closed windows are not open ones
    assert [w.key for w in summary.largest] == ["b", "a"]
    fire(run, T0_MS + 6 * 60_000 + 1)  # past [T0, T0+1m)'s end + 5m: gone; the others closed
    summary = summarize(run.root, 2, 1, run.config)
    assert summary is not None and (summary.keys, summary.windows, summary.closed) == (2, 2, 2)
    assert summary.oldest is None and summary.largest == ()


@pytest.mark.parametrize("path", PATHS)
def test_a_deduplicated_pipelines_ids_are_counted_and_its_windows_read(path):
    run = started(operator(path, dedup="event_id"), path)
    feed(run, [*EVENTS, EVENTS[0]], ids=True)  # a copy: rejected, not counted
    summary = summarize(run.root, 0, 1, run.config)
    assert summary is not None
    assert (summary.keys, summary.windows, summary.dedup_ids) == (3, 4, len(EVENTS))
    assert summary.largest[0] == window("a", 0, 3)
    fire(run, AFTER_FIRST_MINUTE_MS)
    summary = summarize(run.root, 1, 1, run.config)
    assert summary is not None  # the ids of the fired minute are forgotten with its windows
    assert (summary.keys, summary.windows, summary.dedup_ids) == (2, 2, 3)


def test_the_version_of_the_last_committed_batch_is_read_not_a_newer_one():
    """A killed run may have left the state of a batch it did not commit: not the lake's."""
    run = started(operator("columnar"), "columnar")
    feed(run, EVENTS)  # batch 0
    feed(run, [("d", T0 + 5)])  # batch 1
    fire(run, AFTER_FIRST_MINUTE_MS)  # batch 2
    fire(run, T0_MS + 3 * 60_000 + 1)  # batch 3: nothing is left
    got = [summarize(run.root, b, 1, run.config) for b in range(4)]
    assert [(s.batch_id, s.keys, s.windows) for s in got if s is not None] == [
        (0, 3, 4),
        (1, 4, 5),
        (2, 2, 2),
        (3, 0, 0),
    ]
    assert summarize(run.root, None, 1, run.config) is None  # no batch committed: no state yet


def test_a_state_of_more_keys_than_decoded_counts_them_all_and_says_so():
    run = started(operator("lifted"), "lifted")
    feed(run, [("a", T0), ("b", T0 + M)], bucket=1)
    feed(run, [("c", T0), ("d", T0), ("e", T0)], bucket=2)
    summary = summarize(run.root, 1, 1, run.config, max_bytes=1)  # bucket 1, whole
    assert summary is not None and not summary.complete
    assert (summary.keys, summary.decoded_keys, summary.windows) == (5, 2, 2)
    assert summarize(run.root, 1, 1, run.config, max_bytes=10**6).complete


def test_summarize_state_reads_the_lakes_layout_and_its_checkpoints_last_commit(tmp_path):
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config
    from jobs.driver.preflight import check_state_layout
    from jobs.executor.state_store import state_root
    from jobs.inspection.state_summary import summarize_state

    pipeline = pipeline_from_dict(settings(str(tmp_path / "lake")))
    assert summarize_state(pipeline) is None  # never run
    check_state_layout(pipeline, 2)  # what the first run records: 2 shards
    root = state_root(pipeline.checkpoint_path)
    shard_0 = started(operator_config(pipeline), "columnar", root)
    shard_1 = started(operator_config(pipeline), "columnar")  # its shard 0, moved below
    feed(shard_0, EVENTS)  # batch 0
    feed(shard_1, [("e", T0 + 7)])  # batch 0
    shutil.move(os.path.join(shard_1.root, "shard-0"), os.path.join(root, "shard-1"))
    feed(shard_0, [("d", T0 + 5)])  # batch 1, not committed yet
    commits = os.path.join(pipeline.checkpoint_path, "commits")
    os.makedirs(commits)
    assert summarize_state(pipeline) is None  # no batch committed yet

    def commit(batch: int) -> None:
        with open(os.path.join(commits, str(batch)), "w") as f:
            f.write("v1\n" + json.dumps({"nextBatchWatermarkMs": 0}) + "\n")

    commit(0)
    summary = summarize_state(pipeline)
    assert summary is not None and (summary.batch_id, summary.keys, summary.windows) == (0, 4, 5)
    commit(1)
    summary = summarize_state(pipeline, largest=2)
    assert summary is not None and (summary.batch_id, summary.keys, summary.windows) == (1, 5, 6)
    assert summary.largest == (window("a", 0, 3), window("b", 1, 2))
    # panestore status says the same, with times as text
    from jobs.inspection.status import iso_ms, lake_status

    state = lake_status(pipeline).operator_state
    assert state is not None and (state.batch_id, state.keys) == (1, 5)
    assert state.open_windows + state.closed_windows == 6 and state.complete
    assert [(w.key, w.elements) for w in state.largest_open_windows[:2]] == [("a", 3), ("b", 2)]
    oldest = summary.oldest
    assert oldest is not None and state.oldest_open_window is not None
    assert state.oldest_open_window.key == oldest.key
    assert state.oldest_open_window.start == iso_ms(oldest.start_us // 1000)
