"""A combiner's accumulator as text and back, losslessly: what the pane log's and the view's
``accumulator`` column holds, so that discarding mode can fold aggregates whose value is not their
accumulator (a mean needs its sum and count, a sketch its bytes).

The text is JSON with every value that JSON does not hold exactly written as a one-member object
whose name says its type:

========================  ==================================================================
value                     text
========================  ==================================================================
``None``, bool, int,      themselves (a float's NaN and infinities as ``NaN``/``Infinity``,
float, str                which Python reads back)
tuple                     an array (an array is read back as a tuple, at any depth)
list                      ``{"$list": [...]}``
dict                      an object when every key is a string not starting with ``$``, else
                          ``{"$map": [[key, value], ...]}``
set, frozenset            ``{"$set": [...]}``, ``{"$frozenset": [...]}`` (members in the order
                          of their texts, so the same set is always the same text)
bytes, bytearray          ``{"$bytes": "<base64>"}``, ``{"$bytearray": "<base64>"}``
``Decimal``               ``{"$decimal": "1.10"}`` (its exact text)
date, datetime, time,     ``{"$date": ...}``, ``{"$datetime": ...}``, ``{"$time": ...}`` (ISO
timedelta                 text, an offset kept), ``{"$timedelta": [days, seconds, µs]}``
a NumPy scalar            the Python value it holds
========================  ==================================================================

Each type is exact: a subclass of one (a ``collections.Counter``, a named tuple, an enum member)
would come back as its plain base and is refused like any other type (say how it is stored,
below). A NumPy scalar comes back as the Python value it holds, which equals it.

Texts written before these tags existed (tuples and lists both arrays) read back as they did
then at an accumulator's first level (an array, a tuple); an array nested deeper, which read
back as a list, now reads back as a tuple (no built-in aggregate told them apart: a
``to_list`` of list values extracts the same list column from either).

A combiner whose accumulator holds anything else says how to store it: its
:meth:`~panes.combine_fn.CombineFn.accumulator_to_data` turns an accumulator into values of the
table above, :meth:`~panes.combine_fn.CombineFn.accumulator_from_data` back. An accumulator that
still holds another kind of value is refused (:class:`UnstorableAccumulator`, naming the
aggregate and the type), never stored as nothing.

>>> from panes.combiners import mean
>>> from decimal import Decimal
>>> text = to_text(mean("x"), (Decimal("1.10"), 2))
>>> text
'[{"$decimal":"1.10"},2]'
>>> from_text(mean("x"), text)
(Decimal('1.10'), 2)
>>> decode(encode((b"\\x01", {3, 1}, ["a"])))
(b'\\x01', {1, 3}, ['a'])
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

from panes.combine_fn import CombineFn, text_of


class UnstorableAccumulator(TypeError):
    """An accumulator holds a value that has no text (see the module doc): the message names
    the aggregate (``aggregate``), the value's type and what to do (``detail``)."""

    def __init__(self, detail: str, aggregate: str | None = None) -> None:
        self.detail, self.aggregate = detail, aggregate
        super().__init__(detail if aggregate is None else f"aggregate {aggregate}: {detail}")


_TAG = "$"


def _sorted_members(members: Any) -> list[Any]:
    encoded = [encode(m) for m in members]
    return sorted(encoded, key=lambda e: json.dumps(e, sort_keys=True))


_SCALARS = (bool, int, float, str)
_CONTAINERS = (tuple, list, dict, set, frozenset, bytes, bytearray, Decimal)
_TIMES = (dt.datetime, dt.date, dt.time, dt.timedelta)


def encode(value: Any) -> Any:
    """``value`` as JSON data (see the module doc); :class:`UnstorableAccumulator` (naming no
    aggregate: :func:`to_text` adds it) for a value of no listed type.

    The types are exact: a subclass (a ``collections.Counter``, a named tuple, an enum member)
    would read back as its plain base (a ``Counter`` as a dict, whose ``update`` replaces counts
    where the ``Counter``'s added them), so it is refused, not narrowed."""
    kind = type(value)
    if value is None or kind in _SCALARS:
        return value
    if kind is tuple:
        return [encode(v) for v in value]
    if kind is list:
        return {"$list": [encode(v) for v in value]}
    if kind is dict:
        if all(type(k) is str and not k.startswith(_TAG) for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"$map": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is frozenset:
        return {"$frozenset": _sorted_members(value)}
    if kind is set:
        return {"$set": _sorted_members(value)}
    if kind is bytes:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if kind is bytearray:
        return {"$bytearray": base64.b64encode(bytes(value)).decode("ascii")}
    if kind is Decimal:
        return {"$decimal": str(value)}
    if kind is dt.datetime:
        return {"$datetime": value.isoformat()}
    if kind is dt.date:
        return {"$date": value.isoformat()}
    if kind is dt.time:
        return {"$time": value.isoformat()}
    if kind is dt.timedelta:
        return {"$timedelta": [value.days, value.seconds, value.microseconds]}
    item = getattr(value, "item", None)  # a NumPy scalar: the Python value it holds
    if callable(item) and kind.__module__ == "numpy" and getattr(value, "shape", 1) == ():
        return encode(item())
    named = f"a {kind.__module__}.{kind.__qualname__}"
    base = next((b for b in (*_SCALARS, *_CONTAINERS, *_TIMES) if isinstance(value, b)), None)
    if base is not None:
        named += (
            f" (a subclass of {base.__name__}, which would read back as a plain {base.__name__})"
        )
    raise UnstorableAccumulator(named)


def _decode_tagged(tag: str, body: Any) -> Any:
    if tag == "$list":
        return [decode(v) for v in body]
    if tag == "$map":
        return {decode(k): decode(v) for k, v in body}
    if tag == "$set":
        return {decode(v) for v in body}
    if tag == "$frozenset":
        return frozenset(decode(v) for v in body)
    if tag == "$bytes":
        return base64.b64decode(body)
    if tag == "$bytearray":
        return bytearray(base64.b64decode(body))
    if tag == "$decimal":
        return Decimal(body)
    if tag == "$datetime":
        return dt.datetime.fromisoformat(body)
    if tag == "$date":
        return dt.date.fromisoformat(body)
    if tag == "$time":
        return dt.time.fromisoformat(body)
    if tag == "$timedelta":
        days, seconds, micros = body
        return dt.timedelta(days=days, seconds=seconds, microseconds=micros)
    raise ValueError(f"unknown accumulator tag {tag!r}")


def decode(data: Any) -> Any:
    """The value whose JSON data :func:`encode` gave."""
    if isinstance(data, list):
        return tuple(decode(v) for v in data)
    if isinstance(data, dict):
        if len(data) == 1:
            (name, body), *_ = data.items()
            if name.startswith(_TAG):
                return _decode_tagged(name, body)
        return {k: decode(v) for k, v in data.items()}
    return data


def _data(fn: CombineFn, acc: Any, name: str) -> Any:
    parts = getattr(fn, "fns", None)  # panes.combiners.Aggregates: a tuple, one per aggregate
    if parts is not None:
        return [_data(f, a, n) for (n, f), a in zip(parts.items(), acc, strict=True)]
    try:
        return encode(fn.accumulator_to_data(acc))
    except UnstorableAccumulator as e:
        raise UnstorableAccumulator(
            f"the accumulator of {text_of(fn)} holds {e.detail}, which the pane log cannot "
            f"store; give {type(fn).__qualname__} accumulator_to_data and accumulator_from_data "
            "methods that turn it into numbers, strings, bytes, tuples, lists, sets or dicts of "
            "them and back (docs/aggregates.md)",
            name,
        ) from None


def _accumulator(fn: CombineFn, data: Any) -> Any:
    parts = getattr(fn, "fns", None)
    if parts is not None:
        return tuple(_accumulator(f, d) for f, d in zip(parts.values(), data, strict=True))
    return fn.accumulator_from_data(data)


def to_text(fn: CombineFn, acc: Any, name: str = "value") -> str:
    """The text of ``fn``'s accumulator ``acc`` (of each aggregate's, for
    :class:`panes.combiners.Aggregates`); :class:`UnstorableAccumulator` names the aggregate
    (its column ``name``) when it holds a value of no listed type."""
    return json.dumps(_data(fn, acc, name), separators=(",", ":"))


def from_text(fn: CombineFn, text: str) -> Any:
    """``fn``'s accumulator whose text :func:`to_text` gave (also a text written before the
    type tags: see the module doc)."""
    return _accumulator(fn, decode(json.loads(text)))


__all__ = ["UnstorableAccumulator", "decode", "encode", "from_text", "to_text"]
