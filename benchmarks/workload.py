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

MICROS = 1_000_000
START_US = 1_704_067_200 * MICROS  # 2024-01-01T00:00:00Z
SPAN_US = 3_600 * MICROS  # one hour of event time
MAX_DISORDER_US = 5 * 60 * MICROS  # out-of-order events are up to 5 minutes behind
OUT_OF_ORDER_FRACTION = 0.10
WATERMARK_LAG_US = 5 * 60 * MICROS
PROCESSING_LATENCY_US = 60 * MICROS

Element = tuple[str, int, int]  # (key, value, timestamp_us)
Bundle = tuple[list[Element], int, int]  # (elements, watermark_after_bundle, processing_time)


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
    if n_events < 0 or n_keys < 1 or bundle_size < 1:
        raise ValueError("n_events >= 0, n_keys >= 1 and bundle_size >= 1 are required")
    rng = random.Random(seed)
    keys = [f"key-{i:04d}" for i in range(n_keys)]
    step = SPAN_US / max(n_events, 1)
    bundles: list[Bundle] = []
    elements: list[Element] = []
    max_seen = START_US
    watermark = START_US - WATERMARK_LAG_US
    for i in range(n_events):
        ts = START_US + int(i * step)
        if rng.random() < OUT_OF_ORDER_FRACTION:
            ts = max(START_US, ts - rng.randint(1, MAX_DISORDER_US))
        elements.append((keys[rng.randrange(n_keys)], rng.randint(1, 100), ts))
        max_seen = max(max_seen, ts)
        if len(elements) == bundle_size or i == n_events - 1:
            watermark = max(watermark, max_seen - WATERMARK_LAG_US)
            bundles.append((elements, watermark, max_seen + PROCESSING_LATENCY_US))
            elements = []
    return bundles


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
