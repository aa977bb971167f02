"""Sketch aggregates: approximate distinct counts, quantiles and frequent items, as combiners.

Each is a :class:`~panes.combiners.CombineFn` over one field whose accumulator is an immutable
value holding an Apache DataSketches sketch in its compact serialized form (``bytes``): the
cross-language format that Spark's own sketch functions read. ``merge`` is the sketch's union
(merge); there is no ``retract`` (a sketch forgets which values it holds). The output value is
a mapping holding the answer and the sketch (the lake writes it as one struct column), and the
sketch in it is the accumulator again (``value_is_accumulator``): the panes of a window in
discarding mode fold by merging their sketches into the sketch of all its elements.

* ``approx_count_distinct(field, lg_k=12)``: an HLL sketch (``HLL_8``, ``lg_k`` as Spark's
  ``hll_sketch_agg``); the value ``{"estimate": long, "sketch": bytes}``.
* ``approx_quantiles(field, [0.5, 0.99])`` / ``approx_percentile(field, 0.95)``: a KLL doubles
  sketch (``k = 200``, Spark's default); values are read as doubles (integers too). The value
  ``{"quantiles": [double], "sketch": bytes}`` / ``{"quantile": double, "sketch": bytes}``;
  quantiles are *inclusive* (as Spark's ``kll_sketch_get_quantile_double``).
* ``top_k(field, k)``: a frequent-items sketch of strings or integers; the value
  ``{"items": [{"item": x, "count": long}], "sketch": bytes}``, the ``k`` items of the highest
  estimated counts, count descending, then item ascending.

``None`` inputs are skipped, as SQL does. A window all of whose values are ``None`` answers an
estimate 0, quantile(s) ``None`` (null) and no items, with the empty sketch.

Answers are approximate: :meth:`SketchFn.agrees` is the one rule telling two answers of the same
elements apart from a difference (the verifier's tolerance), exact where the sketches are exact.

>>> from panes.combiners import approx_count_distinct
>>> fn = approx_count_distinct("user")
>>> acc = fn.add_all(fn.create(), [{"user": "a"}, {"user": "b"}, {"user": "a"}, {"user": None}])
>>> fn.extract(acc)["estimate"]
2
>>> str(fn)
'approx_count_distinct(user)'

DataSketches (and numpy, which it imports) is imported only when a sketch is built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from panes.combine_fn import AggregateTypeError, Column, CombineFn, Glance

DEFAULT_LG_K = 12
"""HLL sketches' log2 of the number of registers: Spark's ``hll_sketch_agg`` default."""
KLL_K = 200
"""KLL sketches' ``k``: Spark's ``kll_sketch_agg_double`` default (rank error about 1.3%)."""
HLL_STD_DEVS = 3
"""How many standard errors apart two HLL estimates of the same elements may be, each side."""

_HLL_MODE_OFFSET = 7  # the HLL preamble byte holding the mode (low 2 bits: 0 list, 1 set, 2 HLL)


_FIELD = r"\s*(?:(?P<merge>merge)\s*\(\s*)?(?P<field>[A-Za-z_][\w.]*)\s*(?(merge)\)\s*)"
"""A sketch's first argument: its column, or ``merge(COLUMN)`` (:class:`MergeSketches`)."""
_NUMBER = r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"

HLL_TYPE = "struct<estimate: long, sketch: binary>"
"""The output type of :class:`ApproxCountDistinct`: the lake's struct of its answer."""
QUANTILE_TYPE = "struct<quantile: double, sketch: binary>"
"""The output type of :class:`ApproxPercentile`."""
QUANTILES_TYPE = "struct<quantiles: list<double>, sketch: binary>"
"""The output type of :class:`ApproxQuantiles`."""


def _lib() -> Any:
    import datasketches

    return datasketches


class SketchFn(CombineFn):
    """A sketch aggregate over ``value[field]`` (or the whole value without a field)."""

    value_is_accumulator = True
    #: The output types of the sketch columns ``merge(...)`` of it reads (an upstream's answers
    #: of the same sketch); empty: its sketches are not merged so (:class:`MergeSketches`).
    merges: ClassVar[tuple[str, ...]] = ()
    #: Its output type, where it does not depend on its column's (the struct of its answer).
    struct_type: ClassVar[str] = ""

    def __init__(self, field: str | None) -> None:
        self.field = field

    @classmethod
    def from_arguments(cls, groups: Mapping[str, str | None]) -> SketchFn:
        """Its text's arguments (:meth:`of_arguments`); ``merge(COLUMN)`` in place of the column
        merges an upstream's sketches of it (:class:`MergeSketches`)."""
        fn = cls.of_arguments(groups["field"], groups)
        return fn if groups.get("merge") is None else MergeSketches(fn)

    @classmethod
    def of_arguments(cls, field: str | None, groups: Mapping[str, str | None]) -> SketchFn:
        """The sketch over ``field`` of its text's other arguments (``groups``)."""
        raise NotImplementedError

    def _column(self, columns: Mapping[str, Column]) -> tuple[str, str]:
        """The column it reads and its type name."""
        if self.field is None:
            raise AggregateTypeError(f"{self!r} needs a column, e.g. {self.name}(user_id, ...)")
        return self.field, columns[self.field].type

    def _strings_or_integers(self, columns: Mapping[str, Column]) -> Column:
        name, typ = self._column(columns)
        column = columns[name]
        if typ != "string" and not column.integral:
            raise AggregateTypeError(
                f"{self.name}() counts strings or integers, column {name!r} is {typ}"
            )
        return column

    @property
    def fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.field,) if self.field else ()

    def _inputs(self, values: Iterable[Any]) -> list[Any]:
        field = self.field
        if field is None:
            return [v for v in values if v is not None]
        return [v[field] for v in values if v[field] is not None]

    def add(self, acc: Any, value: Any) -> Any:
        return self.add_all(acc, (value,))

    def _args(self) -> str:
        return self.field or ""

    def __repr__(self) -> str:
        return f"{self.name}({self._args()})"

    def _key(self) -> tuple:
        return (type(self), self.field)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SketchFn) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def value_as_accumulator(self, value: Any) -> Any:
        """The sketch of an output value (a mapping with ``sketch``; None: no values)."""
        if value is None or value.get("sketch") is None:
            return self.create()
        return bytes(value["sketch"])

    def agrees(self, expected: Any, actual: Any) -> bool:
        """Whether two output values of the same elements agree within the sketch's error
        bound (exact where the sketch is exact); the verifier's tolerance."""
        raise NotImplementedError


# -- distinct counts -------------------------------------------------------------------------


class ApproxCountDistinct(SketchFn):
    """Distinct values by an HLL sketch (``HLL_8``, ``2**lg_k`` registers).

    Exact while the sketch is in its list or set mode (up to ``3 * 2**lg_k / 32`` distinct
    values, 384 for ``lg_k`` 12: the estimate rounds to the exact count); beyond, its relative
    standard error is about ``1.04 / sqrt(2**lg_k)`` (1.6% for ``lg_k`` 12).
    """

    name = "approx_count_distinct"
    examples = ("approx_count_distinct(user_id)", "approx_count_distinct(user_id, lg_k=14)")
    arguments = re.compile(_FIELD + r"(?:,\s*lg_k\s*=\s*(?P<lg_k>\d+)\s*)?\)\s*$")
    merges = (HLL_TYPE,)
    struct_type = HLL_TYPE
    glance = Glance(
        "`approx_count_distinct(col[, lg_k=12])`",
        "strings, integers",
        f"`{HLL_TYPE}` (HLL)",
        "within its bound",
        "lifted",
        refusal="; `approx_count_distinct(merge(col))` reads them (`merge`, below)",
    )

    @classmethod
    def of_arguments(
        cls, field: str | None, groups: Mapping[str, str | None]
    ) -> ApproxCountDistinct:
        lg_k = groups["lg_k"]
        return cls(field) if lg_k is None else cls(field, int(lg_k))

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """:data:`HLL_TYPE`, over strings or integers."""
        self._strings_or_integers(columns)
        return self.struct_type

    def __init__(self, field: str | None, lg_k: int = DEFAULT_LG_K) -> None:
        if not 4 <= lg_k <= 21:
            raise ValueError(f"approx_count_distinct: lg_k must be 4..21, not {lg_k}")
        super().__init__(field)
        self.lg_k = lg_k

    def _args(self) -> str:
        extra = "" if self.lg_k == DEFAULT_LG_K else f", lg_k={self.lg_k}"
        return f"{self.field or ''}{extra}"

    def _key(self) -> tuple:
        return (*super()._key(), self.lg_k)

    def create(self) -> bytes:
        ds = _lib()
        return bytes(ds.hll_sketch(self.lg_k, ds.HLL_8).serialize_compact())

    def add_all(self, acc: bytes, values: Sequence[Any]) -> bytes:
        inputs = self._inputs(values)
        if not inputs:
            return acc
        sketch = _lib().hll_sketch.deserialize(acc)
        for v in inputs:
            sketch.update(v)
        return bytes(sketch.serialize_compact())

    def merge(self, accs: Sequence[bytes]) -> bytes:
        if len(accs) == 1:
            return accs[0]
        ds = _lib()
        union = ds.hll_union(self.lg_k)
        for acc in accs:
            union.update(ds.hll_sketch.deserialize(acc))
        return bytes(union.get_result(ds.HLL_8).serialize_compact())

    def extract(self, acc: bytes) -> dict[str, Any]:
        estimate = _lib().hll_sketch.deserialize(acc).get_estimate()
        return {"estimate": round(estimate), "sketch": acc}

    def agrees(self, expected: Any, actual: Any) -> bool:
        """Equal estimates while both sketches are exact (list or set mode); otherwise within
        :data:`HLL_STD_DEVS` standard errors of each sketch (the union's, the larger) of the
        larger estimate, each side."""
        if expected is None or actual is None:
            return expected is actual
        e, a = expected["estimate"], actual["estimate"]
        if not (_hll_estimating(expected["sketch"]) or _hll_estimating(actual["sketch"])):
            return bool(e == a)
        hll = _lib().hll_sketch
        rel = max(abs(hll.get_rel_err(up, True, self.lg_k, HLL_STD_DEVS)) for up in (True, False))
        return abs(e - a) <= 2 * rel * max(e, a) + 1


def _hll_estimating(sketch: bytes) -> bool:
    """Whether a compact HLL sketch is in its HLL mode (its estimate no longer exact)."""
    return len(sketch) > _HLL_MODE_OFFSET and sketch[_HLL_MODE_OFFSET] & 3 == 2


# -- quantiles -------------------------------------------------------------------------------


class ApproxQuantiles(SketchFn):
    """Quantiles by a KLL doubles sketch: the value at each normalized rank (inclusive).

    Exact while the sketch holds every value (``n <= k``); beyond, a quantile's rank is within
    the sketch's normalized rank error (``get_normalized_rank_error``, 1.33% for k 200) of the
    asked rank, with 99% confidence.
    """

    name = "approx_quantiles"
    examples = ("approx_quantiles(latency, [0.5, 0.95, 0.99])",)
    arguments = re.compile(
        _FIELD + rf",\s*\[\s*(?P<ranks>(?:{_NUMBER})(?:\s*,\s*(?:{_NUMBER}))*)\s*\]\s*\)\s*$"
    )
    merges = (QUANTILE_TYPE, QUANTILES_TYPE)
    struct_type = QUANTILES_TYPE
    glance = Glance(
        "`approx_quantiles(col, [r, ...])`, `approx_percentile(col, r)`",
        "integers, floats",
        f"`{QUANTILES_TYPE}`, `{QUANTILE_TYPE}` (KLL)",
        "within its bound",
        "lifted",
        refusal="; `...(merge(col), ...)` reads them (`merge`, below)",
    )

    @classmethod
    def of_arguments(cls, field: str | None, groups: Mapping[str, str | None]) -> ApproxQuantiles:
        return cls(field, [float(r) for r in (groups["ranks"] or "").split(",")])

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """:attr:`struct_type`, over integers or floating-point numbers."""
        name, typ = self._column(columns)
        column = columns[name]
        if not column.numeric or column.scale is not None:
            raise AggregateTypeError(
                f"{self.name}() needs an integer or floating-point column, {name!r} is {typ}"
            )
        return self.struct_type

    def __init__(self, field: str | None, ranks: Sequence[float]) -> None:
        ranks = tuple(float(r) for r in ranks)
        if not ranks or any(not 0.0 <= r <= 1.0 for r in ranks):
            raise ValueError(f"{self.name}: ranks must be 0..1, at least one: {list(ranks)}")
        super().__init__(field)
        self.ranks = ranks

    def _args(self) -> str:
        return f"{self.field or ''}, [{', '.join(map(repr, self.ranks))}]"

    def _key(self) -> tuple:
        return (*super()._key(), self.ranks)

    def create(self) -> bytes:
        return bytes(_lib().kll_doubles_sketch(KLL_K).serialize())

    def add_all(self, acc: bytes, values: Sequence[Any]) -> bytes:
        inputs = self._inputs(values)
        if not inputs:
            return acc
        sketch = _lib().kll_doubles_sketch.deserialize(acc)
        for v in inputs:
            sketch.update(float(v))
        return bytes(sketch.serialize())

    def merge(self, accs: Sequence[bytes]) -> bytes:
        if len(accs) == 1:
            return accs[0]
        kll = _lib().kll_doubles_sketch
        sketch = kll.deserialize(accs[0])
        for acc in accs[1:]:
            sketch.merge(kll.deserialize(acc))
        return bytes(sketch.serialize())

    def _quantiles(self, acc: bytes) -> list[float] | None:
        sketch = _lib().kll_doubles_sketch.deserialize(acc)
        if sketch.is_empty():
            return None
        return [float(sketch.get_quantile(r, True)) for r in self.ranks]

    def extract(self, acc: bytes) -> dict[str, Any]:
        return {"quantiles": self._quantiles(acc), "sketch": acc}

    def _answers(self, value: Mapping[str, Any]) -> list[float] | None:
        return value["quantiles"]

    def agrees(self, expected: Any, actual: Any) -> bool:
        """Equal quantiles while both sketches are exact; otherwise each actual quantile's rank
        in the expected sketch is within both sketches' rank errors (99% confidence each) of
        the asked rank: exclusive rank - error <= rank <= inclusive rank + error."""
        if expected is None or actual is None:
            return expected is actual
        qe, qa = self._answers(expected), self._answers(actual)
        if qe is None or qa is None:
            return qe is qa
        kll = _lib().kll_doubles_sketch
        se, sa = (
            kll.deserialize(bytes(expected["sketch"])),
            kll.deserialize(bytes(actual["sketch"])),
        )
        if not (se.is_estimation_mode() or sa.is_estimation_mode()):
            return bool(qe == qa)
        err = se.normalized_rank_error(False) + sa.normalized_rank_error(False)
        return all(
            se.get_rank(x, False) - err <= r <= se.get_rank(x, True) + err
            for r, x in zip(self.ranks, qa, strict=True)
        )


class ApproxPercentile(ApproxQuantiles):
    """One quantile by a KLL doubles sketch: ``approx_percentile(latency, 0.95)``."""

    name = "approx_percentile"
    examples = ("approx_percentile(latency, 0.95)",)
    arguments = re.compile(_FIELD + rf",\s*(?P<rank>{_NUMBER})\s*\)\s*$")
    struct_type = QUANTILE_TYPE

    @classmethod
    def of_arguments(cls, field: str | None, groups: Mapping[str, str | None]) -> ApproxPercentile:
        return cls(field, float(groups["rank"] or ""))

    def __init__(self, field: str | None, rank: float) -> None:
        super().__init__(field, (rank,))

    def _args(self) -> str:
        return f"{self.field or ''}, {self.ranks[0]!r}"

    def extract(self, acc: bytes) -> dict[str, Any]:
        quantiles = self._quantiles(acc)
        return {"quantile": None if quantiles is None else quantiles[0], "sketch": acc}

    def _answers(self, value: Mapping[str, Any]) -> list[float] | None:
        return None if value["quantile"] is None else [value["quantile"]]


# -- frequent items ---------------------------------------------------------------------------


class TopK(SketchFn):
    """The ``k`` most frequent values by a frequent-items sketch, strings or integers.

    The sketch tracks up to ``0.75 * 2**lg_max`` items (``lg_max``: the smallest at least 8 with
    room for ``10 * k``); while it has never had to purge, counts are exact. Beyond, an item's
    estimate is within ``[lower bound, upper bound]`` of its true count (a hard bound, at most
    about ``3.5 / 2**lg_max`` of the total count).

    The accumulator is ``(kind, sketch)``: ``kind`` is ``"string"`` or ``"long"`` (None: no
    values yet), which item serializer the sketch bytes use (DataSketches' strings or longs
    serializer, the Java library's ``ArrayOfStringsSerDe`` / ``ArrayOfLongsSerDe`` formats).
    """

    name = "top_k"
    examples = ("top_k(page, 10)",)
    glance = Glance(
        "`top_k(col, k)`",
        "strings, integers",
        "`struct<items: list<struct<item, count: long>>, sketch: binary>` (frequent items)",
        "within its bound",
        "lifted",
    )
    arguments = re.compile(_FIELD + r",\s*(?P<k>\d+)\s*\)\s*$")

    @classmethod
    def of_arguments(cls, field: str | None, groups: Mapping[str, str | None]) -> TopK:
        return cls(field, int(groups["k"] or ""))

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """A struct of the items (``string`` or ``long``, as the column) and their counts."""
        column = self._strings_or_integers(columns)
        item = "string" if column.type == "string" else "long"
        return f"struct<items: list<struct<item: {item}, count: long>>, sketch: binary>"

    def __init__(self, field: str | None, k: int) -> None:
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"top_k: k must be a positive integer, not {k!r}")
        super().__init__(field)
        self.k = k
        self.lg_max = max(8, math.ceil(math.log2(10 * k / 0.75)))

    def _args(self) -> str:
        return f"{self.field or ''}, {self.k}"

    def _key(self) -> tuple:
        return (*super()._key(), self.k)

    @staticmethod
    def _serde(kind: str | None) -> Any:
        ds = _lib()
        return ds.PyLongsSerDe() if kind == "long" else ds.PyStringsSerDe()

    def _sketch(self, acc: tuple[str | None, bytes]) -> Any:
        kind, data = acc
        return _lib().frequent_items_sketch.deserialize(data, self._serde(kind))

    def _acc(self, kind: str | None, sketch: Any) -> tuple[str | None, bytes]:
        return (kind, bytes(sketch.serialize(self._serde(kind))))

    def create(self) -> tuple[str | None, bytes]:
        return self._acc(None, _lib().frequent_items_sketch(self.lg_max))

    def add_all(self, acc: tuple[str | None, bytes], values: Sequence[Any]) -> tuple:
        inputs = self._inputs(values)
        if not inputs:
            return acc
        kind = acc[0]
        for v in inputs:
            kind = _kind_of(v, kind, self)
        sketch = self._sketch(acc)
        for v in inputs:
            sketch.update(v)
        return self._acc(kind, sketch)

    def merge(self, accs: Sequence[tuple[str | None, bytes]]) -> tuple:
        if len(accs) == 1:
            return accs[0]
        kinds = {k for k, _ in accs if k is not None}
        if len(kinds) > 1:
            raise ValueError(f"{self!r} cannot merge sketches of {' and '.join(sorted(kinds))}")
        kind = kinds.pop() if kinds else None
        sketch = self._sketch(accs[0])
        for acc in accs[1:]:
            sketch.merge(self._sketch(acc))
        return self._acc(kind, sketch)

    def _top(self, sketch: Any) -> list[dict[str, Any]]:
        rows = sketch.get_frequent_items(_lib().frequent_items_error_type.NO_FALSE_NEGATIVES)
        ranked = sorted((-int(r[1]), r[0]) for r in rows)[: self.k]
        return [{"item": item, "count": -count} for count, item in ranked]

    def extract(self, acc: tuple[str | None, bytes]) -> dict[str, Any]:
        return {"items": self._top(self._sketch(acc)), "sketch": acc[1]}

    def value_as_accumulator(self, value: Any) -> tuple[str | None, bytes]:
        if value is None or value.get("sketch") is None:
            return self.create()
        items = value.get("items") or []
        kind = _kind_of(items[0]["item"], None, self) if items else None
        return (kind, bytes(value["sketch"]))

    def agrees(self, expected: Any, actual: Any) -> bool:
        """Every item either lists has estimates in both sketches no further apart than both
        sketches' error bounds for it (``upper - lower``): equal while neither purged."""
        if expected is None or actual is None:
            return expected is actual
        se = self._sketch(self.value_as_accumulator(expected))
        sa = self._sketch(self.value_as_accumulator(actual))
        if se.total_weight != sa.total_weight:
            return False
        items = {r["item"] for r in (*expected["items"], *actual["items"])}
        for item in items:
            slack = sum(s.get_upper_bound(item) - s.get_lower_bound(item) for s in (se, sa))
            if abs(se.get_estimate(item) - sa.get_estimate(item)) > slack:
                return False
        return not (slack_free(se) and slack_free(sa)) or expected["items"] == actual["items"]


def slack_free(sketch: Any) -> bool:
    """Whether a frequent-items sketch's counts are exact (it never purged)."""
    return all(int(r[2]) == int(r[3]) for r in _rows(sketch))


def _rows(sketch: Any) -> list:
    return list(sketch.get_frequent_items(_lib().frequent_items_error_type.NO_FALSE_NEGATIVES))


def _kind_of(value: Any, kind: str | None, fn: TopK) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{fn!r} counts strings or integers, not {type(value).__name__}")
    found = "string" if isinstance(value, str) else "long"
    if kind is not None and kind != found:
        raise TypeError(f"{fn!r} got a {found} after {kind} values")
    return found


# -- merging upstream sketches ---------------------------------------------------------------


class MergeSketches(SketchFn):
    """``approx_count_distinct(merge(users))``, ``approx_quantiles(merge(latency), [...])``:
    the answer of the union of upstream sketches (values whose ``field`` is an upstream sketch
    aggregate's value, ``{..., "sketch": bytes}``), e.g. daily distinct users from the hourly
    panes of another pipeline.

    The accumulator is the *multiset* of the sketches it holds, a sorted tuple of
    ``(sketch bytes, count)``, so that a retraction (an upstream pane withdrawn) removes one
    equal sketch exactly: ``retract`` is defined, although the sketches themselves cannot
    withdraw a value. ``extract`` merges the held sketches (each as often as it is held: a KLL
    merge counts its values again, an HLL union is idempotent) with ``inner``'s merge.

    >>> from panes.combiners import approx_count_distinct
    >>> hourly = approx_count_distinct("user")
    >>> h1 = hourly.extract(hourly.add_all(hourly.create(), [{"user": "a"}, {"user": "b"}]))
    >>> h2 = hourly.extract(hourly.add_all(hourly.create(), [{"user": "b"}, {"user": "c"}]))
    >>> daily = MergeSketches(approx_count_distinct("users"))
    >>> acc = daily.add_all(daily.create(), [{"users": h1}, {"users": h2}])
    >>> daily.extract(acc)["estimate"], daily.extract(daily.retract(acc, {"users": h2}))["estimate"]
    (3, 2)
    >>> str(daily)
    'approx_count_distinct(merge(users))'
    """

    #: Its spelling in the registry; it stands in place of a sketch's column, and an instance
    #: is spelled as the sketch it merges (``approx_count_distinct(merge(users))``).
    name = "merge"
    examples = (
        "approx_count_distinct(merge(users))",
        "approx_quantiles(merge(latencies), [0.5, 0.99])",
        "approx_percentile(merge(latencies), 0.95)",
    )
    #: ``merge(COLUMN)`` alone: read only to be refused with the texts it goes in
    #: (:meth:`from_arguments`); the sketches read it in place of their column (``_FIELD``).
    arguments = re.compile(r"\s*(?P<field>[A-Za-z_][\w.]*)\s*\)\s*$")
    reads_sketches = True
    glance = Glance(
        "`approx_count_distinct(merge(col))`, `approx_quantiles(merge(col), [r, ...])`, "
        "`approx_percentile(merge(col), r)`",
        "an upstream pane log's sketch column of that aggregate",
        "the sketch's",
        "within its bound",
        "lifted",
    )

    def __init__(self, inner: SketchFn) -> None:
        if not inner.merges:
            raise ValueError(f"merge(...) takes approx_count_distinct or quantiles, not {inner!r}")
        super().__init__(inner.field)
        self.inner = inner
        self.name = inner.name

    @classmethod
    def from_arguments(cls, groups: Mapping[str, str | None]) -> SketchFn:
        """Refused: ``merge(COLUMN)`` is no aggregate of its own but a sketch's column
        (``ValueError`` naming the texts it goes in)."""
        column = groups.get("field")
        raise ValueError(
            f"merge({column}) stands in place of a sketch's column: write e.g. "
            f"approx_count_distinct(merge({column})) or approx_quantiles(merge({column}), [0.5])"
        )

    def output_type_in(self, columns: Mapping[str, Column]) -> str:
        """The inner sketch's output type, over an upstream's column of a type it merges
        (:attr:`SketchFn.merges`)."""
        name, typ = self._column(columns)
        wanted = self.inner.merges
        if typ not in wanted:
            raise AggregateTypeError(
                f"{self!r} merges sketches of a column of type {' or '.join(wanted)}, "
                f"{name!r} is {typ}"
            )
        return self.inner.struct_type

    def _args(self) -> str:
        args = self.inner._args()
        field = self.field or ""
        return f"merge({field}){args[len(field) :]}"

    def _key(self) -> tuple:
        return (type(self), self.inner._key())

    def _sketch_of(self, value: Any) -> bytes | None:
        part = value if self.field is None else value[self.field]
        if part is None or part.get("sketch") is None:
            return None
        return bytes(part["sketch"])

    @staticmethod
    def _multiset(counts: Mapping[bytes, int]) -> tuple[tuple[bytes, int], ...]:
        return tuple(sorted((s, n) for s, n in counts.items() if n))

    def create(self) -> tuple[tuple[bytes, int], ...]:
        return ()

    def add_all(self, acc: tuple, values: Sequence[Any]) -> tuple:
        counts = dict(acc)
        for value in values:
            sketch = self._sketch_of(value)
            if sketch is not None:
                counts[sketch] = counts.get(sketch, 0) + 1
        return self._multiset(counts)

    def retract(self, acc: tuple, value: Any) -> tuple:
        sketch = self._sketch_of(value)
        if sketch is None:
            return acc
        counts = dict(acc)
        if counts.get(sketch, 0) < 1:
            raise ValueError(f"{self!r}: a retraction of a sketch it does not hold")
        counts[sketch] -= 1
        return self._multiset(counts)

    def merge(self, accs: Sequence[tuple]) -> tuple:
        counts: dict[bytes, int] = {}
        for acc in accs:
            for sketch, n in acc:
                counts[sketch] = counts.get(sketch, 0) + n
        return self._multiset(counts)

    def extract(self, acc: tuple) -> dict[str, Any]:
        inner = self.inner
        held = [sketch for sketch, n in acc for _ in range(n)]
        return inner.extract(inner.merge(held) if held else inner.create())

    def value_as_accumulator(self, value: Any) -> tuple:
        """A folded value as the multiset of its one (union) sketch: discarding panes hold
        disjoint upstream panes, so merging their unions is the union of all."""
        if value is None or value.get("sketch") is None:
            return ()
        return ((bytes(value["sketch"]), 1),)

    def agrees(self, expected: Any, actual: Any) -> bool:
        return self.inner.agrees(expected, actual)
