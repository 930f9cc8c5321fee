"""meson code, read in one linear pass: its tokens, its function calls with their arguments, and its
assignments, and the little evaluation `release init` needs (strings joined with `+`, variables,
`get_option()`).

Every regular expression here matches at each position in bounded time (an unclosed string ends at
the end of its line), calls are found with one stack, and a call's arguments are split only for the
calls init asks about, each at most `MAX_CALL_TOKENS` tokens: a megabyte of `option(` is one pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from release.init.sources import LineIndex

MAX_CALL_TOKENS = 20_000
"""Tokens of one call's arguments that are split into arguments (a larger call is passed over)."""

_TOKEN = re.compile(
    r"'''(?:[^']|'(?!''))*(?:'''|\Z)"  # a multi-line string (unclosed: to the end)
    r"|'(?:[^'\\\n]|\\[^\n]?)*(?:'|$)"  # a string (unclosed: to the end of the line)
    r"|#[^\n]*"  # a comment
    r"|[A-Za-z_][A-Za-z0-9_]*"  # a name
    r"|[0-9]+"
    r"|==|!=|<=|>=|\+=|\n"
    r"|[^\s]",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Token:
    text: str
    offset: int

    @property
    def is_string(self) -> bool:
        return self.text.startswith("'")

    @property
    def is_name(self) -> bool:
        return self.text[:1].isalpha() or self.text[:1] == "_"


def tokens(text: str) -> list[Token]:
    """The tokens of meson code, comments dropped, newlines kept (they end statements)."""
    return [Token(m.group(), m.start()) for m in _TOKEN.finditer(text) if not m.group().startswith("#")]


def string_value(token: Token) -> str | None:
    """The value of a string token; None for another token."""
    text = token.text
    if text.startswith("'''"):
        return text[3:-3] if len(text) >= 6 and text.endswith("'''") else text[3:]
    if not text.startswith("'"):
        return None
    body = text[1:-1] if len(text) >= 2 and text.endswith("'") else text[1:]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


@dataclass(frozen=True)
class Call:
    """One `name(...)` (or `object.name(...)`): where its arguments' tokens are, and its line."""

    name: str
    start: int
    """Index of the first token after `(`."""
    end: int
    """Index of the closing `)` (exclusive end of the arguments)."""
    line: int


@dataclass(frozen=True)
class Arguments:
    positional: tuple[Sequence[Token], ...]
    keywords: Mapping[str, Sequence[Token]]


@dataclass(frozen=True)
class Code:
    """One meson file's tokens, its calls (in order of their opening) and its assignments."""

    tokens: list[Token]
    calls: list[Call]
    assignments: list[tuple[str, int, int]]
    """(variable, first token of the value, end of the value): `name = value` at statement level."""

    def calls_of(self, *names: str) -> Iterator[Call]:
        return (c for c in self.calls if c.name in names)

    def arguments(self, call: Call) -> Arguments | None:
        """The call's arguments split at top-level commas; None for an oversized call."""
        if call.end - call.start > MAX_CALL_TOKENS:
            return None
        positional: list[Sequence[Token]] = []
        keywords: dict[str, Sequence[Token]] = {}
        depth, first = 0, call.start
        for index in range(call.start, call.end + 1):
            token = self.tokens[index] if index < call.end else None
            text = token.text if token else ","
            if text in "([{" and token is not None and not token.is_string:
                depth += 1
            elif text in ")]}" and token is not None and not token.is_string:
                depth -= 1
            elif text == "," and depth == 0:
                piece = [t for t in self.tokens[first:index] if t.text != "\n"]
                first = index + 1
                if len(piece) >= 2 and piece[0].is_name and piece[1].text == ":":
                    keywords[piece[0].text] = piece[2:]
                elif piece:
                    positional.append(piece)
        return Arguments(tuple(positional), keywords)


def parse(text: str) -> Code:
    """Tokens, calls and assignments of meson code, in one pass."""
    toks = tokens(text)
    lines = LineIndex(text)
    calls: list[Call | None] = []
    open_calls: list[tuple[int, str, int, int]] = []  # (slot in calls, name, start, offset)
    brackets: list[int | None] = []  # per open bracket: its call's slot, or None
    assignments: list[tuple[str, int, int]] = []
    statement_start = 0
    pending: tuple[str, int] | None = None
    for index, token in enumerate(toks):
        text_ = token.text
        if token.is_string:
            continue
        if text_ in "([{":
            slot = None
            if text_ == "(" and index > 0 and toks[index - 1].is_name:
                slot = len(calls)
                calls.append(None)
                open_calls.append((slot, toks[index - 1].text, index + 1, token.offset))
            brackets.append(slot)
        elif text_ in ")]}":
            if brackets:
                slot = brackets.pop()
                if slot is not None and open_calls and open_calls[-1][0] == slot:
                    _, name, start, offset = open_calls.pop()
                    calls[slot] = Call(name, start, index, lines.line(offset))
        elif text_ == "\n" and not brackets:
            if pending is not None:
                assignments.append((pending[0], pending[1], index))
                pending = None
            statement_start = index + 1
        elif (
            text_ in ("=", "+=")
            and not brackets
            and index == statement_start + 1
            and toks[statement_start].is_name
        ):
            pending = (toks[statement_start].text if text_ == "=" else "", index + 1)
    if pending is not None:
        assignments.append((pending[0], pending[1], len(toks)))
    return Code(toks, [c for c in calls if c is not None], [a for a in assignments if a[0]])


Part = str | tuple[str, str]
"""A piece of a string value: literal text, or ("option", name) for `get_option(name)`."""


def evaluate(value: Sequence[Token], variables: Mapping[str, tuple[Part, ...]]) -> tuple[Part, ...] | None:
    """A string expression of literals, variables and `get_option('name')` joined with `+`, as
    its parts; None for anything else (a call, an index, a method)."""
    parts: list[Part] = []
    items = [t for t in value if t.text != "\n"]
    if items and items[0].text == "(" and items[-1].text == ")":
        items = items[1:-1]
    index = 0
    while index < len(items):
        token = items[index]
        literal = string_value(token)
        if literal is not None:
            parts.append(literal)
            index += 1
        elif (
            token.text == "get_option"
            and index + 3 < len(items)
            and items[index + 1].text == "("
            and items[index + 3].text == ")"
            and (name := string_value(items[index + 2])) is not None
        ):
            parts.append(("option", name))
            index += 4
        elif (
            token.is_name
            and token.text in variables
            and not (index + 1 < len(items) and items[index + 1].text in "(.[")
        ):
            parts.extend(variables[token.text])
            index += 1
        else:
            return None
        if index < len(items):
            if items[index].text != "+":
                return None
            index += 1
    return tuple(parts) if parts else None


def variables(code: Code, known: Mapping[str, tuple[Part, ...]]) -> dict[str, tuple[Part, ...]]:
    """`known` extended with the file's string assignments, in order (a later one wins; one whose
    value init cannot read forgets the variable)."""
    found = dict(known)
    for name, start, end in code.assignments:
        value = evaluate(code.tokens[start:end], found)
        if value is None:
            found.pop(name, None)
        else:
            found[name] = value
    return found
