"""The part of GitHub Actions' expression language (`${{ ... }}`) that release.yml uses.

Literals ('text', numbers, true, false, null), context paths (`needs.plan.outputs.build`,
`matrix.variant`, `inputs.tag`, with dashes in names as GitHub allows), `!`, `==`, `!=`, `&&`,
`||` (which return an operand, as in GitHub), parentheses, and the functions `format`,
`fromJSON`, `toJSON`, `contains`, `startsWith`, `success`, `failure`, `cancelled`, `always`.
Anything else is an `ExpressionError` that quotes the expression.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from release.errors import UsageError

_TOKEN = re.compile(
    r"(?a)\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!().,\[\]*])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)
_EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class ExpressionError(UsageError):
    """An expression the rehearsal cannot evaluate."""


@dataclass
class Status:
    """What `success()`, `failure()` and `cancelled()` see: the results of the jobs needed."""

    needs_results: tuple[str, ...] = ()
    cancelled: bool = False


@dataclass
class Context:
    values: Mapping[str, Any]
    status: Status = field(default_factory=Status)


def truthy(value: object) -> bool:
    return value not in (None, False, 0, "", 0.0)


def text(value: object) -> str:
    """How GitHub writes a value into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _tokens(source: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    pos = 0
    source = source.rstrip()
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None or match.end() == pos:
            msg = f"cannot read the expression {source.strip()!r} at {source[pos:].strip()[:20]!r}"
            raise ExpressionError(msg)
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        pos = match.end()
    return found


class _Parser:
    def __init__(self, source: str, context: Context) -> None:
        self.source = source.strip()
        self.tokens = _tokens(source)
        self.pos = 0
        self.context = context

    def fail(self, why: str) -> ExpressionError:
        msg = f"${{{{ {self.source} }}}}: {why}"
        return ExpressionError(msg)

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            why = f"expected {value or 'more'}"
            raise self.fail(why)
        self.pos += 1
        return token

    def parse(self) -> Any:
        value = self.either()
        if self.peek() is not None:
            why = f"unexpected {self.peek()[1]!r}"  # type: ignore[index]
            raise self.fail(why)
        return value

    def either(self) -> Any:
        value = self.both()
        while self.peek() == ("op", "||"):
            self.take()
            other = self.both()
            value = value if truthy(value) else other
        return value

    def both(self) -> Any:
        value = self.compare()
        while self.peek() == ("op", "&&"):
            self.take()
            other = self.compare()
            value = other if truthy(value) else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        token = self.peek()
        if token is not None and token[1] in ("==", "!="):
            self.take()
            other = self.unary()
            same = text(value).lower() == text(other).lower()
            return same if token[1] == "==" else not same
        return value

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value) if "." in value else int(value)
        if value == "(":
            inner = self.either()
            self.take(")")
            return inner
        if kind != "name":
            why = f"unexpected {value!r}"
            raise self.fail(why)
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if self.peek() == ("op", "("):
            return self.call(value)
        return self.path(value)

    def call(self, name: str) -> Any:
        self.take("(")
        args: list[Any] = []
        while self.peek() != ("op", ")"):
            args.append(self.either())
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        function = _FUNCTIONS.get(name.lower())
        if function is None:
            why = f"the rehearsal does not know the function {name}()"
            raise self.fail(why)
        try:
            return function(self.context.status, *args)
        except (TypeError, ValueError, IndexError) as exc:
            why = f"{name}(): {exc}"
            raise self.fail(why) from None

    def path(self, name: str) -> Any:
        if name not in self.context.values:
            why = f"unknown context {name!r}"
            raise self.fail(why)
        value: Any = self.context.values[name]
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                key: Any = self.take()[1]
            else:
                key = self.either()
                self.take("]")
            if isinstance(value, Mapping):
                value = value.get(key) if key in value else None
            elif isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
                value = value[key]
            else:
                value = None
        return value


def _format(_: Status, template: str, *args: Any) -> str:
    out = template.replace("{{", "\0").replace("}}", "\1")
    for i, arg in enumerate(args):
        out = out.replace(f"{{{i}}}", text(arg))
    return out.replace("\0", "{").replace("\1", "}")


def _contains(_: Status, haystack: Any, needle: Any) -> bool:
    if isinstance(haystack, list):
        return any(text(item).lower() == text(needle).lower() for item in haystack)
    return text(needle).lower() in text(haystack).lower()


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "format": _format,
    "fromjson": lambda _s, value: json.loads(text(value)),
    "tojson": lambda _s, value: json.dumps(value, indent=2),
    "contains": _contains,
    "startswith": lambda _s, a, b: text(a).lower().startswith(text(b).lower()),
    "success": lambda s: not s.cancelled and all(r == "success" for r in s.needs_results),
    "failure": lambda s: any(r == "failure" for r in s.needs_results),
    "cancelled": lambda s: s.cancelled,
    "always": lambda _s: True,
}


def evaluate(expression: str, context: Context) -> Any:
    """One expression, without the `${{ }}` around it."""
    return _Parser(expression, context).parse()


def substitute(value: str, context: Context) -> Any:
    """A workflow string: a lone `${{ x }}` gives x's value; embedded ones are written as text."""
    whole = _EMBEDDED.fullmatch(value.strip())
    if whole:
        return evaluate(whole.group(1), context)
    return _EMBEDDED.sub(lambda m: text(evaluate(m.group(1), context)), value)


def condition(value: object, context: Context) -> bool:
    """An `if:` (with or without `${{ }}`; a condition without a status function gets `success() &&`)."""
    if value is None:
        return truthy(_FUNCTIONS["success"](context.status))
    source = str(value).strip()
    whole = _EMBEDDED.fullmatch(source)
    source = whole.group(1) if whole else source
    if not re.search(r"\b(success|failure|cancelled|always)\s*\(", source):
        source = f"success() && ({source})"
    return truthy(evaluate(source, context))
