"""Splitting the model's text into tokens: the one scanner of the trigger and aggregate grammar
(:mod:`panes.syntax`) and of conditions (:mod:`panes.conditions`), each with its own pattern."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Token:
    """One token: the name of the pattern's group it matched (``end`` after the last one), its
    text and where it starts in the text."""

    kind: str
    text: str
    position: int

    @property
    def word(self) -> str | None:
        """A name's text in lower case (keywords are matched so); ``None`` for other tokens."""
        return self.text.lower() if self.kind == "name" else None


def tokenize(
    pattern: re.Pattern[str], text: str, unexpected: Callable[[str, int], Exception]
) -> list[Token]:
    """The tokens of ``text``, then an ``end`` token just after its last non-blank character.

    ``pattern`` skips leading white space and then matches one token in a named group: the
    token's kind. Where it matches nothing, ``unexpected(text, position)`` is raised, at the
    first non-blank character there.

    >>> pattern = re.compile(r"\\s*(?:(?P<int>\\d+)|(?P<name>[a-z]+))")
    >>> [(t.kind, t.text, t.position) for t in tokenize(pattern, " ab 12 ", ValueError)]
    [('name', 'ab', 1), ('int', '12', 4), ('end', '', 6)]
    >>> tokenize(pattern, "ab ?", lambda text, at: ValueError(f"unexpected {text[at]!r} at {at}"))
    Traceback (most recent call last):
    ValueError: unexpected '?' at 3
    """
    tokens, pos = [], 0
    while text[pos:].strip():
        match = pattern.match(text, pos)
        if match is None or match.end() == pos:
            raise unexpected(text, pos + len(text[pos:]) - len(text[pos:].lstrip()))
        kind = match.lastgroup
        assert kind is not None  # every alternative of a token pattern is a named group
        tokens.append(Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    tokens.append(Token("end", "", len(text.rstrip())))
    return tokens
