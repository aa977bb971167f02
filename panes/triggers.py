"""Triggers: when, in processing time, a window's results are emitted.

The semantics are those of the formal trigger specification, as ``docs/semantics.md`` states
them: every trigger is a monotonic predicate *P* over the elements a window received since the
trigger last fired and the current time; when *P* holds the window fires and the trigger moves on
with ``next``. The grammar and its functions map onto methods as follows.

==================  =====================================================================
spec                here
==================  =====================================================================
``P_R``             :meth:`Trigger.should_fire`
``next(R)``         :meth:`Trigger.on_fire` (only called while ``should_fire`` holds)
``isDone(R)``       :meth:`Trigger.is_done`
``restart(R)``      :meth:`Trigger.restart` (un-``Done`` the subtree, keep element state)
``rewind(R)``       :meth:`Trigger.rewind`
``further(R1,R2)``  :func:`merge_states` (finishedness is or-ed, element state combined)
``onElement``       :meth:`Trigger.on_elements` (a bundle's *n* elements at once)
==================  =====================================================================

Triggers are immutable values: they can be shared, compared, printed (``str``) and parsed back
(:func:`panes.syntax.parse_trigger`). All mutable state of one window lives outside them, in a flat
``list`` laid out by the trigger tree: ``state[0]`` is a bit set of finished (``Done``) nodes,
and the node at offset ``o`` (the root is at offset 1) keeps its element summary in
``state[o]``. A node of ``size`` *n* owns offsets ``o .. o+n-1``; its children follow it in
order. That keeps a window's trigger state a short list of small values: cheap to update,
to merge, and to serialize.

Decisions where the specification is silent (see ``docs/semantics.md``):

* ``AfterWatermark(early=E, late=L)`` is Beam's composite: ``E`` and ``L`` repeat; ``L`` sees only
  elements that arrive after the end of the window has fired. Merged into a window whose end the
  watermark has not passed, it is rewound to its early phase (the spec's ``rewind``, as in Beam
  Java).
* ``Always`` and ``Never`` are leaves that are never finished; ``Always`` holds even with no new
  elements, ``Never`` never holds (its windows emit only their closing pane).
* Timers: a window is evaluated after every bundle that adds elements to it, and when the
  watermark or processing time reaches a time at which a not-yet-true time predicate of its
  *active* subtriggers becomes true (:meth:`Trigger.event_wakeup`,
  :meth:`Trigger.processing_wakeup`). A trigger that is still ready right after it fired (for
  example ``Repeatedly(AfterWatermark())`` after the end of the window) fires again only with
  new elements, as in Beam.

Evaluation by class. A node that reads the clocks only through :meth:`TriggerContext.past_end`
and :meth:`TriggerContext.end_wakeup` says so (``clocks_by_end``); a trigger all of whose nodes
do (:attr:`Trigger.by_class`) answers the same for every window with the same state on the same
side of the end of the window, so an engine may evaluate it once for all of them
(:mod:`panes.columnar`). It does so in a :class:`ClassContext`, which refuses any other read of
the clocks (:class:`NotByClass`): the contract is checked wherever it is relied on. A trigger
that is not so (``AfterProcessingTime``, or a node class that does not declare it) takes the
per-key engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from panes.time import Duration, format_duration, to_micros
from panes.window import Window

ROOT = 1
"""Offset of the root node in a trigger state list (``state[0]`` holds the finished bits)."""

TriggerState = list
"""A window's trigger state: ``[finished_bits, slot_1, ..., slot_n]``."""


class TriggerContext:
    """What a trigger may look at besides its own state: the window and the current times."""

    __slots__ = ("processing_time", "watermark", "window")

    def __init__(self, window: Window, watermark: int, processing_time: int) -> None:
        self.window = window
        self.watermark = watermark
        self.processing_time = processing_time

    def past_end(self) -> bool:
        """Whether the watermark passed the end of the window."""
        return self.watermark >= self.window.end

    def end_wakeup(self) -> int | None:
        """The end of the window as an event-time wake-up (None: the watermark passed it)."""
        end = self.window.end
        return end if self.watermark < end else None


class NotByClass(TypeError):
    """A trigger read the clocks of a class of windows otherwise than through
    :meth:`TriggerContext.past_end` and :meth:`TriggerContext.end_wakeup`."""


class _Refused:
    """A clock of :class:`ClassContext`: reading it raises :class:`NotByClass`."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __get__(self, ctx: object, owner: type | None = None) -> Any:
        raise NotByClass(f"the trigger read the {self.what} of a class of windows as a number")


class ClassContext(TriggerContext):
    """The context of a *class* of windows: every window whose trigger state is the same and
    for which the watermark is (``past_end``) or is not past the end. A trigger that is
    :attr:`~Trigger.by_class` answers the same for every member, so an engine may evaluate it
    once for the class (:mod:`panes.columnar`). Reading the window or a clock as a number
    raises :class:`NotByClass`: the contract is checked wherever it is relied on.

    >>> ctx = ClassContext(past_end=False)
    >>> AfterWatermark().event_wakeup([0, None], ROOT, ctx) == ClassContext.END
    True
    >>> AfterProcessingTime(5).on_elements(  # doctest: +ELLIPSIS
    ...     [0, None], ROOT, ctx, 1)
    Traceback (most recent call last):
    ...
    panes.triggers.NotByClass: the trigger read the processing time of a class of windows as ...
    """

    __slots__ = ("_past",)

    END = 1
    """The end of the windows of a class, as :meth:`end_wakeup` gives it (a stand-in: the
    engine reads a wake-up of this value as "the end of each window")."""

    def __init__(self, past_end: bool) -> None:  # the clocks stay unset
        self._past = past_end

    def past_end(self) -> bool:
        return self._past

    def end_wakeup(self) -> int | None:
        return None if self._past else ClassContext.END

    window = _Refused("window")
    watermark = _Refused("watermark")
    processing_time = _Refused("processing time")


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b


class Trigger:
    """Base class of all triggers. Subclasses are frozen dataclasses.

    Every method takes the window's state list ``s`` and this node's offset ``o`` in it.
    """

    # Set in __post_init__: number of offsets this subtree owns, the initial values of its
    # slots, and each child's offset relative to this node.
    size: int
    template: tuple
    offsets: tuple[int, ...]
    kids: tuple[tuple[Trigger, int], ...]  # (subtrigger, its offset relative to this node)

    def _subtriggers(self) -> tuple[Trigger, ...]:
        return ()

    def _initial_slot(self) -> Any:
        return None

    def __post_init__(self) -> None:
        template: list[Any] = [self._initial_slot()]
        offsets = []
        for child in self._subtriggers():
            if not isinstance(child, Trigger):
                raise TypeError(f"{type(self).__name__} takes triggers, got {child!r}")
            offsets.append(len(template))
            template.extend(child.template)
        object.__setattr__(self, "size", len(template))
        object.__setattr__(self, "template", tuple(template))
        object.__setattr__(self, "offsets", tuple(offsets))
        object.__setattr__(self, "kids", tuple(zip(self._subtriggers(), offsets, strict=True)))

    # -- the state of a whole tree ---------------------------------------------------------

    def new_state(self) -> TriggerState:
        """The state of a window that has seen nothing: ``[0, *template]``."""
        return [0, *self.template]

    # -- the lifecycle, per node -----------------------------------------------------------

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        """``n`` new elements arrived (all at ``ctx.processing_time``); finished nodes ignore
        them."""

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        """The predicate ``P``. A finished leaf holds (``P_Done = True``)."""
        raise NotImplementedError

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        """``next``: move on after a firing. Only called while :meth:`should_fire` holds."""
        raise NotImplementedError

    def is_done(self, s: TriggerState, o: int) -> bool:
        """``isDone``: a finished trigger never fires again; its window closes."""
        return bool(s[0] >> o & 1)

    def restart(self, s: TriggerState, o: int) -> None:
        """``restart``: clear the finished marks of the subtree; element state is kept."""
        s[0] &= ~(((1 << self.size) - 1) << o)

    def reset(self, s: TriggerState, o: int) -> None:
        """Back to the initial state: not finished, no elements seen."""
        self.restart(s, o)
        s[o : o + self.size] = self.template

    def rewind(self, s: TriggerState, o: int) -> None:
        """``rewind``: undo the passing of the end of window (before merging into a window
        whose end the watermark has not reached)."""
        for child, rel in self.kids:
            child.rewind(s, o + rel)

    def merge_slots(self, s: TriggerState, o: int, other: TriggerState) -> None:
        """Combine ``other``'s element state into ``s`` (finished bits are already or-ed)."""
        for child, rel in self.kids:
            child.merge_slots(s, o + rel, other)

    def event_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        """The next watermark (``> ctx.watermark``) at which ``should_fire`` may change."""
        return None

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        """The next processing time (``> ctx.processing_time``) at which ``should_fire`` may
        change."""
        return None

    # -- static properties -----------------------------------------------------------------

    @property
    def may_finish(self) -> bool:
        """Whether this trigger can finish, closing its window for good (later data is dropped)."""
        return True

    @property
    def has_ontime_pane(self) -> bool:
        """Whether it fires when the watermark passes the end of the window."""
        return any(child.has_ontime_pane for child in self._subtriggers())

    @property
    def has_event_time(self) -> bool:
        """Whether some node waits for the watermark (so windows need event-time wake-ups)."""
        return self.has_ontime_pane

    @property
    def has_processing_time(self) -> bool:
        """Whether some node waits for processing time."""
        return any(child.has_processing_time for child in self._subtriggers())

    clocks_by_end: ClassVar[bool] = False
    """Whether this node reads the clocks only through :meth:`TriggerContext.past_end` and
    :meth:`TriggerContext.end_wakeup` (or not at all). A node class says so; one that does not
    is taken to read them as numbers."""

    @property
    def by_class(self) -> bool:
        """Whether the trigger can be evaluated once per class of windows
        (:class:`ClassContext`): every node reads the clocks only through whether the
        watermark passed the end of the window, so its answers depend on its state, that fact
        and the number of elements, never on the window's bounds or the times. A trigger that
        is not so takes the per-key engine."""
        return self.clocks_by_end and all(child.by_class for child in self._subtriggers())

    @property
    def fires_before_end_of_window(self) -> bool:
        """Whether it can fire before the watermark passes the end of the window (a node that
        does not say is assumed to: this property only ever refuses configurations)."""
        return True

    def or_finally(self, until: Trigger) -> OrFinally:
        """``self.orFinally(until)``: fire as ``self`` does, and finish when ``until`` fires."""
        return OrFinally(self, until)

    def __str__(self) -> str:
        """The canonical textual form, which :func:`panes.syntax.parse_trigger` parses back:
        ``Name(subtrigger, ...)`` unless a class has arguments of its own."""
        return f"{type(self).__name__}({', '.join(map(str, self._subtriggers()))})"

    def __repr__(self) -> str:
        return str(self)


class _Leaf(Trigger):
    """A leaf: its finished bit is ``Done(R)``; ``next`` clears its element state."""

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        s[0] |= 1 << o
        s[o] = self.template[0]

    def merge_slots(self, s: TriggerState, o: int, other: TriggerState) -> None:
        if s[0] >> o & 1:
            s[o] = self.template[0]
        else:
            s[o] = self._combine(s[o], other[o])

    def _combine(self, mine: Any, theirs: Any) -> Any:
        return mine


@dataclass(frozen=True, repr=False)
class AfterCount(_Leaf):
    """``ElemCount(k)``: holds once ``count`` elements arrived since it last fired. Fires once."""

    clocks_by_end = True

    count: int

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"AfterCount needs a positive integer count, got {self.count!r}")
        super().__post_init__()

    def _initial_slot(self) -> int:
        return 0

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        if not s[0] >> o & 1:
            s[o] += n

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return bool(s[0] >> o & 1) or s[o] >= self.count

    def _combine(self, mine: int, theirs: int) -> int:
        return mine + theirs

    def __str__(self) -> str:
        return f"AfterCount({self.count})"


@dataclass(frozen=True, init=False, repr=False)
class AfterProcessingTime(_Leaf):
    """``SinceEarliestElem(delay)``: holds once ``delay`` of processing time passed since the
    first element that arrived after it last fired. Fires once."""

    delay: int

    def __init__(self, delay: Duration) -> None:
        delay = to_micros(delay, "AfterProcessingTime delay")
        if delay < 0:
            raise ValueError(f"AfterProcessingTime delay must not be negative, got {delay}")
        object.__setattr__(self, "delay", delay)
        self.__post_init__()

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        if s[o] is None and not s[0] >> o & 1:
            s[o] = ctx.processing_time

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        if s[0] >> o & 1:
            return True
        first = s[o]
        return first is not None and ctx.processing_time >= first + self.delay

    def _combine(self, mine: int | None, theirs: int | None) -> int | None:
        return _min(mine, theirs)

    @property
    def has_processing_time(self) -> bool:
        return True

    def __str__(self) -> str:
        return f"AfterProcessingTime({format_duration(self.delay)})"

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        first = s[o]
        if first is None or s[0] >> o & 1:
            return None
        due = first + self.delay
        return due if due > ctx.processing_time else None


@dataclass(frozen=True, repr=False)
class Always(_Leaf):
    """Holds whenever the window is evaluated; never finishes. Fires for every bundle."""

    clocks_by_end = True

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return True

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        pass

    @property
    def may_finish(self) -> bool:
        return False


@dataclass(frozen=True, repr=False)
class Never(_Leaf):
    """Never holds and never finishes: windows emit only their closing pane at expiry."""

    clocks_by_end = True

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return False

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        raise AssertionError("Never does not fire")

    @property
    def may_finish(self) -> bool:
        return False

    @property
    def fires_before_end_of_window(self) -> bool:
        return False


@dataclass(frozen=True, repr=False)
class Repeatedly(Trigger):
    """``Repeat(R)``: fires whenever ``R`` does; when ``R`` finishes its state is cleared and it
    starts over. Never finishes."""

    clocks_by_end = True

    trigger: Trigger

    def _subtriggers(self) -> tuple[Trigger, ...]:
        return (self.trigger,)

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        self.trigger.on_elements(s, o + 1, ctx, n)

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return self.trigger.should_fire(s, o + 1, ctx)

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        child = self.trigger
        child.on_fire(s, o + 1, ctx)
        if child.is_done(s, o + 1):
            child.reset(s, o + 1)

    def is_done(self, s: TriggerState, o: int) -> bool:
        return False

    def event_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        return self.trigger.event_wakeup(s, o + 1, ctx)

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        return self.trigger.processing_wakeup(s, o + 1, ctx)

    @property
    def may_finish(self) -> bool:
        return False

    @property
    def fires_before_end_of_window(self) -> bool:
        return self.trigger.fires_before_end_of_window


@dataclass(frozen=True, init=False, repr=False)
class _Composite(Trigger):
    """A node over a sequence of subtriggers that all see every element."""

    clocks_by_end = True

    triggers: tuple[Trigger, ...]

    def __init__(self, *triggers: Trigger) -> None:
        if not triggers:
            raise ValueError(f"{type(self).__name__} needs at least one trigger")
        object.__setattr__(self, "triggers", tuple(triggers))
        self.__post_init__()

    def _subtriggers(self) -> tuple[Trigger, ...]:
        return self.triggers

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        for child, rel in self.kids:
            child.on_elements(s, o + rel, ctx, n)

    def event_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        due = None
        for child, rel in self.kids:
            if not child.is_done(s, o + rel):
                due = _min(due, child.event_wakeup(s, o + rel, ctx))
        return due

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        due = None
        for child, rel in self.kids:
            if not child.is_done(s, o + rel):
                due = _min(due, child.processing_wakeup(s, o + rel, ctx))
        return due


@dataclass(frozen=True, init=False, repr=False)
class AfterAny(_Composite):
    """``AfterFirst(R1, R2, ...)``: holds when any subtrigger holds; ``next`` moves every ready
    subtrigger on; finished as soon as one subtrigger is."""

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return any(child.should_fire(s, o + rel, ctx) for child, rel in self.kids)

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        ready = [
            (child, o + rel)
            for child, rel in self.kids
            if not child.is_done(s, o + rel) and child.should_fire(s, o + rel, ctx)
        ]
        for child, at in ready:
            child.on_fire(s, at, ctx)

    def is_done(self, s: TriggerState, o: int) -> bool:
        return any(child.is_done(s, o + rel) for child, rel in self.kids)

    @property
    def may_finish(self) -> bool:
        return any(child.may_finish for child in self.triggers)

    @property
    def fires_before_end_of_window(self) -> bool:
        return any(child.fires_before_end_of_window for child in self.triggers)


AfterFirst = AfterAny


@dataclass(frozen=True, init=False, repr=False)
class AfterAll(_Composite):
    """``AfterAll(R1, R2, ...)``: holds when every subtrigger holds; ``next`` moves them all on;
    finished when all are."""

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return all(child.should_fire(s, o + rel, ctx) for child, rel in self.kids)

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        for child, rel in self.kids:
            if not child.is_done(s, o + rel):
                child.on_fire(s, o + rel, ctx)

    def is_done(self, s: TriggerState, o: int) -> bool:
        return all(child.is_done(s, o + rel) for child, rel in self.kids)

    @property
    def may_finish(self) -> bool:
        return all(child.may_finish for child in self.triggers)

    @property
    def fires_before_end_of_window(self) -> bool:
        return all(child.fires_before_end_of_window for child in self.triggers)


@dataclass(frozen=True, init=False, repr=False)
class AfterEach(_Composite):
    """``AfterEach(R1, R2, ...)``: behaves as its first unfinished subtrigger; finished when all
    are. Every subtrigger sees every element, so that a subtrigger that becomes active (also
    after a merge) already knows what its window received."""

    def _active(self, s: TriggerState, o: int) -> tuple[Trigger, int] | None:
        for child, rel in self.kids:
            if not child.is_done(s, o + rel):
                return child, o + rel
        return None

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        active = self._active(s, o)
        return active is None or active[0].should_fire(s, active[1], ctx)

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        active = self._active(s, o)
        if active is not None:
            active[0].on_fire(s, active[1], ctx)

    def is_done(self, s: TriggerState, o: int) -> bool:
        return self._active(s, o) is None

    def rewind(self, s: TriggerState, o: int) -> None:
        # AfterEach(rewind(R1), ..., rewind(Rk), restart(Rk+1), ...), where Rk is the first
        # subtrigger that is unfinished once rewound. (Taking Rk after rewinding makes rewind
        # idempotent, so merging a merged window again gives what one merge of all would.)
        active_found = False
        for child, rel in self.kids:
            if active_found:
                child.restart(s, o + rel)
            else:
                child.rewind(s, o + rel)
                active_found = not child.is_done(s, o + rel)

    def event_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        active = self._active(s, o)
        return None if active is None else active[0].event_wakeup(s, active[1], ctx)

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        active = self._active(s, o)
        return None if active is None else active[0].processing_wakeup(s, active[1], ctx)

    @property
    def may_finish(self) -> bool:
        return all(child.may_finish for child in self.triggers)

    @property
    def fires_before_end_of_window(self) -> bool:
        return self.triggers[0].fires_before_end_of_window


@dataclass(frozen=True, repr=False)
class OrFinally(Trigger):
    """``R1.orFinally(R2)``: fires when either holds and finishes when either finishes.

    ``trigger`` sees the elements since it last fired (its own ``next`` discards them);
    ``until`` keeps counting across the firings of ``trigger``.
    """

    clocks_by_end = True

    trigger: Trigger
    until: Trigger

    def _subtriggers(self) -> tuple[Trigger, ...]:
        return (self.trigger, self.until)

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        self.trigger.on_elements(s, o + 1, ctx, n)
        self.until.on_elements(s, o + self.offsets[1], ctx, n)

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        return self.trigger.should_fire(s, o + 1, ctx) or self.until.should_fire(
            s, o + self.offsets[1], ctx
        )

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        u = o + self.offsets[1]
        main_ready = not self.trigger.is_done(s, o + 1) and self.trigger.should_fire(s, o + 1, ctx)
        until_ready = not self.until.is_done(s, u) and self.until.should_fire(s, u, ctx)
        if main_ready:
            self.trigger.on_fire(s, o + 1, ctx)
        if until_ready:
            self.until.on_fire(s, u, ctx)

    def is_done(self, s: TriggerState, o: int) -> bool:
        return self.trigger.is_done(s, o + 1) or self.until.is_done(s, o + self.offsets[1])

    def event_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        return _min(
            self.trigger.event_wakeup(s, o + 1, ctx),
            self.until.event_wakeup(s, o + self.offsets[1], ctx),
        )

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        return _min(
            self.trigger.processing_wakeup(s, o + 1, ctx),
            self.until.processing_wakeup(s, o + self.offsets[1], ctx),
        )

    @property
    def may_finish(self) -> bool:
        return self.trigger.may_finish or self.until.may_finish

    @property
    def fires_before_end_of_window(self) -> bool:
        return self.trigger.fires_before_end_of_window or self.until.fires_before_end_of_window


@dataclass(frozen=True, repr=False)
class AfterWatermark(Trigger):
    """Fires when the watermark passes the end of the window (``EndOfWindow``), with optional
    repeated ``early`` firings before and repeated ``late`` firings after.

    Its own finished bit marks the late phase. The early trigger sees the elements that arrive
    before the end of the window fired, the late trigger those after. Without ``late`` it
    finishes when the end of the window fires.
    """

    clocks_by_end = True

    early: Trigger | None = None
    late: Trigger | None = None
    _early: Trigger | None = field(init=False, repr=False, compare=False)
    _late: Trigger | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_early", _repeat(self.early))
        object.__setattr__(self, "_late", _repeat(self.late))
        super().__post_init__()

    def _subtriggers(self) -> tuple[Trigger, ...]:
        return tuple(t for t in (self._early, self._late) if t is not None)

    def _late_at(self, o: int) -> int:
        return o + self.offsets[-1]

    def on_elements(self, s: TriggerState, o: int, ctx: TriggerContext, n: int) -> None:
        if s[0] >> o & 1:
            if self._late is not None:
                self._late.on_elements(s, self._late_at(o), ctx, n)
        elif self._early is not None:
            self._early.on_elements(s, o + 1, ctx, n)

    def should_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> bool:
        if s[0] >> o & 1:
            return self._late is None or self._late.should_fire(s, self._late_at(o), ctx)
        if ctx.past_end():
            return True
        return self._early is not None and self._early.should_fire(s, o + 1, ctx)

    def on_fire(self, s: TriggerState, o: int, ctx: TriggerContext) -> None:
        if s[0] >> o & 1:
            if self._late is not None:
                self._late.on_fire(s, self._late_at(o), ctx)
        elif ctx.past_end():
            s[0] |= 1 << o
            if self._early is not None:
                self._early.reset(s, o + 1)
        elif self._early is not None:
            self._early.on_fire(s, o + 1, ctx)

    def is_done(self, s: TriggerState, o: int) -> bool:
        return self._late is None and bool(s[0] >> o & 1)

    def rewind(self, s: TriggerState, o: int) -> None:
        if s[0] >> o & 1:
            s[0] &= ~(1 << o)
            if self._late is not None:
                self._late.reset(s, self._late_at(o))
        elif self._early is not None:
            self._early.rewind(s, o + 1)

    def merge_slots(self, s: TriggerState, o: int, other: TriggerState) -> None:
        if s[0] >> o & 1:
            if self._early is not None:
                self._early.reset(s, o + 1)
        elif self._early is not None:
            self._early.merge_slots(s, o + 1, other)
        # In either phase: a restart (AfterEach restarting the triggers after one that is
        # unfinished again) leaves the late phase but keeps the late trigger's element state,
        # and merging must combine it whichever state comes first.
        if self._late is not None:
            self._late.merge_slots(s, self._late_at(o), other)

    def event_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        if s[0] >> o & 1:
            late = self._late
            return None if late is None else late.event_wakeup(s, self._late_at(o), ctx)
        return ctx.end_wakeup()

    def processing_wakeup(self, s: TriggerState, o: int, ctx: TriggerContext) -> int | None:
        if s[0] >> o & 1:
            late = self._late
            return None if late is None else late.processing_wakeup(s, self._late_at(o), ctx)
        early = self._early
        return None if early is None else early.processing_wakeup(s, o + 1, ctx)

    @property
    def may_finish(self) -> bool:
        return self.late is None

    @property
    def has_ontime_pane(self) -> bool:
        return True

    @property
    def fires_before_end_of_window(self) -> bool:
        return self.early is not None and self.early.fires_before_end_of_window

    def __str__(self) -> str:
        phases = (("early", self.early), ("late", self.late))
        return f"AfterWatermark({', '.join(f'{k}={t}' for k, t in phases if t is not None)})"


def _repeat(trigger: Trigger | None) -> Trigger | None:
    if trigger is None or isinstance(trigger, Repeatedly):
        return trigger
    return Repeatedly(trigger)


@dataclass(frozen=True, init=False, repr=False)
class DefaultTrigger(Repeatedly):
    """``Repeatedly(AfterWatermark())``: one pane when the watermark passes the end of the
    window, then one per late bundle."""

    def __init__(self) -> None:
        object.__setattr__(self, "trigger", AfterWatermark())
        self.__post_init__()

    def __str__(self) -> str:
        return "DefaultTrigger()"


def merge_states(trigger: Trigger, states: Sequence[TriggerState], rewind: bool) -> TriggerState:
    """The trigger state of a window merged from windows with the given ``states``.

    ``further(rewind(R1), rewind(R2), ...)``: with ``rewind`` (the watermark has not passed the
    merged window's end) each state is rewound first; then a node is finished if it is finished
    in any state, and unfinished nodes combine their element summaries (counts add, earliest
    arrival times take the minimum). Commutative and associative; the inputs are not modified.
    """
    rewound = []
    for state in states:
        state = list(state)
        if rewind:
            trigger.rewind(state, ROOT)
        rewound.append(state)
    merged = rewound[0]
    for other in rewound[1:]:
        merged[0] |= other[0]
        trigger.merge_slots(merged, ROOT, other)
    return merged
