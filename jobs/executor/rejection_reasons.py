"""Why a record is rejected: the texts of the ``rejected`` table's ``reason`` column.

Which text applies when is stated once, in :func:`jobs.executor.record_rules.rules` (the rules
in their order), rendered by the record's one tagger, chosen per pipeline: in Arrow by the
JSON-lines decoder (:mod:`jobs.executor.jsonl_decoder`) for the JSON lines of a pipeline it
serves, otherwise in Spark SQL by the plan (:mod:`jobs.driver.plan`, after Spark's parsers in
:mod:`jobs.sources.files.landing`). ``docs/running.md`` lists them.
"""

from __future__ import annotations

from jobs.config.event_time import EVENT_TIME_RANGE
from panes import dedup

MALFORMED = "malformed record (not parseable with the source schema)"
"""A record Spark's parsers (CSV, JSON lines the decoder does not serve) cannot read."""
NOT_STRICT_JSON = "malformed record (not one strict JSON object of the source schema)"
"""A JSON line the decoder cannot read: not one object, or a field not of its column's JSON type
(docs/sources.md, "JSON lines: strict JSON")."""
NOT_UTF8 = "not valid UTF-8 text (a binary file?)"


def missing_event_time(column: str) -> str:
    return f"missing event time ({column})"


def unparseable_event_time(column: str) -> str:
    return f"unparseable event time ({column})"


def event_time_out_of_range(column: str) -> str:
    return f"event time out of range ({column}): {EVENT_TIME_RANGE}"


def missing_key(column: str) -> str:
    return f"missing key ({column})"


def unparseable(what: str, column: str) -> str:
    """A key or value (``what``) whose text does not read as its column's type."""
    return f"unparseable {what} ({column})"


def not_converted(what: str, column: str, declared: str, arrived: str) -> str:
    """A key or value (``what``) of ``column``, declared ``declared``, whose value, arriving as
    a Spark type ``arrived``, does not convert exactly: text by its form (unparseable), another
    type only if it converts back to itself.

    >>> not_converted("value", "amount", "long", "double")
    'value not exactly a long (amount: a double that does not convert exactly)'
    """
    if arrived == "string":
        return unparseable(what, column)
    return f"{what} not exactly a {declared} ({column}: a {arrived} that does not convert exactly)"


def empty_key(column: str) -> str:
    return f"empty key ({column})"


def not_finite(column: str) -> str:
    return f"not a finite number ({column})"


DUPLICATE = dedup.DUPLICATE
"""The start of a duplicate's reason: a record whose key and id a deduplicated pipeline had
already counted (:mod:`panes.dedup`; judged by the operator, not by a tagger)."""


def duplicate(columns: tuple[str, ...]) -> str:
    """A duplicate's reason, naming the id columns.

    >>> duplicate(("producer", "seq"))
    'DUPLICATE (key and producer, seq already counted)'
    """
    return f"{DUPLICATE} (key and {', '.join(columns)} already counted)"
