"""A replayable streaming source for the API tests: a PySpark Python data source over a counter.

``spark.readStream.format("test_counter").option("path", file)``: the file holds how many events
exist (``n``); offsets are event counts, and event ``i`` is a pure function of ``i`` (a user, an
event time that goes back and forth, an amount that is sometimes not a number), so a replayed
batch reads the same rows. The amount is text, as a user's frame often has it before typing:
the pipeline's schema says double, and an amount that does not cast is rejected with a reason.

Run as a script (``python -m tests.spark.counter_source LAKE COUNTER [--drain] [--kill-at P:B]``)
it is a user's scheduled job: the pipeline defined and run with :mod:`jobs.api`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

T0_US = 1_704_067_200 * 1_000_000


def event(i: int) -> tuple[str, int, str]:
    """(user, event time µs, amount text) of event ``i``."""
    ts = T0_US + ((i * 37) % 600) * 1_000_000 + i * 200_000
    amount = "n/a" if i % 41 == 40 else str(i % 13)
    return f"u{i % 7}", ts, amount


class Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class CounterReader(DataSourceStreamReader):
    def __init__(self, path: str) -> None:
        self.path = path

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self) -> dict:
        return {"n": int(Path(self.path).read_text())}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [Range(start["n"], end["n"])] if end["n"] > start["n"] else []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        import datetime as dt

        assert isinstance(partition, Range)
        for i in range(partition.start, partition.end):
            user, ts, amount = event(i)
            when = dt.datetime.fromtimestamp(ts / 1e6, tz=dt.timezone.utc)
            yield user, when, amount

    def commit(self, end: dict) -> None:
        pass


class CounterSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "test_counter"

    def schema(self) -> str:
        return "user string, ts timestamp, amount string"

    def streamReader(self, schema) -> DataSourceStreamReader:
        return CounterReader(self.options["path"])


def counter_stream(spark, counter: Path):
    spark.dataSource.register(CounterSource)
    return spark.readStream.format("test_counter").option("path", str(counter)).load()


def pipeline(lake: Path, name: str = "counted", **settings):
    """The pipeline, defined in code (``settings``: ``api.define``'s, instead of these)."""
    from jobs import api
    from panes import AfterCount, AfterWatermark, FixedWindows, combiners

    defaults = {
        "accumulation_mode": "accumulating_and_retracting",
        "aggregates": {"total": combiners.sum("amount"), "n": "count()"},
    }
    return api.define(
        name,
        source=api.dataframe_source(
            {"user": "string", "ts": "timestamp", "amount": "double"}, description="test counter"
        ),
        lake=str(lake),
        keys="user",
        event_time="ts",
        window=FixedWindows(60 * 1_000_000),
        trigger=AfterWatermark(early=AfterCount(3), late=AfterCount(1)),
        allowed_lateness="2m",
        watermark=api.Watermark(delay=30 * 1_000_000),
        state_buckets=4,
        **{**defaults, **settings},
    )


def main(argv: list[str]) -> int:
    """A user's job: ``LAKE COUNTER [--drain] [--kill-at POINT:BATCH]`` (the kill is the test
    suite's hook of :func:`jobs.driver.runs.run`, made here as a crash would)."""
    from jobs import api
    from jobs.startup.session import get_session

    lake, counter = Path(argv[0]), Path(argv[1])
    if "--kill-at" in argv:
        import jobs.api.streams as streams
        from jobs.driver import runs

        point, batch = argv[argv.index("--kill-at") + 1].split(":")
        streams.run_pipeline = functools.partial(runs.run, kill_at=[(point, int(batch))])
    spark = get_session("counter-job", shuffle_partitions=2)
    api.run(pipeline(lake), counter_stream(spark, counter), drain="--drain" in argv, fold=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


from tests.combiners_of_your_own import OpaqueFrom, Spread  # noqa: E402


class SpreadFn(Spread):
    """A combiner of a user's own (``max - min`` of ``amount``), declaring its output type and
    the column it reads; its accumulator, ``(min, max)``, is JSON."""

    output_type = "double"
    fields = ("amount",)


def spread_pipeline(lake: Path, beside: str = "sum"):
    """:func:`pipeline` in discarding mode, with the user's combiner beside a built-in:
    ``sum`` (of doubles: the pipeline is added element by element) or ``count`` (lifted: each
    window's values of a batch combined at once, ``OperatorConfig.engines``)."""
    from panes import combiners

    built_in = {
        "sum": {"total": combiners.sum("amount")},
        "count": {"n": combiners.count("amount")},
    }
    return pipeline(
        lake,
        "spread",
        accumulation_mode="discarding",
        aggregates={"spread": SpreadFn(), **built_in[beside]},
    )


class CappedFn(OpaqueFrom):
    """A combiner of a user's own whose accumulator, once a window adds an ``amount`` of 12,
    is an object the pane log has no text for (the counter's amounts run 0..12)."""

    output_type = "double"
    fields = ("amount",)
