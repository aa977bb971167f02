"""The textual form of the model, as pipeline configurations write it: triggers, window functions
and aggregates.

Every trigger, window function and built-in aggregate prints its canonical form with ``str``, and
the parsers here read it back: ``parse_trigger(str(t)) == t``, ``parse_window(str(w)) == w`` and
``parse_aggregate(str(a)) == a``. A malformed trigger or aggregate raises a
:class:`ModelSyntaxError` (a ``ValueError``) naming the problem and showing where it is.

>>> t = parse_trigger("AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))")
>>> str(t)
'AfterWatermark(early=AfterProcessingTime(1m), late=AfterCount(1))'
>>> str(parse_window("FixedWindows(1h, offset=30m)"))
'FixedWindows(1h, 30m)'

Trigger grammar (white space is free between tokens)::

    trigger  := NAME "(" [ argument ("," argument)* ] ")"
    argument := [ NAME "=" ] ( trigger | DURATION | INTEGER )

Window functions are ``NAME "(" [ [NAME "="] DURATION ("," [NAME "="] DURATION)* ] ")"``.
Durations are a number and a unit, possibly repeated: ``250ms``, ``90s``, ``5m``, ``1h30m``.

Aggregates are ``NAME "(" [ FIELD ("," FIELD)* ] ")"``: a built-in combiner of
:mod:`panes.combiners` (``count()``, ``count(id)``, ``sum(seconds)``, ``mean(price)``,
``last(status)``, ...) over the values' ``FIELD`` (a name, dots allowed); ``max_by(page, seconds)``
and ``min_by`` name two fields, the value's and the one that orders the elements. Only ``count``
goes without a field. The
sketch aggregates (:mod:`panes.sketches`) take a field and their parameters::

    approx_count_distinct(user_id)          approx_count_distinct(user_id, lg_k=14)
    approx_quantiles(latency, [0.5, 0.99])  approx_percentile(latency, 0.95)
    top_k(page, 10)

and, over an upstream pipeline's sketch column, ``merge(COLUMN)`` in place of the field merges
its sketches (:class:`panes.sketches.MergeSketches`): ``approx_count_distinct(merge(users))``.
Any of them may be followed by ``filter (CONDITION)`` (or SQL's ``filter (where CONDITION)``): a
filtered aggregate (:class:`panes.combiners.Filtered`) over the records whose condition
(:mod:`panes.conditions`) is TRUE: ``count() filter (status = 'error')``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from panes.combiners import AGGREGATES, CombineFn, Filtered
from panes.conditions import ConditionSyntaxError, parse_condition
from panes.time import parse_duration
from panes.tokens import Token, tokenize
from panes.triggers import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    Always,
    DefaultTrigger,
    Never,
    OrFinally,
    Repeatedly,
    Trigger,
)
from panes.windowfns import FixedWindows, GlobalWindows, Sessions, SlidingWindows, WindowFn


class ModelSyntaxError(ValueError):
    """Malformed model text; ``position`` is the offending character's index, and the message
    shows an excerpt of ``text`` with a caret under it."""

    def __init__(self, message: str, text: str, position: int) -> None:
        self.message, self.text, self.position = message, text, position
        lo = max(0, position - 40)
        shown = (
            ("..." if lo else "")
            + text[lo : position + 40]
            + ("..." if len(text) > position + 40 else "")
        )
        caret = position - lo + (3 if lo else 0)
        super().__init__(f"{message} at position {position}:\n  {shown}\n  {' ' * caret}^")


class TriggerSyntaxError(ModelSyntaxError):
    """A malformed trigger expression."""


class AggregateSyntaxError(ModelSyntaxError):
    """A malformed or unknown aggregate."""


_TOKEN = re.compile(
    r"\s*(?:(?P<duration>\d+(?:us|ms|s|m|h|d)(?:\d+(?:us|ms|s|m|h|d))*)(?![\w])"
    r"|(?P<int>\d+)(?![\w])|(?P<name>[A-Za-z_]\w*)|(?P<punct>[(),=]))"
)


@dataclass(frozen=True)
class _Argument:
    keyword: str | None
    value: object  # Trigger | int (count) | _Duration
    position: int  # of the value
    start: int  # of the argument: its keyword, if it has one


@dataclass(frozen=True)
class _Duration:
    micros: int


def _unexpected(text: str, at: int) -> TriggerSyntaxError:
    return TriggerSyntaxError(f"unexpected character {text[at]!r}", text, at)


MAX_TRIGGER_DEPTH = 64
"""How deep triggers may nest in text: far beyond any real trigger, well within recursion limits."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(_TOKEN, text, _unexpected)
        self.i = 0
        self.depth = 0

    def error(self, message: str, token: Token | None = None) -> TriggerSyntaxError:
        token = token or self.tokens[self.i]
        return TriggerSyntaxError(message, self.text, token.position)

    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        token = self.peek()
        if token.kind != kind or (text is not None and token.text != text):
            found = "the end" if token.kind == "end" else repr(token.text)
            raise self.error(f"expected {what or repr(text) or kind}, found {found}")
        self.i += 1
        return token

    def parse(self) -> Trigger:
        trigger = self.trigger()
        if self.peek().kind != "end":
            raise self.error(f"unexpected {self.peek().text!r} after the trigger")
        return trigger

    def trigger(self) -> Trigger:
        name = self.take("name", what="a trigger name")
        self.depth += 1
        if self.depth > MAX_TRIGGER_DEPTH:
            raise self.error(f"triggers nest at most {MAX_TRIGGER_DEPTH} deep", name)
        build = _BUILDERS.get(name.text)
        if build is None:
            close = difflib.get_close_matches(name.text, _BUILDERS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise self.error(f"unknown trigger {name.text!r}{hint}", name)
        self.take("punct", "(")
        args: list[_Argument] = []
        if not (self.peek().kind == "punct" and self.peek().text == ")"):
            args.append(self.argument())
            while self.peek().kind == "punct" and self.peek().text == ",":
                self.i += 1
                args.append(self.argument())
        self.take("punct", ")", what="',' or ')'")
        self.depth -= 1
        return build(self, name, args)

    def argument(self) -> _Argument:
        start = self.peek()
        keyword = None
        at = start.position
        nxt = self.tokens[self.i + 1]
        if start.kind == "name" and nxt.kind == "punct" and nxt.text == "=":
            keyword = start.text
            self.i += 2
        token = self.peek()
        if token.kind == "duration":
            self.i += 1
            return _Argument(keyword, _Duration(parse_duration(token.text)), token.position, at)
        if token.kind == "int":
            self.i += 1
            return _Argument(keyword, int(token.text), token.position, at)
        if token.kind == "name":
            return _Argument(keyword, self.trigger(), token.position, at)
        raise self.error("expected a trigger, a duration or a count", token)


_Builder = Callable[[_Parser, Token, list[_Argument]], Trigger]


def _signature(
    keywords: tuple[str, ...], kinds: tuple[type, ...], required: int, variadic: bool = False
) -> Callable[[Callable[..., Trigger]], _Builder]:
    """Bind parsed arguments to a constructor. A variadic constructor takes positional
    triggers only; the others take their arguments by position or by keyword."""

    def wrap(construct: Callable[..., Trigger]) -> _Builder:
        def build(parser: _Parser, name: Token, args: list[_Argument]) -> Trigger:
            def fail(
                message: str, arg: _Argument | None = None, at_keyword: bool = False
            ) -> TriggerSyntaxError:
                if arg is None:
                    return parser.error(message, parser.tokens[parser.i - 1])
                position = arg.start if at_keyword else arg.position
                return parser.error(message, Token("", "", position))

            if variadic:
                for arg in args:
                    if arg.keyword is not None:
                        raise fail(f"{name.text} takes no keyword arguments", arg, at_keyword=True)
                if len(args) < required:
                    raise fail(f"{name.text} needs at least {required} trigger(s)")
                values = [_check(parser, name, arg, kinds[0]) for arg in args]
                return _construct(parser, name, args, construct, *values)
            bound: dict[str, object] = {}
            for i, arg in enumerate(args):
                if arg.keyword is None:
                    if i >= len(keywords):
                        raise fail(f"{name.text} takes at most {len(keywords)} argument(s)", arg)
                    if any(a.keyword is not None for a in args[:i]):
                        raise fail("positional argument after a keyword argument", arg)
                    keyword = keywords[i]
                elif arg.keyword not in keywords:
                    raise fail(f"{name.text} has no argument {arg.keyword!r}", arg, at_keyword=True)
                elif arg.keyword in bound:
                    raise fail(f"argument {arg.keyword!r} given twice", arg)
                else:
                    keyword = arg.keyword
                bound[keyword] = _check(parser, name, arg, kinds[keywords.index(keyword)])
            if len(bound) < required:
                raise fail(f"{name.text} needs {required} argument(s)")
            return _construct(parser, name, args, construct, **bound)

        return build

    return wrap


def _construct(
    parser: _Parser,
    name: Token,
    arguments: list[_Argument],
    construct: Callable[..., Trigger],
    *args: object,
    **kwargs: object,
) -> Trigger:
    """Build the trigger; a value the constructor rejects is reported at the (first) argument."""
    try:
        return construct(*args, **kwargs)
    except (TypeError, ValueError) as e:
        at = Token("", "", arguments[0].position) if arguments else name
        raise parser.error(str(e), at) from None


def _check(parser: _Parser, name: Token, arg: _Argument, kind: type) -> object:
    value = arg.value
    if kind is _Duration and isinstance(value, _Duration):
        return value.micros
    if kind is int and isinstance(value, int):
        return value
    if kind is Trigger and isinstance(value, Trigger):
        return value
    expected = {Trigger: "a trigger", int: "a count", _Duration: "a duration like 90s"}[kind]
    raise parser.error(f"{name.text} expects {expected} here", Token("", "", arg.position))


_BUILDERS: dict[str, _Builder] = {
    "AfterWatermark": _signature(("early", "late"), (Trigger, Trigger), 0)(AfterWatermark),
    "AfterCount": _signature(("count",), (int,), 1)(AfterCount),
    "AfterProcessingTime": _signature(("delay",), (_Duration,), 1)(AfterProcessingTime),
    "Repeatedly": _signature(("trigger",), (Trigger,), 1)(Repeatedly),
    "OrFinally": _signature(("trigger", "until"), (Trigger, Trigger), 2)(OrFinally),
    "AfterEach": _signature(("triggers",), (Trigger,), 1, variadic=True)(AfterEach),
    "AfterAny": _signature(("triggers",), (Trigger,), 1, variadic=True)(AfterAny),
    "AfterFirst": _signature(("triggers",), (Trigger,), 1, variadic=True)(AfterAny),
    "AfterAll": _signature(("triggers",), (Trigger,), 1, variadic=True)(AfterAll),
    "Always": _signature((), (), 0)(Always),
    "Never": _signature((), (), 0)(Never),
    "DefaultTrigger": _signature((), (), 0)(DefaultTrigger),
}


def parse_trigger(text: str) -> Trigger:
    """Parse the textual form of a trigger; raises :class:`TriggerSyntaxError` (a
    ``ValueError``) pointing at the offending position."""
    return _Parser(text).parse()


# -- window functions -------------------------------------------------------------------------

_WINDOW = re.compile(r"\s*([A-Za-z]+)\s*\((.*)\)\s*")
# name -> (class, parameters in positional order, how many are required)
_WINDOW_SIGNATURES: dict[str, tuple[type[WindowFn], tuple[str, ...], int]] = {
    "FixedWindows": (FixedWindows, ("size", "offset"), 1),
    "SlidingWindows": (SlidingWindows, ("size", "period", "offset"), 2),
    "Sessions": (Sessions, ("gap",), 1),
    "GlobalWindows": (GlobalWindows, (), 0),
}


def parse_window(text: str) -> WindowFn:
    """``FixedWindows(1m)``, ``FixedWindows(1h, offset=30m)``, ``SlidingWindows(10m, 1m)``,
    ``Sessions(30m)``, ``GlobalWindows()`` -> the window function (``str()`` gives it back).
    Raises ``ValueError`` naming what is wrong."""
    m = _WINDOW.fullmatch(text)
    if m is None or m.group(1) not in _WINDOW_SIGNATURES:
        known = ", ".join(f"{n}(...)" for n in _WINDOW_SIGNATURES)
        raise ValueError(f"not a window function: {text!r} (expected one of {known})")
    name, body = m.groups()
    cls, params, required = _WINDOW_SIGNATURES[name]
    args: dict[str, int] = {}
    parts = [p.strip() for p in body.split(",")] if body.strip() else []
    for i, part in enumerate(parts):
        if "=" in part:
            pname, _, value = (s.strip() for s in part.partition("="))
        elif i < len(params):
            pname, value = params[i], part
        else:
            raise ValueError(f"{name} takes at most {len(params)} arguments: {text!r}")
        if pname not in params or pname in args:
            raise ValueError(f"{name}: unexpected or repeated argument {pname!r} in {text!r}")
        args[pname] = parse_duration(value)
    missing = [p for p in params[:required] if p not in args]
    if missing:
        raise ValueError(f"{name} needs {', '.join(params[:required])}: {text!r}")
    return cls(**args)


# -- aggregates -------------------------------------------------------------------------------

_AGGREGATE_NAME = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)")
_AGGREGATE_FIELD = re.compile(r"\s*(?P<field>[A-Za-z_][\w.]*)")
_PUNCT = {c: re.compile(rf"\s*\{c}") for c in "(),"}
_AGGREGATE_END = re.compile(r"\s*$")
_FILTER_AFTER = re.compile(r"\)\s*filter\s*\(\s*(?:where\b)?", re.IGNORECASE)


def parse_aggregate(text: str) -> CombineFn:
    """Parse ``count()``, ``sum(seconds)``, ``mean(price)``, ``to_list(id)``, ``last(status)``,
    ``max_by(page, seconds)``, ... (``str()`` of the combiner gives it back); raises
    :class:`AggregateSyntaxError` (a ``ValueError``) pointing at the offending position.

    >>> parse_aggregate("sum(seconds)"), parse_aggregate("max_by(page, seconds)")
    (sum(seconds), max_by(page, seconds))
    >>> parse_aggregate("count() FILTER (WHERE status = 'error')")
    count() filter (status = 'error')
    """
    where = _FILTER_AFTER.search(text)
    if where is None:
        return _parse_unfiltered(text)
    aggregate = _parse_unfiltered(text[: where.start() + 1])
    body = text[where.end() :].rstrip()
    if not body.endswith(")"):
        raise AggregateSyntaxError(
            "expected ')' closing the filter's condition", text, where.end() + len(body)
        )
    try:
        condition = parse_condition(body[:-1])
    except ConditionSyntaxError as e:
        raise AggregateSyntaxError(e.message, text, where.end() + e.position) from None
    try:
        return Filtered(aggregate, condition)
    except TypeError as e:
        raise AggregateSyntaxError(str(e), text, where.start()) from None


def _parse_unfiltered(text: str) -> CombineFn:
    """An aggregate's text without a filter: its class found by its spelling in the registry
    (:data:`panes.combiners.AGGREGATES`), its arguments read as the class declares them (its
    :attr:`~panes.combiners.CombineFn.arguments`, or :attr:`~panes.combiners.CombineFn.arity`
    columns)."""
    head = _ARGUMENTS_HEAD.match(text)
    if head is not None:
        cls = AGGREGATES.get(head.group("name"))
        if cls is not None and cls.arguments is not None:
            return _parse_arguments(text, head, cls)
    pos = 0

    def fail(what: str) -> AggregateSyntaxError:
        at = len(text) - len(text[pos:].lstrip())
        seen = repr(text[at : at + 10]) if at < len(text) else "the end"
        return AggregateSyntaxError(f"not an aggregate: expected {what}, found {seen}", text, at)

    def take(pattern: re.Pattern[str]) -> re.Match[str] | None:
        nonlocal pos
        match = pattern.match(text, pos)
        if match is not None:
            pos = match.end()
        return match

    found = take(_AGGREGATE_NAME)
    if found is None:
        raise fail("an aggregate name like sum")
    name, at = found.group("name"), found.start("name")
    if take(_PUNCT["("]) is None:
        raise fail("'('")
    fields: list[tuple[str, int]] = []  # (field, position of the comma before it, or its own)
    field = take(_AGGREGATE_FIELD)
    if field is not None:
        fields.append((field.group("field"), field.start("field")))
        while (comma := take(_PUNCT[","])) is not None:
            field = take(_AGGREGATE_FIELD)
            if field is None:
                raise fail("a field name")
            fields.append((field.group("field"), comma.start() + comma.group().index(",")))
    if take(_PUNCT[")"]) is None:
        raise fail("')'" if fields else "a field name or ')'")
    if take(_AGGREGATE_END) is None:
        raise fail("the end")
    fn = AGGREGATES.get(name)
    if fn is None:
        names = list(AGGREGATES)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        known = ", ".join(f"{n}()" for n in names)
        raise AggregateSyntaxError(f"unknown aggregate {name!r}{hint}; known: {known}", text, at)
    if len(fields) > fn.arity:
        many = "one field" if fn.arity == 1 else f"{fn.arity} fields"
        raise AggregateSyntaxError(f"{name}() takes {many}", text, fields[fn.arity][1])
    if not fields and fn.field_optional:
        return fn()
    if len(fields) < fn.arity:
        if fn.arity == 1:
            raise AggregateSyntaxError(f"{name}() needs a field, e.g. {name}(seconds)", text, at)
        raise AggregateSyntaxError(
            f"{name}() needs two fields, the value's and the one that orders the elements, "
            f"e.g. {name}(page, seconds)",
            text,
            at,
        )
    return fn(*(f for f, _ in fields))


_ARGUMENTS_HEAD = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)\s*\(")


def _parse_arguments(text: str, head: re.Match[str], cls: type[CombineFn]) -> CombineFn:
    """The text of an aggregate whose class declares its arguments' pattern (a sketch,
    :mod:`panes.sketches`; ``merge(COLUMN)`` in place of its column merges an upstream's
    sketches)."""
    pattern = cls.arguments
    assert pattern is not None
    match = pattern.match(text, head.end())
    at = len(text) - len(text[head.end() :].lstrip())
    if match is None:
        raise AggregateSyntaxError(
            f"malformed {cls.name}(...): write e.g. {' or '.join(cls.examples)}", text, at
        )
    try:
        return cls.from_arguments(match.groupdict())
    except ValueError as e:
        raise AggregateSyntaxError(str(e), text, at) from None
