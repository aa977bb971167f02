"""One factory of the model's engines: which one a pipeline runs on, and why not the columnar one.

A pipeline runs on one of three engines, chosen once from its configuration (the table in
``docs/semantics.md``, "The operator's path"):

==========================  ======================================================================
:class:`EngineKind`         the engine
==========================  ======================================================================
``PER_ELEMENT``             the per-key :class:`~panes.engine.Engine`, element by element (every
                            pipeline)
``LIFTED``                  the per-key engine, fed each window's elements combined in Arrow
                            (:class:`panes.columnar.Lifting`, :func:`panes.columnar.add_bundle`)
``COLUMNAR``                the columnar engine (:class:`panes.columnar.ColumnarEngine`), many
                            keys' windows as one table
==========================  ======================================================================

:func:`choose` says which applies, and why the columnar one does not (:attr:`Choice.not_columnar`);
:func:`build` builds it (:class:`Engines`); :func:`runner` builds the engine the
:class:`~panes.simulator.Simulator` drives over Python elements (:class:`Runner`). The operator
(``jobs/executor/``) and the simulator both build their engines here; what the caller adds is
only what its input says: input in no fixed order (``unordered``: an aggregate whose value
depends on the order of its elements takes the per-element path, which orders them) and a reason
of its own to keep the pipeline off the columnar engine (``columnar_off``).

>>> from panes import AfterProcessingTime, AfterWatermark, FixedWindows, Sessions, Windowing
>>> from panes import combiners
>>> from panes.columnar import ElementColumns
>>> import pyarrow as pa
>>> columns = ElementColumns(("k",), ("n",), (("k", pa.string()), ("n", pa.int64())))
>>> choose(Windowing(FixedWindows(10)), combiners.sum("n"), columns)
Choice(kind=<EngineKind.COLUMNAR: 'columnar'>, not_columnar=None)
>>> early = Windowing(FixedWindows(10), trigger=AfterWatermark(early=AfterProcessingTime(5)))
>>> choose(early, combiners.sum("n"), columns).kind
<EngineKind.LIFTED: 'lifted'>
>>> choose(Windowing(Sessions(10)), combiners.sum("n"), columns).not_columnar
'Sessions(10us) are not fixed windows (one window per element, none merging)'
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from panes.combiners import CombineFn
from panes.engine import Engine
from panes.pane import Dropped, Pane
from panes.rules import WindowRules
from panes.state import KeyState
from panes.windowing import Windowing

if TYPE_CHECKING:
    from panes.columnar import ColumnarEngine, ElementColumns, Lifting


class EngineKind(enum.Enum):
    """Which engine a pipeline runs on (the module doc)."""

    PER_ELEMENT = "per element"
    LIFTED = "lifted"
    COLUMNAR = "columnar"


class Choice(NamedTuple):
    """The engine a pipeline runs on, and why the columnar engine does not apply (None: it
    does)."""

    kind: EngineKind
    not_columnar: str | None


ORDERED = "an aggregate depends on the order of its elements, and the input comes in no fixed order"


def choose(
    windowing: Windowing,
    combine_fn: CombineFn,
    columns: ElementColumns | None,
    weighted: bool = False,
    *,
    lift: bool = True,
    columnar: bool = True,
    unordered: bool = False,
    columnar_off: str | None = None,
) -> Choice:
    """The engine of a pipeline whose elements come as ``columns`` (None: as Python values,
    the per-element engine). ``lift``, ``columnar``: False keeps the pipeline off those engines
    (what the tests and benchmarks compare them with); ``unordered``: the input comes in no
    fixed order; ``columnar_off``: the caller's own reason to keep it off the columnar engine."""
    if columns is None:
        return Choice(EngineKind.PER_ELEMENT, "the elements are not columns")
    from panes.columnar import columnar_reason, lifting_reason
    from panes.columnar.accumulators import parts_of

    reason = "kept off the lifted path" if not lift else None
    reason = reason or lifting_reason(windowing, combine_fn, columns, weighted)
    if reason is not None:  # merging or sliding windows, weights, inexact built-ins
        return Choice(EngineKind.PER_ELEMENT, reason)
    parts = parts_of(combine_fn, columns.arrow_type, columns.whole, columns.values)
    if isinstance(parts, str):
        return Choice(EngineKind.PER_ELEMENT, parts)
    if unordered and any(p.order_sensitive for p in parts):
        return Choice(EngineKind.PER_ELEMENT, ORDERED)  # a list: sorted on the per-element path
    reason = "kept off the columnar path" if not columnar else None
    reason = reason or columnar_reason(windowing, combine_fn, columns, weighted) or columnar_off
    if reason is not None:  # a combiner's own, clocks beyond the watermark, emitted panes kept
        return Choice(EngineKind.LIFTED, reason)
    return Choice(EngineKind.COLUMNAR, None)


@dataclass(frozen=True)
class Engines:
    """A pipeline's engine as :func:`build` chose and built it: ``per_key`` always (the
    per-element and lifted engine; the columnar engine's reporter of dropped elements),
    ``lifting`` on the lifted path, ``columnar`` on the columnar one."""

    kind: EngineKind
    per_key: Engine
    lifting: Lifting | None = None
    columnar: ColumnarEngine | None = None
    not_columnar: str | None = None

    @property
    def rules(self) -> WindowRules:
        """The rules of the pipeline's windows (the one holder of its allowed lateness)."""
        return self.per_key.rules

    @property
    def windowing(self) -> Windowing:
        return self.per_key.windowing

    @property
    def combine_fn(self) -> CombineFn:
        return self.per_key.combine_fn


def build(
    engine: Engine,
    columns: ElementColumns | None = None,
    *,
    lift: bool = True,
    columnar: bool = True,
    unordered: bool = False,
    columnar_off: str | None = None,
) -> Engines:
    """The engine :func:`choose` says of the pipeline of the per-key ``engine`` (its windowing,
    combiner, weights), built."""
    windowing, fn = engine.windowing, engine.combine_fn
    choice = choose(
        windowing,
        fn,
        columns,
        engine.weighted,
        lift=lift,
        columnar=columnar,
        unordered=unordered,
        columnar_off=columnar_off,
    )
    if choice.kind is EngineKind.PER_ELEMENT:
        return Engines(choice.kind, engine, not_columnar=choice.not_columnar)
    from panes.columnar import ColumnarEngine, Lifting

    assert columns is not None  # not per element
    if choice.kind is EngineKind.LIFTED:
        lifting = Lifting.of(windowing, fn, columns)
        return Engines(choice.kind, engine, lifting=lifting, not_columnar=choice.not_columnar)
    return Engines(choice.kind, engine, columnar=ColumnarEngine(windowing, fn, columns))


# -- the simulator's engines -------------------------------------------------------------------


class Runner(Protocol):
    """An engine over many keys' Python elements, as the simulator drives it: each call returns
    the panes it fired and the elements it dropped, in the per-key engine's order."""

    @property
    def states(self) -> dict[Any, KeyState]: ...

    def add(
        self, elements: Sequence[tuple[Any, Any, int]], watermark: int, processing_time: int
    ) -> tuple[list[Pane], list[Dropped]]: ...

    def advance(self, watermark: int, processing_time: int) -> tuple[list[Pane], list[Dropped]]: ...


class KeyedRunner:
    """The per-key engine over many keys: each key's :class:`~panes.state.KeyState`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._states: dict[Any, KeyState] = {}

    @property
    def states(self) -> dict[Any, KeyState]:
        return self._states

    def add(
        self, elements: Sequence[tuple[Any, Any, int]], watermark: int, processing_time: int
    ) -> tuple[list[Pane], list[Dropped]]:
        """One bundle: each key's elements, keys in the order of their first element."""
        by_key: dict[Any, list[tuple[Any, Any, int]]] = {}
        for element in elements:
            bundle = by_key.get(element[0])
            if bundle is None:
                by_key[element[0]] = [element]
            else:
                bundle.append(element)
        panes: list[Pane] = []
        dropped: list[Dropped] = []
        states = self._states
        for key, bundle in by_key.items():
            state = states.get(key)
            if state is None:
                state = states[key] = KeyState(watermark, processing_time)
            out = self.engine.add_elements(state, key, bundle)
            panes.extend(out.panes)
            dropped.extend(out.dropped)
            if state.is_empty:
                del states[key]
        return panes, dropped

    def advance(self, watermark: int, processing_time: int) -> tuple[list[Pane], list[Dropped]]:
        states = self._states
        out = self.engine.advance_all(states, watermark, processing_time)
        for key in [key for key, state in states.items() if state.is_empty]:
            del states[key]
        return out.panes, out.dropped


def runner(windowing: Windowing, combine_fn: CombineFn, weighted: bool, kind: EngineKind) -> Runner:
    """The engine the simulator drives: the per-key engine (``PER_ELEMENT``) or the columnar
    one (``COLUMNAR``; :class:`panes.columnar.NotColumnar` says why where it does not apply).
    The lifted engine needs element columns: not the simulator's."""
    if not isinstance(kind, EngineKind):
        raise TypeError(f"engine must be an EngineKind, got {kind!r}")
    if kind is EngineKind.COLUMNAR:
        from panes.columnar.simulated import ColumnarRunner  # numpy and pyarrow: on demand

        return ColumnarRunner(windowing, combine_fn, weighted)
    if kind is EngineKind.LIFTED:
        raise ValueError("the simulator runs the per-element or the columnar engine, not lifted")
    return KeyedRunner(Engine(windowing, combine_fn, weighted))


__all__ = ["Choice", "EngineKind", "Engines", "KeyedRunner", "Runner", "build", "choose", "runner"]
