"""Typed configuration from YAML: frozen dataclasses are the single source of truth.

`read_document` turns a YAML document into an instance of a dataclass, reporting every problem
with its file, line and dotted key; `json_schema` turns the same dataclass into a JSON Schema.
Supported field types: `str`, `int`, `bool`, `float`, `Literal[...]`, `X | None`,
`tuple[X, ...]`, `Mapping[str, X]` and nested dataclasses. Keys starting with `x-` are left for
YAML anchors and tooling, as in docker-compose.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml
from yaml.constructor import SafeConstructor

from release import table
from release.errors import MatrixError, Problem

EXTENSION_PREFIX = "x-"
# libyaml's parser when PyYAML was built with it (about 20x faster); same marks and lines.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 64
"""Collections nested deeper than this are refused before composing (libyaml's composer recurses
in C: 100000 nested brackets crash the interpreter)."""
MAX_VALUES = 100_000
"""Values read through the model, aliases counted each time they are used (an alias bomb stops here)."""
MAX_MERGE_DEPTH = 32
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"


printable = table.printable
"""(`release.table.printable`: a key or value quoted in an error message cannot start a line.)"""


def key_name(name: str) -> str:
    """A mapping key as it appears in a dotted key: itself, or its `repr` when it holds
    anything non-printable (or nothing at all)."""
    return name if name and name.isprintable() else repr(name)


def dotted(parent: str, name: str) -> str:
    """`parent.name` (or `name` at the top), with the name as `key_name` renders it."""
    part = key_name(name)
    return f"{parent}.{part}" if parent else part


def spec(doc: str, **kwargs: Any) -> Any:
    """A dataclass field with a description used for the JSON Schema and error messages."""
    return dataclasses.field(metadata={"doc": doc}, **kwargs)


class _Invalid:
    """Marks a value that failed conversion; the problem is already recorded."""


INVALID = _Invalid()

_SCALAR_NAMES = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if tp in _SCALAR_NAMES:
        return _SCALAR_NAMES[tp]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is tuple:
        return "a list"
    if origin in (Mapping, dict) or dataclasses.is_dataclass(tp):
        return "a mapping"
    return str(tp)


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return True, args[0]
    return False, tp


class DocumentReader:
    """Converts composed YAML nodes into dataclass instances, collecting problems."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.lines: dict[str, int] = {}
        self._constructor = SafeConstructor()
        self._values = 0
        self._merged: dict[int, list[tuple[str, yaml.Node, yaml.Node]]] = {}
        self._merging: set[int] = set()

    def problem(self, node: yaml.Node | None, key: str, message: str) -> _Invalid:
        line = node.start_mark.line + 1 if node is not None else None
        self.problems.append(Problem(self.file, line, printable(key), printable(message)))
        return INVALID

    def read(self, node: yaml.Node, tp: Any, key: str) -> Any:
        self._values += 1
        if self._values > MAX_VALUES:
            message = f"more than {MAX_VALUES} values (anchors and aliases expand to too much)"
            raise MatrixError([Problem(self.file, node.start_mark.line + 1, printable(key), message)])
        self.lines.setdefault(key, node.start_mark.line + 1)
        optional, inner = _is_optional(tp)
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            if optional:
                return None
            return self.problem(node, key, f"expected {_describe(inner)}, got nothing")
        tp = inner
        origin = get_origin(tp)
        if dataclasses.is_dataclass(tp):
            return self._read_dataclass(node, typing.cast(type, tp), key)
        if origin is tuple:
            return self._read_sequence(node, get_args(tp)[0], key)
        if origin in (Mapping, dict):
            return self._read_mapping(node, get_args(tp)[1], key)
        return self._read_scalar(node, tp, key)

    def _read_scalar(self, node: yaml.Node, tp: Any, key: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"
            return self.problem(node, key, f"expected {_describe(tp)}, got {kind}")
        try:
            value = self._constructor.construct_object(node)
        except Exception:  # PyYAML's constructors raise assorted errors for a bad explicit tag
            return self.problem(node, key, f"cannot read {node.value!r} as {node.tag}")
        if get_origin(tp) is Literal:
            allowed = get_args(tp)
            if any(value == a and type(value) is type(a) for a in allowed):  # true == 1, 1.0 == 1
                return value
            hint = _suggest(str(value), [str(a) for a in allowed])
            return self.problem(node, key, f"{value!r} is not {_describe(tp)}{hint}")
        if tp is str:
            if isinstance(value, str):
                if "\0" in value:
                    return self.problem(node, key, f"{value!r} contains a NUL character")
                return value
            if isinstance(value, float):
                return self.problem(
                    node,
                    key,
                    f"expected a string; YAML read {node.value} as the number {value!r}: "
                    f'quote it ("{node.value}")',
                )
            if isinstance(value, (int, bool)):
                return self.problem(
                    node, key, f'expected a string, got {node.value}: quote it ("{node.value}")'
                )
        elif (tp is bool and isinstance(value, bool)) or (
            tp is int and isinstance(value, int) and not isinstance(value, bool)
        ):
            return value
        elif tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return self.problem(node, key, f"expected {_describe(tp)}, got {node.value!r}")

    def _read_sequence(self, node: yaml.Node, item: Any, key: str) -> Any:
        if not isinstance(node, yaml.SequenceNode):
            return self.problem(
                node,
                key,
                f"expected a list of {_describe(item)}s".replace("a string", "string").replace(
                    "a mapping", "mapping"
                ),
            )
        values = [self.read(child, item, f"{key}[{i}]") for i, child in enumerate(node.value)]
        if any(v is INVALID for v in values):
            return INVALID
        return tuple(values)

    def _mapping_items(
        self, node: yaml.MappingNode, key: str, *, register: bool = True
    ) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """The (name, key node, value node) entries of a mapping, YAML merge keys (`<<`) applied:
        the mapping's own keys win over merged ones, and an earlier merged mapping over a later.
        With `register`, `lines` learns where each entry is (an own key's line is never replaced)."""
        own = self._own_items(node, key, register=register)
        merges = [vnode for knode, vnode in node.value if knode.tag == _MERGE_TAG]
        if not merges:
            return own
        items = {name: (knode, vnode) for name, knode, vnode in own}
        for vnode in merges:
            sources = vnode.value if isinstance(vnode, yaml.SequenceNode) else [vnode]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    message = "a merge key (<<) takes a mapping or a list of mappings"
                    self.problem(source, dotted(key, "<<"), message)
                    continue
                for name, knode, value in self._merge_source(source, key):
                    if register:
                        self.lines.setdefault(dotted(key, name), knode.start_mark.line + 1)
                    items.setdefault(name, (knode, value))
        return [(name, knode, vnode) for name, (knode, vnode) in items.items()]

    def _merge_source(self, node: yaml.MappingNode, key: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """A merged mapping's entries, computed once per node (an anchor merged into many places)."""
        ident = id(node)
        if ident in self._merged:
            return self._merged[ident]
        if ident in self._merging:
            self.problem(node, dotted(key, "<<"), "a merge key (<<) includes the mapping that holds it")
            return []
        if len(self._merging) >= MAX_MERGE_DEPTH:
            self.problem(node, dotted(key, "<<"), f"merge keys (<<) nested more than {MAX_MERGE_DEPTH} deep")
            return []
        self._merging.add(ident)
        try:
            items = self._mapping_items(node, key, register=False)
        finally:
            self._merging.discard(ident)
        self._merged[ident] = items
        return items

    def _own_items(
        self, node: yaml.MappingNode, key: str, *, register: bool
    ) -> list[tuple[str, yaml.Node, yaml.Node]]:
        items: list[tuple[str, yaml.Node, yaml.Node]] = []
        seen: dict[str, int] = {}
        for knode, vnode in node.value:
            if knode.tag == _MERGE_TAG:
                continue
            name = knode.value if isinstance(knode, yaml.ScalarNode) else None
            if not isinstance(name, str) or knode.tag != _STR_TAG:
                shown = key_name(name) if isinstance(name, str) else "?"
                self.problem(knode, dotted(key, shown), f"keys must be strings{_key_kind(knode)}")
                continue
            where = dotted(key, name)
            if name in seen:
                self.problem(knode, where, f"duplicate key (first defined on line {seen[name]})")
                continue
            seen[name] = knode.start_mark.line + 1
            if register:
                self.lines[where] = seen[name]  # checks on a named entry point at its name
            if name.startswith(EXTENSION_PREFIX):
                continue
            items.append((name, knode, vnode))
        return items

    def _read_mapping(self, node: yaml.Node, item: Any, key: str) -> Any:
        if not isinstance(node, yaml.MappingNode):
            return self.problem(node, key, "expected a mapping")
        result: dict[str, Any] = {}
        for name, _knode, vnode in self._mapping_items(node, key):
            result[name] = self.read(vnode, item, dotted(key, name))
        if any(v is INVALID for v in result.values()):
            return INVALID
        return result

    def _read_dataclass(self, node: yaml.Node, cls: type, key: str) -> Any:
        if not isinstance(node, yaml.MappingNode):
            return self.problem(node, key, f"expected a mapping with keys {_field_list(cls)}")
        hints = get_type_hints(cls, vars(sys.modules[cls.__module__]))
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        bad = False
        for name, knode, vnode in self._mapping_items(node, key):
            where = dotted(key, name)
            if name not in fields:
                hint = _suggest(name, list(fields))
                self.problem(knode, where, f"unknown key{hint or f'; known keys: {_field_list(cls)}'}")
                bad = True
                continue
            value = self.read(vnode, hints[name], where)
            bad = bad or value is INVALID
            values[name] = value
        for name, f in fields.items():
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required and name not in values:
                self.problem(node, dotted(key, name), f"missing required key ({f.metadata.get('doc', '')})")
                bad = True
        if bad:
            return INVALID
        return cls(**values)


def _key_kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return ", not a list"
    if isinstance(node, yaml.MappingNode):
        return ", not a mapping"
    if node.tag.startswith("tag:yaml.org,2002:"):
        kind = node.tag.rsplit(":", 1)[-1]
        return f", not {'an' if kind[0] in 'aeiou' else 'a'} {kind} ({node.value!r}): quote it"
    return f", not {node.tag}"


def _field_list(cls: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls))


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def suggest(word: str, choices: list[str]) -> str:
    """'; did you mean X?' for the closest choice, or an empty string."""
    return _suggest(word, choices)


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory, not a file"),
    (stat.S_ISFIFO, "a FIFO, not a regular file"),
    (stat.S_ISCHR, "a character device, not a regular file"),
    (stat.S_ISBLK, "a block device, not a regular file"),
    (stat.S_ISSOCK, "a socket, not a regular file"),
)


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _FILE_KINDS if test(mode)), "not a regular file")


def read_file(path: Path, display: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; `MatrixError` otherwise.

    It is stat'ed before it is opened (opening a device or a FIFO can block or have effects),
    opened without blocking, and stat'ed again through the descriptor (it may have been swapped).
    """

    def refuse(message: str) -> MatrixError:
        return MatrixError([Problem(display, None, "", f"cannot read: {message}")])

    too_large = f"larger than {limit:,} bytes: is this the right file?"
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        kind = _not_regular(path.stat().st_mode)
        if kind is not None:
            raise refuse(kind)
        fd = os.open(path, flags)
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    except ValueError as exc:  # a NUL in the path
        raise refuse(str(exc)) from None
    try:
        info = os.fstat(fd)
        kind = _not_regular(info.st_mode)
        if kind is not None:
            raise refuse(kind)
        if info.st_size > limit:
            raise refuse(too_large)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1 << 16, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise refuse(too_large)
        return b"".join(chunks)
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def compose(text: str, file: str) -> yaml.Node:
    """Parse YAML into a node tree, turning syntax errors into a located `MatrixError`.

    The events are walked first, without recursion, so that nesting deeper than `MAX_DEPTH` is
    refused before the (recursive) composer sees it.
    """
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark is not None else None
                    message = f"lists and mappings nested more than {MAX_DEPTH} deep"
                    raise MatrixError([Problem(file, line, "", message)])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow; no mark, a position
        line = text.count("\n", 0, exc.position) + 1
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        message = f"invalid YAML: the character {char!r} is not allowed in YAML text ({exc.reason})"
        raise MatrixError([Problem(file, line, "", printable(message))]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = f"invalid YAML: {exc.problem or exc.context}"
        raise MatrixError([Problem(file, line, "", printable(message))]) from None
    except yaml.YAMLError as exc:
        raise MatrixError([Problem(file, None, "", printable(f"invalid YAML: {exc}"))]) from None
    if node is None:
        raise MatrixError([Problem(file, 1, "", "the file is empty")])
    return node


# ---------------------------------------------------------------------------- JSON Schema


def json_schema(cls: type, *, title: str, schema_id: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) for a dataclass model, with `$defs` per nested class."""
    defs: dict[str, Any] = {}
    _schema_for(cls, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        **defs.pop(cls.__name__),
        "$defs": dict(sorted(defs.items())),
    }


def _schema_for(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    optional, inner = _is_optional(tp)
    if optional:
        return {"anyOf": [_schema_for(inner, defs), {"type": "null"}]}
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        cls = typing.cast(type, tp)
        if cls.__name__ not in defs:
            defs[cls.__name__] = {}  # placeholder against recursion
            defs[cls.__name__] = _dataclass_schema(cls, defs)
        return {"$ref": f"#/$defs/{cls.__name__}"}
    if origin is tuple:
        return {"type": "array", "items": _schema_for(get_args(tp)[0], defs)}
    if origin in (Mapping, dict):
        return {"type": "object", "additionalProperties": _schema_for(get_args(tp)[1], defs)}
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    return {"type": simple[tp]}


def _dataclass_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """One dataclass as an object schema: its fields with docs and defaults; extensions allowed."""
    hints = get_type_hints(cls, vars(sys.modules[cls.__module__]))
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        prop = dict(_schema_for(hints[f.name], defs))
        if "doc" in f.metadata:
            prop["description"] = f.metadata["doc"]
        if f.default is not dataclasses.MISSING:
            prop["default"] = _json_default(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            prop["default"] = _json_default(f.default_factory())
        else:
            required.append(f.name)
        props[f.name] = prop
    entry: dict[str, Any] = {"type": "object"}
    if cls.__doc__:
        entry["description"] = " ".join(cls.__doc__.split())
    entry["properties"] = props
    if required:
        entry["required"] = required
    entry["patternProperties"] = {f"^{EXTENSION_PREFIX}": {}}
    entry["additionalProperties"] = False
    return entry


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _json_default(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, tuple):
        return [_json_default(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_default(v) for k, v in value.items()}
    return value
