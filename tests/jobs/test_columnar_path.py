"""The columnar path of the operator (panes.columnar): a bucket's windows kept as one table
write the same pane log and late table as the engine fed element by element, on random
workloads over random configurations (triggers of every shape without processing time, both
modes that keep no pane, every timestamp combiner and on-time/closing behavior, allowed
lateness, closed windows, sums beyond 64 bits), and keep the same state.

Rows are compared as multisets: the columnar visit orders a bucket's panes by key and window,
the engine by visit, and nothing downstream depends on the order of one batch's rows (pane ids
are a function of the pane, ``sinks.lake.pane_log.pane_id``).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from tests.examples import seeds  # noqa: E402
from tests.jobs.test_lifted_path import (  # noqa: E402
    AGGREGATES,
    batches,
    comparable,
    config,
    splits_counted,
)
from tests.jobs.test_lifted_path import run as run_plan  # noqa: E402
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
    from jobs.executor import window_store
    from jobs.executor.bucket_state import BucketState

    processor = shard.processor()
    engine, columnar = processor.engines.per_key, processor.engines.columnar
    out, timers = {}, {}
    for bucket, stored in shard.stored().items():
        timers[bucket] = stored.timer_ms
        if columnar is not None:
            states = window_store.load(columnar, stored.blob).key_states()
        else:
            loaded = BucketState.load(stored.blob, processor._key_fields).all_states()
            states = {key: engine.load_state(data) for key, data in loaded.items()}
        for key, ks in states.items():
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
    return columnar.processor().engines.columnar is not None


@pytest.mark.heavy
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
    """Decided from the configuration, once
    (:meth:`jobs.executor.operator.OperatorConfig.engines`)."""
    settings, _, _ = settings_of(0)
    settings.update(change)
    columnar, _ = shard_runs(settings)
    assert columnar.processor().engines.columnar is None


def test_a_layout_that_maps_values_itself_keeps_the_pipeline_off_columns_saying_so():
    """The operator's input and layout are all the operator adds to the model's one factory
    (:meth:`jobs.executor.operator.OperatorConfig.engines`): a ``value_mapper`` layout is
    written from the per-key engine's panes, and the engine says why."""
    import pyarrow as pa

    from jobs.executor.operator import OperatorConfig
    from panes import FixedWindows, Windowing, combiners
    from panes.engine import Engine
    from panes.engines import EngineKind
    from sinks.lake import PaneLogLayout

    def engine() -> Engine:
        return Engine(Windowing(FixedWindows(10)), combiners.aggregates(n=combiners.sum("n")))

    columns = (("k", pa.string()), ("n", pa.int64()))
    plain = OperatorConfig(engine, ("k",), ("n",), columns)
    assert plain.layout.not_columnar is None and plain.engines().kind is EngineKind.COLUMNAR
    mapped = replace(plain, layout=PaneLogLayout(value_mapper=lambda value: value))
    engines = mapped.engines()
    assert engines.kind is EngineKind.LIFTED and engines.columnar is None
    assert engines.not_columnar == "the pane-log layout maps the values itself (value_mapper)"


def test_a_sum_leaving_64_bits_and_back_stays_exact_in_columns():
    """A window's sum passes 2^63 and comes back: its 128-bit accumulator keeps it exactly, in
    columns (the same rows and state as the engine's path all along), and its pane's value fits
    again when it fires."""
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
    written, peaks = [], []
    for step in plan:
        got, want = run_plan(columnar, "long", [step]), run_plan(plain, "long", [step])
        assert rows(got) == rows(want)
        assert_same_state(columnar, plain, "")
        written += want
        state = windows_of(columnar)["windows"]
        accs = [v[0][0] for ws in state.values() for v in ws.values() if v[0] is not None]
        peaks.append(max(accs, default=0))
    assert peaks[1] == 2 * big > 2**63 - 1  # in columns, beyond 64 bits
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
    # minute 0 alone sees the latest batch time; then minute 1, beyond 64 bits a while, fires
    "engine": (
        3,
        [
            ([(_MINUTE, _BIG), (0, 1)], T0_MS),
            ([(_MINUTE + 1, _BIG)], T0_MS + 1_000),  # minute 1 leaves 64 bits
            ([(1, 1)], T0_MS + 100_000),  # minute 0 only
            ([(_MINUTE + 2, -_BIG)], T0_MS + 50_000),  # an earlier batch time
        ],
    ),
    # minute 1 alone sees the latest batch time; then minute 0 fires
    "columns": (
        5,
        [
            ([(_MINUTE, _BIG), (0, 1)], T0_MS),
            ([(_MINUTE + 1, _BIG)], T0_MS + 1_000),  # minute 1 leaves 64 bits
            ([(_MINUTE + 2, 0)], T0_MS + 100_000),  # minute 1 only
            ([(1, 1), (2, 1), (3, 1), (4, 1)], T0_MS + 50_000),  # an earlier batch time
        ],
    ),
}


@pytest.mark.parametrize("fires_in", sorted(SPLIT_KEY_STEPS))
def test_a_key_with_a_sum_beyond_64_bits_keeps_one_processing_time(fires_in):
    """A key's windows, one of them beyond 64 bits a while, see the key's clocks the engine
    would: here the batch time goes back (another machine's clock), and the pane that fires
    then carries the latest time the key saw, as on the engine's path."""
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
    :class:`sinks.lake.errors.PaneValueOutOfRange` naming the key, the window and the aggregate."""
    from sinks.lake.errors import PaneValueOutOfRange

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


@pytest.mark.heavy
def test_workloads_whose_batch_sums_could_leave_64_bits_stay_exact_in_columns():
    """Random workloads with values for which Arrow's sums of a batch could leave 64 bits
    (summed by halves, :func:`panes.columnar.wide.exact_sums`): the same rows and state as
    the engine's path, every one in columns."""
    with pytest.MonkeyPatch.context() as patch:
        split = splits_counted(patch)
        assert all(compare(seed, huge=True) for seed in seeds(200, 260))
    assert sum(split) >= 5, "the workloads must sum some batches by halves"


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
    assert columnar.processor().engines.columnar is not None
