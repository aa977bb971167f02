"""Conditions over a record's columns: what a filtered aggregate (``count() filter (status =
'error')``) counts. The AST, its text and its meaning are stated here, once.

A condition is a typed AST (:class:`Comparison`, :class:`In`, :class:`IsNull`, :class:`Not`,
:class:`And`, :class:`Or`). ``str()`` prints text that :func:`parse_condition` reads back to the
same AST; :attr:`Condition.columns` names the columns it reads. Its renderings:

* :meth:`Condition.evaluate`: the model's own meaning, over a mapping of column values (the
  simulator and :func:`panes.fold.batch` use it);
* :meth:`Condition.sql`: Spark SQL (``dialect="spark"``) or DuckDB (``dialect="duckdb"``);
  the two differ in how they quote identifiers (backticks, double quotes) and string literals
  (Spark reads backslash escapes in them, DuckDB does not);
* :func:`panes.columnar.conditions.arrow_flags`: Arrow compute over columns (kept there: the
  model imports pyarrow only in its columnar engine).

Grammar (key words case-insensitive, white space free between tokens)::

    condition  := conjunct ("or" conjunct)*
    conjunct   := negation ("and" negation)*
    negation   := "not" negation | "(" condition ")" | predicate
    predicate  := COLUMN ( OP literal | ["not"] "in" "(" literal ("," literal)* ")"
                         | "is" ["not"] "null" )
    OP         := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    literal    := 'text' ('' inside for a quote) | NUMBER | true | false

A column is a name (``[A-Za-z_][A-Za-z0-9_]*``, not a key word). Timestamps compare as text.
SQL's three-valued logic: a comparison with a null column is unknown (None), ``not`` unknown
is unknown, ``and``/``or`` as Kleene's; an element counts only where its condition is TRUE.

>>> c = parse_condition("status = 'error' and (amount > 10 or country in ('de', 'at'))")
>>> str(c)
"status = 'error' and (amount > 10 or country in ('de', 'at'))"
>>> c.columns
('status', 'amount', 'country')
>>> c.evaluate({"status": "error", "amount": None, "country": "de"})
True
>>> print(c.evaluate({"status": "error", "amount": None, "country": "fr"}))
None
>>> c.sql("duckdb")
'(("status" = \\'error\\') AND (("amount" > 10) OR ("country" IN (\\'de\\', \\'at\\'))))'
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from panes.tokens import Token, tokenize

Value = str | int | float | bool
Dialect = Literal["spark", "duckdb"]

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false", "filter", "where"})
FLAG_PREFIX = "pst_where_"


class ConditionSyntaxError(ValueError):
    """A malformed condition; ``position`` is where in ``text`` it goes wrong."""

    def __init__(self, message: str, text: str, position: int) -> None:
        self.message, self.text, self.position = message, text, position
        super().__init__(f"{message} at position {position}:\n  {text}\n  {' ' * position}^")


def literal_text(value: Value) -> str:
    """A literal as the condition's text writes it.

    >>> literal_text("it's"), literal_text(True), literal_text(2.5)
    ("'it''s'", 'true', '2.5')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def literal_sql(value: Value, dialect: Dialect) -> str:
    """A literal in SQL: Spark reads backslash escapes in its string literals, DuckDB does not.

    >>> literal_sql("a'b\\\\c", "spark"), literal_sql("a'b\\\\c", "duckdb")
    ("'a\\\\'b\\\\\\\\c'", "'a''b\\\\c'")
    """
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        if dialect == "spark":
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"  # a double, not a decimal literal: exact in both
    return str(value)


def identifier_sql(name: str, dialect: Dialect) -> str:
    """A column name quoted for ``dialect``."""
    if dialect == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


Rename = Callable[[str], str]
"""How a SQL rendering writes a column (default: the column's quoted name)."""


class Condition:
    """A condition over a record's columns (see the module doc)."""

    precedence = 3  # of an atom: 0 or, 1 and, 2 not

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads, in order of first appearance."""
        raise NotImplementedError

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        """True, False or None (unknown) for a record's column ``values``."""
        raise NotImplementedError

    def sql(self, dialect: Dialect, column: Rename | None = None) -> str:
        """The condition as a SQL boolean expression (fully parenthesized)."""
        raise NotImplementedError

    @property
    def flag(self) -> str:
        """The reserved column that carries this condition's value from the tagger to the
        operator (one name per condition text, ``pst_where_`` and a hash of it).

        >>> one, same, other = (parse_condition(t) for t in ("x = 1", "x=1", "x = 2"))
        >>> one.flag == same.flag != other.flag
        True
        """
        return FLAG_PREFIX + hashlib.sha256(str(self).encode()).hexdigest()[:12]

    def _inner(self, child: Condition) -> str:
        """``child``'s text inside this one, parenthesized where precedence needs it (a child
        of the same kind too, so that the text reads back to the same tree)."""
        text = str(child)
        if child.precedence < self.precedence or type(child) is type(self):
            return f"({text})"
        return text


@dataclass(frozen=True)
class _OnColumn(Condition):
    """A condition on one column (its first field)."""

    column: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _column_sql(self, dialect: Dialect, column: Rename | None) -> str:
        """The column in SQL: renamed by ``column``, if given."""
        return column(self.column) if column is not None else identifier_sql(self.column, dialect)


@dataclass(frozen=True)
class Comparison(_OnColumn):
    """``column OP literal``."""

    op: str
    value: Value

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        v = values.get(self.column)
        if v is None:
            return None
        return OPERATORS[self.op](v, self.value)

    def sql(self, dialect: Dialect, column: Rename | None = None) -> str:
        op = "<>" if self.op == "!=" else self.op
        col = self._column_sql(dialect, column)
        return f"({col} {op} {literal_sql(self.value, dialect)})"

    def __str__(self) -> str:
        return f"{self.column} {self.op} {literal_text(self.value)}"


@dataclass(frozen=True)
class In(_OnColumn):
    """``column [not] in (literal, ...)``."""

    values: tuple[Value, ...]
    negated: bool = False

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        v = values.get(self.column)
        if v is None:
            return None
        return any(v == x for x in self.values) != self.negated

    def sql(self, dialect: Dialect, column: Rename | None = None) -> str:
        items = ", ".join(literal_sql(x, dialect) for x in self.values)
        col = self._column_sql(dialect, column)
        return f"({col} {'NOT IN' if self.negated else 'IN'} ({items}))"

    def __str__(self) -> str:
        items = ", ".join(literal_text(x) for x in self.values)
        return f"{self.column} {'not in' if self.negated else 'in'} ({items})"


@dataclass(frozen=True)
class IsNull(_OnColumn):
    """``column is [not] null``."""

    negated: bool = False

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        return (values.get(self.column) is None) != self.negated

    def sql(self, dialect: Dialect, column: Rename | None = None) -> str:
        col = self._column_sql(dialect, column)
        return f"({col} IS {'NOT ' if self.negated else ''}NULL)"

    def __str__(self) -> str:
        return f"{self.column} is {'not ' if self.negated else ''}null"


@dataclass(frozen=True)
class Not(Condition):
    """``not operand``."""

    operand: Condition
    precedence = 2

    @property
    def columns(self) -> tuple[str, ...]:
        return self.operand.columns

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        v = self.operand.evaluate(values)
        return None if v is None else not v

    def sql(self, dialect: Dialect, column: Rename | None = None) -> str:
        return f"(NOT {self.operand.sql(dialect, column)})"

    def __str__(self) -> str:
        inner = str(self.operand)
        return f"not ({inner})" if self.operand.precedence < self.precedence else f"not {inner}"


@dataclass(frozen=True)
class _Junction(Condition):
    operands: tuple[Condition, ...]
    word = ""

    def __post_init__(self) -> None:
        if len(self.operands) < 2:
            raise ValueError(f"{self.word} needs at least two operands")

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for o in self.operands for c in o.columns))

    def sql(self, dialect: Dialect, column: Rename | None = None) -> str:
        word = f" {self.word.upper()} "
        return "(" + word.join(o.sql(dialect, column) for o in self.operands) + ")"

    def __str__(self) -> str:
        return f" {self.word} ".join(self._inner(o) for o in self.operands)


@dataclass(frozen=True)
class And(_Junction):
    """``a and b [and ...]``: False if any is False, else unknown if any is, else True."""

    precedence = 1
    word = "and"

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        seen = [o.evaluate(values) for o in self.operands]
        return False if False in seen else (None if None in seen else True)


@dataclass(frozen=True)
class Or(_Junction):
    """``a or b [or ...]``: True if any is True, else unknown if any is, else False."""

    precedence = 0
    word = "or"

    def evaluate(self, values: Mapping[str, Any]) -> bool | None:
        seen = [o.evaluate(values) for o in self.operands]
        return True if True in seen else (None if None in seen else False)


# -- parsing ----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')"
    r"|(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?![\w.])"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op><=|>=|<>|!=|=|<|>)"
    r"|(?P<punct>[(),]))"
)


def _unexpected(text: str, at: int) -> ConditionSyntaxError:
    what = "an unterminated text literal" if text[at] == "'" else repr(text[at])
    return ConditionSyntaxError(f"unexpected {what}", text, at)


MAX_DEPTH = 64
"""How deep conditions may nest in text."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.i, self.depth = (
            text,
            tokenize(_TOKEN, text, _unexpected),
            0,
            0,
        )

    def peek(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, token: Token | None = None) -> ConditionSyntaxError:
        return ConditionSyntaxError(message, self.text, (token or self.peek()).position)

    def expected(self, what: str) -> ConditionSyntaxError:
        token = self.peek()
        found = "the end" if token.kind == "end" else repr(token.text)
        return self.error(f"expected {what}, found {found}")

    def is_word(self, word: str) -> bool:
        return self.peek().word == word

    def is_punct(self, text: str) -> bool:
        token = self.peek()
        return token.kind == "punct" and token.text == text

    def take_punct(self, text: str, what: str | None = None) -> None:
        if not self.is_punct(text):
            raise self.expected(what or repr(text))
        self.i += 1

    def take_word(self, word: str) -> None:
        if not self.is_word(word):
            raise self.expected(repr(word))
        self.i += 1

    def condition(self) -> Condition:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"conditions nest at most {MAX_DEPTH} deep")
        operands = [self.conjunct()]
        while self.is_word("or"):
            self.i += 1
            operands.append(self.conjunct())
        self.depth -= 1
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def conjunct(self) -> Condition:
        operands = [self.negation()]
        while self.is_word("and"):
            self.i += 1
            operands.append(self.negation())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def negation(self) -> Condition:
        if self.is_word("not"):
            self.i += 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error(f"conditions nest at most {MAX_DEPTH} deep")
            operand = self.negation()
            self.depth -= 1
            return Not(operand)
        if self.is_punct("("):
            self.i += 1
            inner = self.condition()
            self.take_punct(")", "')', 'and' or 'or'")
            return inner
        return self.predicate()

    def predicate(self) -> Condition:
        token = self.peek()
        if token.kind != "name" or token.word in KEYWORDS:
            raise self.expected("a column name, 'not' or '('")
        self.i += 1
        column = token.text
        nxt = self.peek()
        if nxt.kind == "op":
            self.i += 1
            op = "!=" if nxt.text == "<>" else nxt.text
            return Comparison(column, op, self.literal())
        if nxt.word == "is":
            self.i += 1
            negated = self.is_word("not")
            self.i += negated
            self.take_word("null")
            return IsNull(column, negated)
        negated = nxt.word == "not"
        self.i += negated
        if self.is_word("in"):
            self.i += 1
            self.take_punct("(")
            values = [self.literal()]
            while self.is_punct(","):
                self.i += 1
                values.append(self.literal())
            self.take_punct(")", "',' or ')'")
            return In(column, tuple(values), negated)
        raise self.expected(
            "'in'" if negated else "a comparison (=, !=, <>, <, <=, >, >=), 'in' or 'is'"
        )

    def literal(self) -> Value:
        token = self.peek()
        if token.kind == "string":
            self.i += 1
            return token.text[1:-1].replace("''", "'")
        if token.kind == "number":
            self.i += 1
            t = token.text
            if re.fullmatch(r"[+-]?\d+", t):
                return int(t)
            value = float(t)
            if value != value or value in (float("inf"), float("-inf")):
                raise self.error("a number literal must be finite", token)
            return value
        if token.word in ("true", "false"):
            self.i += 1
            return token.word == "true"
        if token.word == "null":
            raise self.error("null is no literal: compare with 'is null' or 'is not null'")
        raise self.expected("a literal ('text', a number, true or false)")


def parse_condition(text: str) -> Condition:
    """Parse a condition (see the module doc); raises :class:`ConditionSyntaxError` (a
    ``ValueError``) pointing at the offending position.

    >>> c = parse_condition("not (a is null) and b <> 'x'")
    >>> c == And((Not(IsNull("a")), Comparison("b", "!=", "x"))), str(c)
    (True, "not a is null and b != 'x'")
    """
    parser = _Parser(text)
    if parser.peek().kind == "end":
        raise parser.error("empty condition")
    condition = parser.condition()
    if parser.peek().kind != "end":
        raise parser.expected("'and', 'or' or the end")
    return condition


def as_condition(condition: Condition | str) -> Condition:
    """A condition, or its text parsed."""
    return condition if isinstance(condition, Condition) else parse_condition(condition)


def literal_kinds(condition: Condition) -> dict[str, tuple[str, ...]]:
    """Column -> the kinds of literal it is compared with (``"text"``, ``"number"``,
    ``"boolean"``): what the configuration checks against the columns' types.

    >>> literal_kinds(parse_condition("a = 1 or a in ('x') or b is null"))
    {'a': ('number', 'text'), 'b': ()}
    """
    out: dict[str, set[str]] = {}

    def kind(v: Value) -> str:
        return "boolean" if isinstance(v, bool) else "text" if isinstance(v, str) else "number"

    def walk(c: Condition) -> None:
        if isinstance(c, Comparison):
            out.setdefault(c.column, set()).add(kind(c.value))
        elif isinstance(c, In):
            out.setdefault(c.column, set()).update(kind(v) for v in c.values)
        elif isinstance(c, IsNull):
            out.setdefault(c.column, set())
        elif isinstance(c, Not):
            walk(c.operand)
        elif isinstance(c, _Junction):
            for o in c.operands:
                walk(o)

    walk(condition)
    return {k: tuple(sorted(v)) for k, v in out.items()}
