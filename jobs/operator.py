"""The stateful operator: the ``panes`` engine per key inside ``transformWithStateInPandas``.

One ValueState per key (the engine's ``KeyState`` as bytes, plus the event-time timer currently
registered) and at most one event-time timer per key: every state or timer call crosses from the
Python worker to the JVM, so the operator makes as few as it can (one get, one update, and timer
calls only when the wanted timer changes).

Time mapping (Spark ms -> model µs). Spark's watermark may be *widened* by the job (delay +
allowed lateness + longest window span) so Spark never filters a row the engine would accept;
the model watermark is then ``spark_watermark_ms * 1000 + watermark_offset_us``. Spark reports
watermark 0 before it has one: that maps to ``BEGINNING_OF_TIME``. A Spark watermark at or past
``end_of_time_ms`` (a drain) maps to ``END_OF_TIME``. Processing time is the batch timestamp
Spark records in its offset log (deterministic on replay), in µs.

Per batch and key (TimeMode ``EventTime``; data rows and timers of one batch see the same
watermark, the one in that batch's offset log):

* data: ``advance(watermark, batch time)`` then ``add_elements(rows)``;
* expired timer: ``advance(watermark, batch time)``;

then the state is saved (or cleared when empty) and one timer is set at the earliest of the
engine's next event-time wake-up (as the smallest Spark ms watermark that reaches it) and, if it
has a processing-time wake-up pending, the next watermark advance (``watermark + 1 ms``): Spark
has no processing-time timers in an EventTime query, so those wake-ups are polled whenever the
watermark moves, and are otherwise honoured the next time the key gets data.

This module imports ``panes`` and ``pyspark`` lazily: it imports without either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

try:  # pyspark is optional at import time (the pure test suite runs without it)
    from pyspark.sql.streaming import StatefulProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without pyspark
    _Base = object  # type: ignore[assignment,misc]

from sinks.pane_log import DEFAULT_LAYOUT, PaneLogLayout, core_schema, pane_record
from sinks.records import dropped_record, late_core_schema

BEGINNING_OF_TIME = -(2**63)  # == panes.time.BEGINNING_OF_TIME (kept here: lazy import)
END_OF_TIME = 2**63 - 1  # == panes.time.END_OF_TIME
# Spark timestamps end at 9999-12-31; a drain pushes the Spark watermark to here or beyond.
DEFAULT_END_OF_TIME_MS = 253_402_300_799_999

KIND_PANE = "pane"
KIND_LATE = "late"
TIMEMODE = "EventTime"
OUTPUT_MODE = "Append"


def output_arrow_schema(layout: PaneLogLayout = DEFAULT_LAYOUT):
    """Arrow schema of the operator's output: ``record_kind`` + pane core + late-only columns."""
    import pyarrow as pa

    fields = [pa.field("record_kind", pa.string(), nullable=False)]
    names = set()
    for f in core_schema(layout):
        fields.append(f.with_nullable(True))
        names.add(f.name)
    for f in late_core_schema(layout):
        if f.name not in names:
            fields.append(f.with_nullable(True))
    return pa.schema(fields)


def output_spark_schema(layout: PaneLogLayout = DEFAULT_LAYOUT):
    """The same as a Spark ``StructType`` (for ``transformWithStateInPandas``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(output_arrow_schema(layout))


def state_spark_schema():
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    return StructType([StructField("blob", BinaryType()), StructField("timer_ms", LongType())])


@dataclass(frozen=True)
class OperatorConfig:
    """What the operator needs besides the engine; picklable (shipped to the Python workers).

    ``engine_factory`` builds the ``panes.engine.Engine`` on the worker (a module-level function
    or a picklable callable object). Input rows carry the key column(s), ``timestamp_column``
    (event time as int64 µs) and the value column(s); ``value_of`` maps one input row
    (a dict) to the element value (default: the single value column, or a dict of them).
    """

    engine_factory: Callable[[], Any]
    key_columns: Sequence[str] = ("key",)
    timestamp_column: str = "ts_us"
    value_columns: Sequence[str] = ("value",)
    layout: PaneLogLayout = DEFAULT_LAYOUT
    watermark_offset_us: int = 0
    end_of_time_ms: int = DEFAULT_END_OF_TIME_MS
    poll_processing_time: bool = True
    # Element values are dicts of the value columns (nulls as None), even for 0 or 1 column:
    # what named aggregates (``panes.combiners.aggregates``) read.
    values_as_records: bool = False
    value_of: Callable[[dict], Any] | None = field(default=None, compare=False)

    # -- time mapping ---------------------------------------------------------------------------

    def model_watermark(self, spark_watermark_ms: int) -> int:
        if spark_watermark_ms <= 0:
            return BEGINNING_OF_TIME
        if spark_watermark_ms >= self.end_of_time_ms:
            return END_OF_TIME
        return spark_watermark_ms * 1000 + self.watermark_offset_us

    def timer_ms(self, model_time_us: int) -> int:
        """Smallest Spark watermark (ms) whose model watermark reaches ``model_time_us``."""
        if model_time_us >= END_OF_TIME:
            return self.end_of_time_ms
        spark_us = model_time_us - self.watermark_offset_us
        ms = -((-spark_us) // 1000)  # ceil
        return max(1, min(ms, self.end_of_time_ms))


class PaneProcessor(_Base):
    """``StatefulProcessor`` hosting the engine; see the module doc for the protocol."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._engine = None

    # -- Spark callbacks ------------------------------------------------------------------------

    def init(self, handle) -> None:
        self.handle = handle
        self.state = handle.getValueState("pane_state", state_spark_schema())
        cfg = self.config
        self._columns = output_arrow_schema(cfg.layout).names
        self._single_key = len(cfg.key_columns) == 1
        self._profile = None
        prof_dir = os.environ.get("PANESTORE_PROFILE_DIR")
        if prof_dir:  # developer aid: cProfile each task's processor into this directory
            import cProfile

            self._profile = cProfile.Profile()
            self._profile_path = os.path.join(prof_dir, f"{os.getpid()}-{time.time_ns()}.prof")
            self._profile.enable()

    @property
    def engine(self):
        if self._engine is None:
            self._engine = self.config.engine_factory()
        return self._engine

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        cfg = self.config
        elements = []
        vcols = list(cfg.value_columns)
        for pdf in rows:
            ts = pdf[cfg.timestamp_column].tolist()
            if cfg.value_of is not None:
                vals = [cfg.value_of(r) for r in pdf.to_dict("records")]
            elif cfg.values_as_records:
                vals = _records(pdf, vcols)
            elif len(vcols) == 1:
                vals = pdf[vcols[0]].tolist()
            else:
                vals = pdf[vcols].to_dict("records")
            elements.extend(zip(vals, (int(t) for t in ts), strict=True))
        # Spark does not order rows within a key: sort so panes are a function of the input set.
        elements.sort(key=lambda e: (e[1], repr(e[0])))
        ekey = self._engine_key(key)
        wm, pt = self._clocks(timerValues)
        state, timer = self._load()
        out1 = self.engine.advance(state, ekey, wm, pt)
        out2 = self.engine.add_elements(state, ekey, elements)
        self._save(state, timer, out2, timerValues)
        yield from self._emit([out1, out2])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        ekey = self._engine_key(key)
        wm, pt = self._clocks(timerValues)
        state, timer = self._load()
        if state is None:
            return
        out = self.engine.advance(state, ekey, wm, pt)
        # Spark deletes the expired timer itself after this call.
        expired = expiredTimerInfo.getExpiryTimeInMs()
        self._save(state, None if timer == expired else timer, out, timerValues)
        yield from self._emit([out])

    def close(self) -> None:
        if self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(self._profile_path)

    # -- helpers --------------------------------------------------------------------------------

    def _engine_key(self, key: tuple) -> Any:
        return key[0] if self._single_key else tuple(key)

    def _clocks(self, tv) -> tuple[int, int]:
        return (
            self.config.model_watermark(tv.getCurrentWatermarkInMs()),
            tv.getCurrentProcessingTimeInMs() * 1000,
        )

    def _load(self):
        got = self.state.get()
        if got is None:
            return self.engine.new_state(), None
        blob, timer = got
        return self.engine.load_state(bytes(blob)), timer

    def _save(self, state, timer: int | None, out, tv) -> None:
        cfg = self.config
        if state is None or state.is_empty:
            self.state.clear()
            if timer is not None:
                self.handle.deleteTimer(timer)
            return
        want = None
        if out.next_event_time is not None:
            want = cfg.timer_ms(out.next_event_time)
        if out.next_processing_time is not None and cfg.poll_processing_time:
            poll = tv.getCurrentWatermarkInMs() + 1
            want = poll if want is None else min(want, poll)
        if want != timer:
            if timer is not None:
                self.handle.deleteTimer(timer)
            if want is not None:
                self.handle.registerTimer(want)
        self.state.update((state.to_bytes(), want))

    def _emit(self, outs) -> Iterator:
        import pandas as pd

        cfg = self.config
        recs = []
        for out in outs:
            for p in out.panes:
                r = pane_record(p, cfg.layout)
                r["record_kind"] = KIND_PANE
                recs.append(r)
            for d in out.dropped:
                r = dropped_record(d, cfg.layout)
                r["record_kind"] = KIND_LATE
                recs.append(r)
        if recs:
            # object columns: int64 µs (and the int64 extremes) must not round-trip via float64
            yield pd.DataFrame(
                {c: pd.Series([r.get(c) for r in recs], dtype=object) for c in self._columns}
            )


_NO_VALUES: dict = {}


def _records(pdf, vcols: list[str]) -> list[dict]:
    """Rows of ``pdf[vcols]`` as dicts, pandas' NaN/NaT nulls as None."""
    if not vcols:
        return [_NO_VALUES] * len(pdf)
    sub = pdf[vcols]
    isna = sub.isna()
    if isna.to_numpy().any():
        sub = sub.astype(object).where(~isna, None)
    return sub.to_dict("records")


def apply_operator(df, config: OperatorConfig):
    """``df`` (streaming, with a watermark) grouped by key through :class:`PaneProcessor`."""
    return df.groupBy(*config.key_columns).transformWithStateInPandas(
        statefulProcessor=PaneProcessor(config),
        outputStructType=output_spark_schema(config.layout),
        outputMode=OUTPUT_MODE,
        timeMode=TIMEMODE,
    )


def split_output(table):
    """Operator output (Arrow) -> (pane core records, late core records)."""
    import pyarrow.compute as pc

    kind = table.column("record_kind")
    return (
        table.filter(pc.equal(kind, KIND_PANE)),
        table.filter(pc.equal(kind, KIND_LATE)),
    )
