"""The engine benchmark's workload: deterministic, pure Python, no dependencies.

One hour of event time, ``n_events`` events over ``n_keys`` keys, about 10% of them out of order
by up to 5 minutes, cut into bundles of ``bundle_size`` events. After each bundle comes a
watermark (the largest event time seen so far minus 5 minutes, never moving backwards) and a
processing time (the largest event time seen so far plus one minute of pipeline latency).

Protocol every engine under test follows, per ``(elements, watermark, processing_time)``:

1. advance processing time to ``processing_time``;
2. process ``elements`` as one bundle (grouped by key), at the watermark of the previous step;
3. advance the watermark to ``watermark`` and fire the event-time timers that are due.

There is no final flush to the end of time. The same seed gives the same bundles, in any
Python version (only :class:`random.Random` with an int seed is used).

This file is imported by path from outside the project (the Beam side of the benchmark runs in
its own venv), so it must stay dependency-free and importable on its own.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

MICROS = 1_000_000
START_US = 1_704_067_200 * MICROS  # 2024-01-01T00:00:00Z
HOUR_US = 3_600 * MICROS
SPAN_US = HOUR_US  # one hour of event time
MAX_DISORDER_US = 5 * 60 * MICROS  # out-of-order events are up to 5 minutes behind
OUT_OF_ORDER_FRACTION = 0.10
WATERMARK_LAG_US = 5 * 60 * MICROS
PROCESSING_LATENCY_US = 60 * MICROS

Element = tuple[str, int, int]  # (key, value, timestamp_us)
Bundle = tuple[list[Element], int, int]  # (elements, watermark_after_bundle, processing_time)


def iter_bundles(
    n_events: int = 1_000_000,
    n_keys: int = 1000,
    bundle_size: int = 10_000,
    seed: int = 0,
    span_us: int = SPAN_US,
    start_us: int = START_US,
) -> Iterator[Bundle]:
    """The bundles of :func:`make_bundles`, one at a time (a 10M-event workload does not fit
    in memory as Python tuples). ``span_us``: the event time the events cover, from
    ``start_us``."""
    if n_events < 0 or n_keys < 1 or bundle_size < 1:
        raise ValueError("n_events >= 0, n_keys >= 1 and bundle_size >= 1 are required")
    rng = random.Random(seed)
    width = max(4, len(str(n_keys - 1)))
    keys = [f"key-{i:0{width}d}" for i in range(n_keys)]
    step = span_us / max(n_events, 1)
    elements: list[Element] = []
    max_seen = start_us
    watermark = start_us - WATERMARK_LAG_US
    for i in range(n_events):
        ts = start_us + int(i * step)
        if rng.random() < OUT_OF_ORDER_FRACTION:
            ts = max(start_us, ts - rng.randint(1, MAX_DISORDER_US))
        elements.append((keys[rng.randrange(n_keys)], rng.randint(1, 100), ts))
        max_seen = max(max_seen, ts)
        if len(elements) == bundle_size or i == n_events - 1:
            watermark = max(watermark, max_seen - WATERMARK_LAG_US)
            yield elements, watermark, max_seen + PROCESSING_LATENCY_US
            elements = []


def make_bundles(
    n_events: int = 1_000_000,
    n_keys: int = 1000,
    bundle_size: int = 10_000,
    seed: int = 0,
) -> list[Bundle]:
    """The workload as a list of ``(elements, watermark_after_bundle, processing_time)``.

    ``elements`` are ``(key, value, timestamp_us)`` with keys ``"key-0000"``... and values
    small ints (1..100). Event times cover ``[START_US, START_US + SPAN_US)``.
    """
    return list(iter_bundles(n_events, n_keys, bundle_size, seed))


def scheduled_run_bundles(
    state_keys: int = 100_000,
    new_events: int = 1_000,
    bundle_size: int = 10_000,
    seed: int = 0,
) -> tuple[list[Bundle], list[Bundle]]:
    """A lake's history and the input of one small scheduled run on it: ``(history, new)``.

    ``history``: one event per key, ``state_keys`` keys, over four minutes of event time from
    ``START_US``; every 100th key's event falls in the minute before, the window
    ``[START_US - 1 min, START_US)``. With the 5-minute watermark lag no window of the history
    closes: after it, the state holds every key. ``new``: ``new_events`` events on random keys
    of the history's, from 4.5 to 5.5 minutes after ``START_US``: the watermark moves to
    ``START_US + 30 s``, so the run's trailing batch closes the windows of every 100th key (one
    on-time pane each) and leaves the others open.
    """
    rng = random.Random(seed)
    keys = [f"key-{i:06d}" for i in range(state_keys)]
    minute = 60 * MICROS
    history: list[Element] = []
    for i, key in enumerate(keys):
        offset = rng.randrange(4 * minute) if i % 100 else rng.randrange(minute) - minute
        history.append((key, rng.randint(1, 100), START_US + offset))
    history.sort(key=lambda e: e[2])
    new = sorted(
        (
            (
                keys[rng.randrange(state_keys)],
                rng.randint(1, 100),
                START_US + 4 * minute + minute // 2 + rng.randrange(minute),
            )
            for _ in range(new_events)
        ),
        key=lambda e: e[2],
    )
    return _cut(history, bundle_size), _cut(new, bundle_size)


def _cut(elements: list[Element], bundle_size: int) -> list[Bundle]:
    """Time-ordered ``elements`` as bundles, with the watermark and processing time after each."""
    out: list[Bundle] = []
    for i in range(0, len(elements), bundle_size):
        part = elements[i : i + bundle_size]
        latest = part[-1][2]
        out.append((part, latest - WATERMARK_LAG_US, latest + PROCESSING_LATENCY_US))
    return out


def prefix(bundles: list[Bundle], n_events: int) -> list[Bundle]:
    """The first ``n_events`` events of ``bundles`` (the last bundle possibly cut short)."""
    out: list[Bundle] = []
    left = n_events
    for elements, watermark, processing_time in bundles:
        if left <= 0:
            break
        out.append((elements[:left], watermark, processing_time))
        left -= len(elements)
    return out


def summary(bundles: list[Bundle]) -> dict[str, int | float]:
    """Counts that describe a workload (events, keys, disorder, late events)."""
    n = late = out_of_order = 0
    keys: set[str] = set()
    prev_max = None
    watermark = None
    for elements, wm, _ in bundles:
        for key, _value, ts in elements:
            n += 1
            keys.add(key)
            if prev_max is not None and ts < prev_max:
                out_of_order += 1
            if watermark is not None and ts < watermark:
                late += 1
            prev_max = ts if prev_max is None else max(prev_max, ts)
        watermark = wm
    return {
        "events": n,
        "keys": len(keys),
        "bundles": len(bundles),
        "out_of_order_fraction": out_of_order / n if n else 0.0,
        "behind_watermark": late,
    }


if __name__ == "__main__":
    import json

    print(json.dumps(summary(make_bundles()), indent=1))
