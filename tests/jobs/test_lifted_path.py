"""Combiner lifting (panes.columnar.bundle) in the operator gives the same pane log and late
table as the element-by-element path, bit for bit, on random workloads over random
configurations, built-in aggregates and combiners of a user's own alike; and it is used exactly
where the pipeline allows it.

Each workload runs the same batches through two operators (a bucket's processor with a fake
state handle, as :mod:`tests.jobs.test_operator` does): one lifting combiners in Arrow, one
adding elements one by one; every emitted row must be equal, in the same order. The hand-derived
conformance scenarios are compared on the engine itself in ``tests/panes/test_add_combined.py``.
"""

from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from jobs.executor.operator_input import blob_of  # noqa: E402
from panes.combiners import CombineFn  # noqa: E402
from tests import combiners_of_your_own  # noqa: E402
from tests.examples import seeds  # noqa: E402
from tests.operator_fakes import T0_MS, ShardRun, clocks  # noqa: E402

WINDOWS = ["FixedWindows(1m)", "FixedWindows(1m, 15s)", "FixedWindows(5s)"]
TRIGGERS = [
    "AfterWatermark()",
    "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
    "AfterWatermark(early=AfterProcessingTime(10s), late=AfterCount(2))",
    "Repeatedly(AfterCount(2))",
    "AfterCount(3)",
    "Repeatedly(AfterAny(AfterCount(4), AfterProcessingTime(5s)))",
]
MODES = ["discarding", "accumulating", "accumulating_and_retracting"]
TIMESTAMPS = ["end_of_window", "earliest", "latest"]
AGGREGATES = {
    "total": "sum(n)",
    "rows": "count()",
    "ns": "count(n)",
    "lo": "min(n)",
    "hi": "max(n)",
    "avg": "mean(n)",
    "first_tag": "min(tag)",
    "last_tag": "max(tag)",
}


def config(
    rng: random.Random, aggregates: dict[str, str], key_type: str = "long", two_keys: bool = False
) -> dict:
    return {
        "name": "p",
        "lake": "/tmp/unused",
        "keys": ["user", "region"] if two_keys else ["user"],
        "event_time": "t",
        "window": rng.choice(WINDOWS),
        "trigger": rng.choice(TRIGGERS),
        "accumulation_mode": rng.choice(MODES),
        "timestamp_combiner": rng.choice(TIMESTAMPS),
        "allowed_lateness": rng.choice(["0s", "30s"]),
        "allow_finishing_trigger": True,  # closed windows drop what comes later: compared too
        "aggregates": aggregates,
        "source": {
            "path": "/tmp/unused",
            "schema": {
                "user": key_type,
                "region": "string",
                "t": "timestamp",
                "n": "long",
                "tag": "string",
            },
        },
    }


class Spread(combiners_of_your_own.Spread):
    """A user's combiner: ``max - min`` of ``n`` (declared type and column)."""

    output_type = "long"
    fields = ("n",)


class Tags(combiners_of_your_own.Distinct):
    """A user's combiner with its own ``add_all``: the distinct tags, exactly."""

    output_type = "long"
    fields = ("tag",)


class Regions(Tags):
    """The distinct regions: a column that is also a key in a two-column key."""

    fields = ("region",)


class Joined(Tags):
    """The tags in the order added: it says its output depends on that order."""

    output_type = "string"
    order_sensitive = True

    def add_all(self, acc, values):
        return (*acc, *(v["tag"] or "-" for v in values))

    def merge(self, accs):
        return tuple(t for acc in accs for t in acc)

    def extract(self, acc):
        return ",".join(acc)


OWN = {"spread": Spread(), "tags": Tags()}


def pipeline_of(settings: dict, own: dict[str, CombineFn] | None = None):
    """The pipeline of ``settings``, with the combiners ``own`` (a code pipeline's) after its
    aggregates (``settings`` may have none: then only ``own``)."""
    from dataclasses import replace

    from jobs.config.aggregates import Aggregate
    from jobs.config.load import pipeline_from_dict

    built_in = settings["aggregates"]
    pipeline = pipeline_from_dict({**settings, "aggregates": built_in or {"rows": "count()"}})
    if own:
        added = tuple(Aggregate(name, fn) for name, fn in own.items())
        kept = pipeline.aggregates if built_in else ()
        pipeline = replace(pipeline, aggregates=kept + added)
    return pipeline


def operators(settings: dict, own: dict[str, CombineFn] | None = None) -> list[ShardRun]:
    """(lifting, element by element) operators of ``settings`` (and the combiners ``own``)."""
    from dataclasses import replace

    from jobs.driver.plan import operator_config

    conf = operator_config(pipeline_of(settings, own))
    # the engine per key, lifted or not (columnar windows: tests/jobs/test_columnar_path.py)
    conf = replace(conf, columnar_windows=False)
    return [ShardRun(replace(conf, lift_combiners=lift)) for lift in (True, False)]


def batches(rng: random.Random, key_type: str, n_batches: int = 8, huge: bool = False):
    """(rows, watermark ms, processing ms) per batch: out-of-order and late elements, nulls,
    repeated timestamps, a few keys, values up to 2^40. ``huge``: also up to three values of
    magnitude 2^61 for one key, so that Arrow's sums of a batch could leave 64 bits while the
    windows' sums never do."""
    users = [rng.randrange(-5, 2**40) for _ in range(rng.randint(1, 6))]
    if key_type == "string":
        users = [f"u{u % 1000}" for u in users]
    huge_left = 3 if huge else 0
    watermark, processing = 0, T0_MS
    for _ in range(n_batches):
        base = T0_MS + rng.randrange(0, 300_000)
        rows = []
        for _ in range(rng.choice([0, 1, 5, 40])):
            ts_ms = base + rng.randrange(-120_000, 60_000)
            user = rng.choice(users)
            n = rng.choice([None, rng.randrange(-(2**40), 2**40), rng.randrange(9)])
            if huge_left and user == users[0] and rng.random() < 0.3:
                n, huge_left = rng.choice([2**61, -(2**61)]), huge_left - 1
            rows.append(
                {
                    "user": user,
                    "region": rng.choice(["eu", "us"]),
                    "ts_us": ts_ms * 1000 + rng.choice([0, 0, 7]),
                    "n": n,
                    "tag": rng.choice([None, "a", "b", "é", "zz"]),
                }
            )
        watermark = max(watermark, base - rng.randrange(0, 90_000))
        processing += rng.randrange(0, 12_000)
        yield rows, watermark, processing
    yield [], watermark + 3_600_000, processing + 60_000  # every window closes


def run(shard: ShardRun, key_type: str, plan: list) -> list[dict]:
    user = pa.string() if key_type == "string" else pa.int64()
    schema = pa.schema(
        [
            ("user", user),
            ("region", pa.string()),
            ("ts_us", pa.int64()),
            ("n", pa.int64()),
            ("tag", pa.string()),
        ]
    )
    emitted: list[dict] = []
    for rows, watermark, processing in plan:
        blob = blob_of(pa.Table.from_pylist(rows, schema)) if rows else None
        emitted.extend(shard.step(blob, clocks(watermark, processing)))
    return emitted


def comparable(rows: list[dict]) -> list[dict]:
    """NaN-free rows (a mean of no values is null, not NaN, but pandas frames may say NaN)."""
    return [{k: (None if v != v else v) for k, v in r.items()} for r in rows]


def compare(seed: int, huge: bool = False, own: bool = False) -> set[str]:
    """One random workload through both paths; the kinds of rows it wrote. A key of one column
    (long or string), or of two (the region too) in every other workload. ``huge``: values for
    which Arrow's sums of a batch could leave 64 bits (:func:`batches`). ``own``: the user's
    combiners (:data:`OWN`, one or both) beside the built-ins drawn (none in every third)."""
    rng = random.Random(seed)
    key_type = rng.choice(["long", "string"])
    low = 0 if own and seed % 3 == 0 else 1
    names = rng.sample(sorted(AGGREGATES), rng.randint(low, len(AGGREGATES)))
    aggregates = {n: AGGREGATES[n] for n in names}
    settings = config(rng, aggregates, key_type, two_keys=seed % 2 == 1)
    mine = None
    if own:
        mine = {n: OWN[n] for n in rng.sample(sorted(OWN), rng.randint(1, len(OWN)))}
    lifted, plain = operators(settings, mine)
    plan = list(batches(rng, key_type, huge=huge))
    got = run(lifted, key_type, plan)
    assert lifted.processor().engines.lifting is not None, (
        f"seed {seed}: this configuration must be lifted"
    )
    want = run(plain, key_type, plan)
    assert plain.processor().engines.lifting is None
    assert comparable(got) == comparable(want), f"seed {seed}: {settings}"
    assert lifted.stored() == plain.stored()  # the same state kept
    assert want or not any(rows for rows, *_ in plan)
    return {r["record_kind"] for r in want}


@pytest.mark.heavy
@pytest.mark.parametrize("seeds", [seeds(0, 40), seeds(40, 80)])
def test_lifted_and_per_element_paths_write_the_same_rows(seeds):
    kinds = set().union(*(compare(seed) for seed in seeds))
    assert kinds == {"pane", "late"}  # both paths fired and dropped


@pytest.mark.heavy
def test_a_users_own_combiners_write_the_same_rows_lifted_and_element_by_element():
    """Random workloads (every mode, element-counting and processing-time triggers, late and
    closed windows) with a user's combiners, alone or beside built-ins: each window's values of
    a batch added at once (``add_all`` per key and window) give the rows and state that adding
    them element by element gives."""
    kinds = set().union(*(compare(seed, own=True) for seed in seeds(500, 540)))
    assert kinds == {"pane", "late"}


def splits_counted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Lifting's sums counted: one item per bundle, whether it summed a column by halves."""
    from panes.columnar import wide

    split: list[bool] = []

    def counted(table, columns):
        out = wide.exact_sums(table, columns)
        split.append(bool(out[1]))
        return out

    monkeypatch.setattr("panes.columnar.bundle.exact_sums", counted)
    return split


@pytest.mark.heavy
def test_batches_whose_sums_could_leave_64_bits_are_lifted_exactly(monkeypatch):
    """Random workloads with values for which Arrow's sums of a batch could leave 64 bits:
    those columns are summed by their 32-bit halves, exactly, with the same rows and state as
    the per-element path."""
    split = splits_counted(monkeypatch)
    for seed in seeds(300, 360):
        compare(seed, huge=True)
    assert sum(split) >= 5, "the workloads must sum some batches by halves"


@pytest.mark.parametrize(
    "window, aggregates, n_type",
    [
        ("Sessions(1m)", {"total": "sum(n)"}, "long"),
        ("SlidingWindows(1m, 30s)", {"total": "sum(n)"}, "long"),
        ("FixedWindows(1m)", {"all": "to_list(n)"}, "long"),
        ("FixedWindows(1m)", {"total": "sum(n)"}, "double"),  # float sums depend on order
        ("FixedWindows(1m)", {"avg": "mean(n)"}, "double"),
        ("FixedWindows(1m)", {"c": "count()", "latest": "last(n)"}, "long"),  # event times
        ("FixedWindows(1m)", {"c": "count()", "top": "max_by(n, n)"}, "long"),
    ],
)
def test_what_cannot_be_lifted_exactly_takes_the_per_element_path(window, aggregates, n_type):
    settings = config(random.Random(0), aggregates)
    settings["window"] = window
    settings["source"]["schema"]["n"] = n_type
    lifted, _ = operators(settings)
    assert lifted.processor().engines.lifting is None


def test_aggregates_reading_a_key_column_are_lifted_exactly():
    """With the key ``(user, region)``, built-ins and a user's combiner reading ``region`` give
    the per-element path's rows (the key column read once from the bundle; before, lifting
    failed on it: "Multiple matches for FieldRef.Name(region)")."""
    for seed in seeds(600, 606):
        rng = random.Random(seed)
        aggregates = {"regions_seen": "count(region)", "last_region": "max(region)"}
        settings = config(rng, aggregates, two_keys=True)
        lifted, plain = operators(settings, {"regions": Regions()})
        plan = list(batches(rng, "long"))
        want = run(plain, "long", plan)
        assert comparable(run(lifted, "long", plan)) == comparable(want), f"seed {seed}"
        assert lifted.processor().engines.lifting is not None and want


def path_of(settings: dict, own: dict[str, CombineFn]) -> str:
    """The path the operator of ``settings`` with the user's combiners ``own`` takes."""
    from jobs.driver.plan import operator_config

    return ShardRun(operator_config(pipeline_of(settings, own))).processor().path.value


@pytest.mark.parametrize(
    ("trigger", "aggregates"),
    [
        ("AfterWatermark()", {}),
        ("AfterWatermark()", {"total": "sum(n)", "rows": "count()"}),
        ("AfterWatermark(early=AfterProcessingTime(10s))", {"total": "sum(n)"}),
        ("Repeatedly(AfterCount(2))", {"rows": "count()"}),
    ],
)
def test_a_users_own_combiner_takes_the_lifted_path(trigger, aggregates):
    """Alone or beside built-ins, whatever the trigger: lifted (the columnar engine holds no
    user's accumulator), where before it was added element by element."""
    settings = config(random.Random(0), aggregates)
    settings["window"], settings["trigger"] = "FixedWindows(1m)", trigger
    settings["accumulation_mode"] = "accumulating"
    assert path_of(settings, {"spread": Spread()}) == "lifted"
    if aggregates:  # the built-ins alone: columnar, or lifted for a processing-time trigger
        alone = "lifted" if "ProcessingTime" in trigger else "columnar"
        assert path_of(settings, {}) == alone


@pytest.mark.parametrize(
    ("change", "own"),
    [
        ({}, {"joined": Joined()}),  # its output depends on the order of its values
        ({"aggregates": {"all": "to_list(n)"}}, {"spread": Spread()}),  # a list beside it
        ({"window": "Sessions(1m)"}, {"spread": Spread()}),  # windows that merge
        ({"window": "SlidingWindows(1m, 30s)"}, {"spread": Spread()}),  # several per element
    ],
)
def test_a_users_own_combiner_that_cannot_lift_takes_the_per_element_path(change, own):
    settings = {**config(random.Random(0), {"rows": "count()"}), **change}
    settings["trigger"] = "AfterWatermark()"
    assert path_of(settings, own) == "per element"


def test_a_window_whose_running_sum_passes_64_bits_is_lifted_exactly():
    """Arrow's sums wrap at 64 bits: a batch whose running sum could pass 2^63 is summed by
    halves; every window is still lifted (one part each, no element one by one)."""
    from jobs.executor.operator_input import input_table
    from panes.columnar import Lifting

    settings = config(random.Random(1), {"total": "sum(n)"})
    settings["window"] = "FixedWindows(1m)"
    lifted, plain = operators(settings)
    big = 2**62
    rows = [
        {"user": 1, "ts_us": T0_MS * 1000 + i, "n": n, "tag": None}
        for i, n in enumerate((big, big, -big))
    ]
    rows += [{"user": 1, "ts_us": (T0_MS + 60_000) * 1000 + i, "n": i, "tag": None} for i in (1, 2)]
    rows += [{"user": 2, "ts_us": T0_MS * 1000 + i, "n": i, "tag": None} for i in range(3)]
    plan = [(rows, 0, T0_MS), ([], T0_MS + 600_000, T0_MS)]
    got = run(lifted, "long", plan)
    want = run(plain, "long", plan)
    assert comparable(got) == comparable(want)
    totals = {
        (p["user"], p["window_start_us"] // 60_000_000 - T0_MS // 60_000): p["total"]
        for p in want
        if p["record_kind"] == "pane"
    }
    assert totals == {(1, 0): big, (1, 1): 3, (2, 0): 3}  # Arrow's running sum would pass 2^63
    schema = lifted.config.input_schema
    table = input_table([blob_of(pa.Table.from_pylist(rows))], [], schema)
    lifting = lifted.processor().engines.lifting
    assert isinstance(lifting, Lifting)
    bundles = lifting.combined_by_key(table, 0)
    assert [len(bundles[1].expired), len(bundles[1].parts)] == [0, 2]
    assert [len(bundles[2].expired), len(bundles[2].parts)] == [0, 1]
    assert sorted(p.acc for p in bundles[1].parts) == [(3,), (big,)]


class Counted(CombineFn):
    """A user's combiner that can withdraw a value (``retract``): it may read weighted input."""

    output_type = "long"
    fields = ("n",)

    def create(self):
        return 0

    def add(self, acc, value):
        return acc + 1

    def retract(self, acc, value):
        return acc - 1

    def merge(self, accs):
        return sum(accs)

    def extract(self, acc):
        return acc


def test_weighted_input_stays_element_by_element_with_a_users_own_combiner():
    """A pane-log upstream's retractions (weight -1) are withdrawn one by one: the pipeline
    stays on the per-element path even with a combiner that can retract, as it did."""
    from jobs.executor.operator_input import InputSchema
    from panes import AccumulationMode, FixedWindows, Windowing
    from panes.engine import Engine
    from panes.engines import EngineKind, choose

    windowing = Windowing(
        FixedWindows(60_000_000), accumulation_mode=AccumulationMode.ACCUMULATING_AND_RETRACTING
    )
    columns = (("user", pa.int64()), ("n", pa.int64()))
    for weighted, path in ((True, EngineKind.PER_ELEMENT), (False, EngineKind.LIFTED)):
        engine = Engine(windowing, Counted(), weighted=weighted)
        schema = InputSchema(("user",), ("n",), columns, weighted)
        elements = schema.columns_of_elements()
        assert choose(windowing, engine.combine_fn, elements, weighted).kind is path
