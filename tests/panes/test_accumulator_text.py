"""An accumulator's text (``panes.accumulator_text``): what the pane log's ``accumulator`` column
holds comes back exactly, whatever it holds, or is refused naming the aggregate — never null."""

from __future__ import annotations

import collections
import datetime as dt
import enum
import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panes import combiners
from panes.accumulator_text import UnstorableAccumulator, decode, encode, from_text, to_text
from panes.combine_fn import CombineFn
from tests.combiners_of_your_own import Seen, Trail

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**100), max_value=2**100)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.binary(max_size=8)
    | st.decimals(allow_nan=False, allow_infinity=False, places=3)
    | st.dates()
    | st.datetimes(timezones=st.none() | st.just(dt.timezone.utc)).map(lambda d: d.replace(fold=0))
    | st.timedeltas()
)
hashable = st.recursive(
    scalars.filter(lambda v: not isinstance(v, float) or v == v),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.sets(hashable, max_size=3)
        | st.frozensets(hashable, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(hashable, inner, max_size=3)
        | st.binary(max_size=4).map(bytearray)
    ),
    max_leaves=12,
)


def _typed(value: Any) -> Any:
    """``value`` with every type spelled out: ``1 == 1.0 == True`` and ``[1] != (1,)``."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, sorted(repr(_typed(v)) for v in value))
    if isinstance(value, dict):
        return ("dict", sorted(repr((_typed(k), _typed(v))) for k, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


@given(values)
def test_every_storable_value_comes_back_exactly(value):
    text = json.dumps(encode(value))
    assert _typed(decode(json.loads(text))) == _typed(value)


def test_the_values_json_cannot_hold():
    """Bytes inside a tuple (a sketch), a set, bytes, lists and tuples nested, keys that are
    not strings: each comes back as itself (JSON alone made them null or other things)."""
    cases = [
        (b"\x00\xff", 3),
        {"a", "b"},
        frozenset({1, 2}),
        b"\x01\x02",
        [(1, [2, (3,)]), []],
        {1: "one", (2, 3): {"$x": 4}},
        (float("inf"), -0.0),
        (dt.datetime(2024, 6, 1, 12, tzinfo=dt.timezone.utc), dt.time(1, 2), dt.timedelta(3)),
    ]
    for value in cases:
        assert _typed(decode(json.loads(json.dumps(encode(value))))) == _typed(value)


@pytest.mark.parametrize(
    "value",
    [
        collections.Counter({"a": 2}),
        collections.OrderedDict(a=1),
        collections.namedtuple("Pair", "a b")(1, 2),
        enum.IntEnum("Level", "LOW HIGH").LOW,
    ],
)
def test_a_subclass_is_refused_not_turned_into_its_base(value):
    """A ``Counter`` stored as a dict would come back a dict, and ``Counter() + dict`` fails
    the fold later: refused now, naming the type."""
    with pytest.raises(UnstorableAccumulator, match=type(value).__qualname__):
        encode(value)


def test_the_same_set_is_always_the_same_text():
    assert json.dumps(encode({"b", "a", "c"})) == json.dumps(encode({"c", "a", "b"}))


def test_texts_written_before_the_tags_read_as_before():
    """The pane log of an older lake: tuples and lists were both arrays, read as tuples."""
    fn = combiners.aggregates(avg=combiners.mean(), n=combiners.count())
    assert from_text(fn, '[[{"$decimal":"1.5"},2],7]') == ((Decimal("1.5"), 2), 7)


class Box:
    def __init__(self, n: int) -> None:
        self.n = n


class Boxed(CombineFn):
    """A user's combiner whose accumulator is an object of its own, no text declared."""

    def create(self):
        return Box(0)

    def add(self, acc, value):
        return Box(acc.n + 1)

    def merge(self, accs):
        return Box(sum(a.n for a in accs))

    def extract(self, acc):
        return acc.n


class BoxedWithText(Boxed):
    """The same, saying how its accumulator is stored."""

    def accumulator_to_data(self, acc):
        return acc.n

    def accumulator_from_data(self, data):
        return Box(data)


def test_users_combiners_with_sets_and_bytes_are_stored():
    fn = combiners.aggregates(users=Seen(), digest=Trail(), avg=combiners.mean())
    acc = fn.add_all(fn.create(), [3, 5, 3])
    assert from_text(fn, to_text(fn, acc)) == acc


def test_a_combiner_may_say_how_its_accumulator_is_stored():
    fn = BoxedWithText()
    acc = fn.add_all(fn.create(), [1, 2])
    assert from_text(fn, to_text(fn, acc)).n == 2


def test_an_accumulator_of_no_text_is_refused_naming_the_aggregate():
    fn = combiners.aggregates(avg=combiners.mean(), boxes=Boxed())
    with pytest.raises(UnstorableAccumulator) as e:
        to_text(fn, fn.create())
    message = str(e.value)
    assert "aggregate boxes" in message and "Box" in message and "\n" not in message
    assert "accumulator_to_data" in message


def test_a_subclass_of_a_storable_type_is_refused_not_narrowed():
    """A ``Counter`` read back as a plain dict would merge wrongly without a word (a dict's
    ``update`` replaces counts a Counter's adds); a named tuple would lose its names, an enum
    member its class. Each is refused naming its type and the base it would have become."""
    import collections
    import enum

    class Level(enum.IntEnum):
        LOW = 1

    pair = collections.namedtuple("pair", "low high")
    cases = [
        (collections.Counter("aab"), "collections.Counter (a subclass of dict"),
        (collections.OrderedDict(a=1), "collections.OrderedDict (a subclass of dict"),
        (pair(1, 2), "pair (a subclass of tuple"),
        (Level.LOW, "Level (a subclass of int"),
        ((1, [collections.Counter()]), "collections.Counter"),
    ]
    for value, named in cases:
        with pytest.raises(UnstorableAccumulator) as e:
            encode(value)
        assert named in str(e.value), str(e.value)


def test_a_numpy_scalar_is_stored_as_the_python_value_it_holds():
    np = pytest.importorskip("numpy")
    data = encode((np.float64(1.5), np.int64(3), np.bool_(True)))
    assert decode(json.loads(json.dumps(data))) == (1.5, 3, True)
