"""jobs.executor.window_table: a bucket's windows kept as one table and visited column by column
write the same pane log and late table as the engine fed element by element, on random
workloads over random configurations (triggers of every shape without processing time, both
modes that keep no pane, every timestamp combiner and on-time/closing behavior, allowed
lateness, closed windows), keep the same state, and hand a bucket to the engine's path and back
where columns cannot hold it.

Rows are compared as multisets: the columnar visit orders a bucket's panes by key and window,
the engine by visit, and nothing downstream depends on the order of one batch's rows (pane ids
are a function of the pane, ``sinks.pane_log.pane_id``).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from tests.examples import seeds  # noqa: E402
from tests.jobs.test_lifting import AGGREGATES, batches, comparable, config  # noqa: E402
from tests.jobs.test_lifting import run as run_plan  # noqa: E402
from tests.operator_fakes import T0_MS, ShardRun, clocks  # noqa: E402

TRIGGERS = [
    "AfterWatermark()",
    "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
    "AfterWatermark(early=AfterCount(2))",
    "AfterWatermark(late=AfterCount(2))",
    "DefaultTrigger()",
    "Repeatedly(AfterCount(2))",
    "AfterCount(3)",
    "AfterEach(AfterCount(2), AfterWatermark())",
    "AfterAny(AfterCount(4), AfterWatermark())",
    "AfterAll(AfterCount(2), AfterWatermark())",
    "OrFinally(Repeatedly(AfterCount(3)), AfterWatermark())",
    "Never()",
    "Always()",
]


def settings_of(seed: int) -> tuple[dict, str, random.Random]:
    rng = random.Random(seed)
    key_type = rng.choice(["long", "string"])
    names = rng.sample(sorted(AGGREGATES), rng.randint(1, len(AGGREGATES)))
    settings = config(rng, {n: AGGREGATES[n] for n in names}, key_type, two_keys=seed % 2 == 1)
    settings["trigger"] = rng.choice(TRIGGERS)
    settings["accumulation_mode"] = rng.choice(["discarding", "accumulating"])
    settings["on_time_behavior"] = rng.choice(["fire_always", "fire_if_non_empty"])
    settings["closing_behavior"] = rng.choice(["fire_always", "fire_if_non_empty"])
    return settings, key_type, rng


def shard_runs(settings: dict) -> tuple[ShardRun, ShardRun]:
    """(columnar windows, element by element) operators of ``settings``."""
    from jobs.config.load import pipeline_from_dict
    from jobs.driver.plan import operator_config

    conf = operator_config(pipeline_from_dict(settings))
    return ShardRun(conf), ShardRun(replace(conf, lift_combiners=False))


def rows(emitted: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in comparable(emitted))


def windows_of(shard: ShardRun) -> dict:
    """The shard's stored state as {key: {window: the engine's view of it}} and its timers."""
    from jobs.executor.bucket_state import BucketState

    processor = shard.processor()
    engine, columnar = processor.engine, processor._columnar
    out, timers = {}, {}
    for bucket, stored in shard.stored().items():
        timers[bucket] = stored.timer_ms
        state = processor._bucket_state(stored)
        assert isinstance(state, BucketState)
        for key, data in state.all_states().items():
            ks = engine.load_state(data)
            out[key] = {
                w: (
                    ws.acc,
                    None if ws.trigger is None else tuple(ws.trigger),
                    ws.closed,
                    ws.fresh,
                    ws.hold,
                    ws.index,
                    ws.nonspeculative,
                    ws.emitted,
                    ws.event_due,
                )
                for w, ws in ks.windows.items()
            }
    del columnar
    return {"windows": out, "timers": timers}


def assert_same_state(columnar: ShardRun, plain: ShardRun, what: str) -> None:
    """The same windows; each bucket's timer the earliest wake-up of its windows, which the
    engine's may undercut (a key's wake-up is a lower bound there: a window whose trigger
    finished on new elements keeps its earlier one until the key's next visit)."""
    mine, theirs = windows_of(columnar), windows_of(plain)
    assert mine["windows"] == theirs["windows"], what
    assert mine["timers"].keys() == theirs["timers"].keys(), what
    for bucket, timer in mine["timers"].items():
        assert timer >= theirs["timers"][bucket], what


def compare(seed: int, huge: bool = False) -> bool:
    """One random workload through both paths, step by step; whether the columnar path ran.
    ``huge``: values for which Arrow's sums of a batch could leave 64 bits (``batches``)."""
    settings, key_type, rng = settings_of(seed)
    columnar, plain = shard_runs(settings)
    for step in batches(rng, key_type, huge=huge):
        got = run_plan(columnar, key_type, [step])
        want = run_plan(plain, key_type, [step])
        assert rows(got) == rows(want), f"seed {seed}: {settings}"
        assert_same_state(columnar, plain, f"seed {seed}: {settings}")
    return columnar.processor()._columnar is not None


@pytest.mark.parametrize("seeds", [seeds(0, 40), seeds(40, 80)])
def test_columnar_windows_and_the_engine_write_the_same_rows_and_keep_the_same_state(seeds):
    used = [compare(seed) for seed in seeds]
    assert all(used)  # every configuration drawn here is kept in columns


@pytest.mark.parametrize(
    "change",
    [
        {"accumulation_mode": "accumulating_and_retracting"},  # keeps emitted panes
        {"trigger": "AfterWatermark(early=AfterProcessingTime(10s))"},
        {"window": "Sessions(1m)"},
        {"aggregates": {"all": "to_list(n)"}},
    ],
)
def test_what_columns_cannot_hold_takes_the_engine_per_key(change):
    settings, _, _ = settings_of(0)
    settings.update(change)
    columnar, _ = shard_runs(settings)
    assert columnar.processor()._columnar is None


def held_apart(shard: ShardRun) -> tuple[set, set]:
    """The windows of the shard's bucket kept in columns, and those the engine holds, as
    (user, the window's minute)."""
    from jobs.executor.bucket_state import BucketState
    from panes.state import KeyState

    processor = shard.processor()
    stored = shard.stored()[3]
    windows, held = processor._columnar.load(stored.blob)
    t0_us = T0_MS * 1000
    users = windows.keys.column("user").to_pylist()
    starts = windows.cols["start"].tolist()
    in_columns = {(u, (s - t0_us) // 60_000_000) for u, s in zip(users, starts, strict=True)}
    in_engine = {
        (user, (w.start - t0_us) // 60_000_000)
        for user, data in BucketState.load(held, processor._key_fields).all_states().items()
        for w in KeyState.from_bytes(data).windows
    }
    return in_columns, in_engine


def test_a_sum_leaving_64_bits_takes_only_its_window_to_the_engine():
    """The window whose sum passes 2^63 is held by the engine while it does, then returns to
    columns; its key's other window, and the bucket's other key, stay in columns throughout
    (the same rows and state as the engine's path all along)."""
    settings, _, _ = settings_of(1)
    settings.update(aggregates={"total": "sum(n)"}, trigger="AfterWatermark(late=AfterCount(1))")
    settings.update(window="FixedWindows(1m)", keys=["user"], allowed_lateness="10m")
    settings.update(accumulation_mode="discarding")
    columnar, plain = shard_runs(settings)
    big, minute = 2**62, 60_000_000
    steps = [
        [(1, minute, big), (1, 0, 1), (2, 0, 1)],
        [(1, minute + 1, big), (1, 1, 1), (2, 1, 1)],  # minute 1 of user 1 leaves 64 bits
        [(1, 2, 1)],  # the watermark passes minute 0: its on-time panes, then a late one
        [(1, minute + 2, -big), (1, 3, 1)],  # back within 64 bits
        [(1, minute + 3, 5)],
    ]
    watermarks = [0, 0, T0_MS + 60_000, T0_MS + 60_000, T0_MS + 60_000]
    plan = [
        (
            [{"user": u, "ts_us": T0_MS * 1000 + t, "n": v, "tag": None} for u, t, v in step],
            wm,
            T0_MS,
        )
        for step, wm in zip(steps, watermarks, strict=True)
    ]
    plan.append(([], T0_MS + 900_000, T0_MS))
    apart, written = [], []
    for step in plan:
        got, want = run_plan(columnar, "long", [step]), run_plan(plain, "long", [step])
        assert rows(got) == rows(want)
        assert_same_state(columnar, plain, "")
        written += want
        if step[0]:
            apart.append(held_apart(columnar))
    both = {(1, 0), (1, 1), (2, 0)}
    assert apart == [
        (both, set()),
        ({(1, 0), (2, 0)}, {(1, 1)}),
        ({(1, 0), (2, 0)}, {(1, 1)}),
        (both, set()),
        (both, set()),
    ]
    panes = [(r["user"], r["total"], r["timing"]) for r in written if r["record_kind"] == "pane"]
    assert sorted(panes) == [
        (1, 1, "LATE"),
        (1, 1, "LATE"),
        (1, 2, "ON_TIME"),
        (1, 2**62 + 5, "ON_TIME"),
        (2, 2, "ON_TIME"),
    ]


_BIG, _MINUTE = 2**62, 60_000_000
SPLIT_KEY_STEPS = {  # early panes, and steps of user 1: ((µs into the hour, n) rows, ms)
    # the columns' side alone sees the latest batch time; then the held window fires
    "engine": (
        3,
        [
            ([(_MINUTE, _BIG), (0, 1)], T0_MS),
            ([(_MINUTE + 1, _BIG)], T0_MS + 1_000),  # minute 1 leaves 64 bits: held
            ([(1, 1)], T0_MS + 100_000),  # minute 0 only
            ([(_MINUTE + 2, -_BIG)], T0_MS + 50_000),  # an earlier batch time
        ],
    ),
    # the held window alone sees the latest batch time; then minute 0, in columns, fires
    "columns": (
        5,
        [
            ([(_MINUTE, _BIG), (0, 1)], T0_MS),
            ([(_MINUTE + 1, _BIG)], T0_MS + 1_000),  # minute 1 leaves 64 bits: held
            ([(_MINUTE + 2, 0)], T0_MS + 100_000),  # minute 1 only
            ([(1, 1), (2, 1), (3, 1), (4, 1)], T0_MS + 50_000),  # an earlier batch time
        ],
    ),
}


@pytest.mark.parametrize("fires_in", sorted(SPLIT_KEY_STEPS))
def test_a_key_split_between_columns_and_the_engine_keeps_one_processing_time(fires_in):
    """A key's held window and its windows in columns see the key's clocks the engine alone
    would: a batch that visits only one side moves the other's too. Here the batch time goes
    back (another machine's clock), and the pane that fires then, on either side, carries the
    latest time the key saw, as on the engine's path."""
    settings, _, _ = settings_of(1)
    settings.update(aggregates={"total": "sum(n)"}, accumulation_mode="accumulating")
    settings.update(window="FixedWindows(1m)", keys=["user"])
    count, steps = SPLIT_KEY_STEPS[fires_in]
    settings.update(trigger=f"AfterWatermark(early=AfterCount({count}))")
    columnar, plain = shard_runs(settings)
    panes = []
    for data, pt in steps:
        step = (
            [{"user": 1, "ts_us": T0_MS * 1000 + t, "n": n, "tag": None} for t, n in data],
            0,
            pt,
        )
        got, want = run_plan(columnar, "long", [step]), run_plan(plain, "long", [step])
        assert rows(got) == rows(want)
        assert_same_state(columnar, plain, "")
        panes += [r for r in want if r["record_kind"] == "pane"]
    total = _BIG if fires_in == "engine" else 5
    assert [(p["total"], p["processing_time_us"]) for p in panes] == [
        (total, (T0_MS + 100_000) * 1000)
    ]


def test_a_pane_whose_sum_does_not_fit_64_bits_is_named_on_both_paths():
    """A window whose sum is beyond 64 bits when it fires cannot be written: both paths raise
    :class:`sinks.errors.PaneValueOutOfRange` naming the key, the window and the aggregate."""
    from sinks.errors import PaneValueOutOfRange

    settings, _, _ = settings_of(1)
    settings.update(aggregates={"total": "sum(n)"}, trigger="AfterWatermark()")
    settings.update(window="FixedWindows(1m)", keys=["user"])
    big = 2**62
    plan = [
        ([{"user": u, "ts_us": T0_MS * 1000 + i, "n": v, "tag": None} for u, v in vs], 0, T0_MS)
        for i, vs in enumerate([[(1, big), (2, 1)], [(7, big), (2, 1)], [(7, big)]])
    ]
    plan.append(([], T0_MS + 600_000, T0_MS))
    for shard in shard_runs(settings):
        with pytest.raises(PaneValueOutOfRange) as raised:
            run_plan(shard, "long", plan)
        message = str(raised.value)
        assert "\n" not in message
        assert "user=7" in message and f"total = {2 * big}" in message
        assert "[2024-01-01T00:00:00+00:00, 2024-01-01T00:01:00+00:00)" in message


def test_keys_whose_batch_sums_could_leave_64_bits_go_to_the_engine_and_back(monkeypatch):
    """Random workloads with values for which Arrow's sums of a batch could leave 64 bits:
    those keys pass through the engine (held, then back in columns), with the same rows and
    state as the engine's path."""
    from jobs.executor.lifting import Lifting

    risky_batches = []
    risky_windows = Lifting.risky_windows

    def counted(self, table):
        found = risky_windows(self, table)
        risky_batches.append(found is not None)
        return found

    monkeypatch.setattr(Lifting, "risky_windows", counted)
    for seed in seeds(200, 260):
        compare(seed, huge=True)
    assert sum(risky_batches) >= 5, "the workloads must put keys in the engine's hands"


def test_a_bucket_kept_by_the_engine_continues_in_columns():
    """A lake whose buckets an earlier panestore kept per key (or the engine's path took)
    continues with columns: the same rows and state as the engine all along."""
    settings, key_type, rng = settings_of(3)
    columnar, plain = shard_runs(settings)
    engine_first = ShardRun(replace(columnar.config, columnar_windows=False), columnar.root)
    plan = list(batches(rng, key_type))
    half = len(plan) // 2
    for step in plan[:half]:
        engine_first.batch_id = columnar.batch_id
        run_plan(engine_first, key_type, [step])
        columnar.batch_id = engine_first.batch_id
        run_plan(plain, key_type, [step])
    for step in plan[half:]:
        got = run_plan(columnar, key_type, [step])
        assert rows(got) == rows(run_plan(plain, key_type, [step]))
        assert_same_state(columnar, plain, "")


def hold_first_key_whole(shard: ShardRun) -> bool:
    """Rewrite the shard's last stored version as state layout format 5 kept it when the
    bucket's first key had a sum beyond 64 bits: all of that key's windows held by the engine,
    none in the table. False: the bucket has no window in columns."""
    import numpy as np

    from jobs.executor.bucket_state import BucketState
    from jobs.executor.operator import _entries
    from jobs.executor.operator_input import rows_of_keys
    from jobs.executor.state_store import ShardStore, Stored, batch_versions

    store = ShardStore(shard.root, 0)
    before = batch_versions(shard.batch_id)[0]
    buckets = store.load(before)
    processor = shard.processor()
    stored = buckets.get(3)
    if stored is None:
        return False
    windows, held = processor._columnar.load(stored.blob)
    if held is not None or not windows.rows:
        return False
    first = rows_of_keys(windows.keys, windows.keys.slice(0, 1))
    states = windows.take(np.flatnonzero(first)).key_states()
    kept = BucketState.of_states(processor._key_fields, _entries(states)).save().blob
    blob = processor._columnar.save(windows.take(np.flatnonzero(~first)), kept)
    store.save(before - 1, {**buckets, 3: Stored(blob, stored.timer_ms)})
    return True


def test_a_key_held_whole_by_state_layout_format_5_continues_per_window():
    """A format-5 lake held all windows of a key whose sums could leave 64 bits: this panestore
    reads it as those windows held, and goes on with the same rows and state as the engine (the
    key's new windows in columns, its held ones back in columns once they fit)."""
    continued = 0
    for seed in seeds(400, 410):
        settings, key_type, rng = settings_of(seed)
        columnar, plain = shard_runs(settings)
        plan = list(batches(rng, key_type))
        half = len(plan) // 2
        for step in plan[:half]:
            run_plan(columnar, key_type, [step])
            run_plan(plain, key_type, [step])
        if not hold_first_key_whole(columnar):
            continue
        continued += 1
        assert held_apart_keys(columnar)
        assert_same_state(columnar, plain, f"seed {seed}")
        for step in plan[half:]:
            got = run_plan(columnar, key_type, [step])
            assert rows(got) == rows(run_plan(plain, key_type, [step])), f"seed {seed}"
            assert_same_state(columnar, plain, f"seed {seed}")
    assert continued >= 2


def held_apart_keys(shard: ShardRun) -> set:
    """The keys whose windows the engine holds in the shard's bucket."""
    from jobs.executor.bucket_state import BucketState

    processor = shard.processor()
    _, held = processor._columnar.load(shard.stored()[3].blob)
    return set(BucketState.load(held, processor._key_fields).all_states())


def test_a_step_without_changes_keeps_the_stored_bucket():
    settings, _, _ = settings_of(5)
    settings["trigger"] = "AfterWatermark()"
    columnar, _ = shard_runs(settings)
    row = {"user": 1, "region": "eu", "ts_us": T0_MS * 1000, "n": 1, "tag": "a"}
    run_plan(columnar, "long", [([row], 0, T0_MS)])
    before = columnar.stored()
    columnar.step(None, clocks(1, T0_MS))  # the window is not due: nothing to do
    assert columnar.stored() == before


def _scenarios() -> dict:
    """The conformance scenarios columns can hold: fixed windows, no processing time, a mode
    that keeps no pane."""
    from panes import FixedWindows, parse_trigger, parse_window
    from tests.scenarios.format import load_all

    return {
        name: sc
        for name, sc in load_all().items()
        if type(parse_window(sc.window)) is FixedWindows
        and not parse_trigger(sc.trigger).has_processing_time
        and sc.accumulation != "ACCUMULATING_AND_RETRACTING"
    }


SCENARIOS = _scenarios()


def _ms(us: int) -> str:
    return f"{us * 1000}us"  # the scenario's microseconds as milliseconds (Spark's clocks)


def test_most_conformance_scenarios_are_compared():
    assert len(SCENARIOS) >= 30


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_conformance_scenarios_write_the_same_rows_in_columns(name):
    """Each conformance scenario (times scaled from µs to ms, Spark's clock unit; a sum of the
    elements' values for their lists) runs step by step through both operators: the same rows
    after every step (a bundle: a step with rows; a watermark or processing time: a step
    without), as many panes and dropped elements as the transcript, and the same windows."""
    from panes import FixedWindows, parse_duration, parse_window

    sc = SCENARIOS[name]
    window = parse_window(sc.window)
    assert isinstance(window, FixedWindows)
    settings = {
        "name": "p",
        "lake": "/tmp/unused",
        "keys": ["k"],
        "event_time": "t",
        "window": f"FixedWindows({_ms(window.size)}, {_ms(window.offset)})",
        "trigger": sc.trigger,
        "accumulation_mode": sc.accumulation.lower(),
        "timestamp_combiner": sc.timestamp_combiner.lower(),
        "on_time_behavior": sc.on_time_behavior.lower(),
        "closing_behavior": sc.closing_behavior.lower(),
        "allowed_lateness": _ms(parse_duration(sc.allowed_lateness)),
        "allow_finishing_trigger": True,
        "aggregates": {"total": "sum(v)", "n": "count()"},
        "source": {"path": "/tmp/unused", "schema": {"k": "string", "t": "timestamp", "v": "long"}},
    }
    columnar, plain = shard_runs(settings)
    schema = pa.schema([("k", pa.string()), ("ts_us", pa.int64()), ("v", pa.int64())])
    watermark, processing = 0, T0_MS
    for step in sc.steps:
        blob = None
        if step.action == "bundle":
            from jobs.executor.operator_input import blob_of

            elements = [
                {"k": k, "ts_us": t * 1000, "v": v if isinstance(v, int) else t}
                for k, v, t in step.elements
            ]
            blob = blob_of(pa.Table.from_pylist(elements, schema))
        elif step.action == "watermark":
            watermark = step.time or 0
        else:
            processing = T0_MS + (step.time or 0)
        at = clocks(watermark, processing)
        got, want = columnar.step(blob, at), plain.step(blob, at)
        assert rows(got) == rows(want), f"{name}: {step}"
        kinds = [r["record_kind"] for r in got]  # as many as the transcript says
        assert (kinds.count("pane"), kinds.count("late")) == (len(step.panes), len(step.dropped))
        assert_same_state(columnar, plain, f"{name}: {step}")
    assert columnar.processor()._columnar is not None
