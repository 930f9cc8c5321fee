"""The raw primitives of each class of untrusted input, found in source by its syntax tree.

Each class has one boundary module (`HOMES`); `tests/unit/test_boundaries.py` fails on a raw use
anywhere else that its allow-list does not name with a reason. What is checkable from source:

- read: `open()`, `io.open`, `os.open`, `Path.open`, `read_text`, `read_bytes`, and the unbounded
  walks `Path.rglob` and `os.walk` (`release.wheel.files.walk` is bounded and follows no link);
- write: `write_text`, `write_bytes`, `mkdir`, `unlink`, `rmdir`, `touch`, `rename`, `chmod`,
  `symlink_to`, `Path.replace(target)` (one argument: `str.replace` takes two), every `shutil`
  copy, move and `rmtree`, and `os`'s remove, rename, replace, mkdir, makedirs, rmdir, chmod, link;
- number: `int(x)` or `float(x)` of anything but a literal, a length or arithmetic, and a pattern
  with `\\d` that neither says `(?a)` nor is compiled with `re.ASCII` (it matches Arabic-Indic
  digits, which `int()` then reads);
- print: `print(...)` or `sys.stdout/stderr.write(...)` of anything but literals and
  `printable(...)` (f-strings included: each field must be a literal, `printable(...)` or a
  number's format, `{n:d}`, `{s:.1f}`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

HOMES = {
    "read": "release/wheel/files.py",
    "write": "release/atomic.py",
    "number": "release/config/names.py",
    "print": "release/table.py",
}
"""The one module of each class."""

_READS = {"read_text", "read_bytes", "rglob"}  # rglob: an unbounded walk (release.wheel.files.walk)
_WRITES = {"write_text", "write_bytes", "mkdir", "unlink", "rmdir", "touch", "rename", "chmod",
           "symlink_to", "hardlink_to", "lchmod"}  # fmt: skip
_SHUTIL = {"rmtree", "copy", "copy2", "copyfile", "copytree", "move", "copymode", "copystat"}
_OS_WRITES = {"remove", "unlink", "rename", "renames", "replace", "mkdir", "makedirs", "rmdir",
              "removedirs", "chmod", "symlink", "link", "truncate"}  # fmt: skip
_NOT_PATHS = {"tarfile", "zipfile", "gzip", "bz2", "lzma", "webbrowser", "os", "io", "codecs"}
_NUMERIC = {"len", "round", "abs", "min", "max", "sum", "ord", "int", "float"}
_ESCAPED = {"printable", "printable_lines", "render"}  # table.render escapes every cell
_RE_CALLS = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split"}


def _name(node: ast.AST) -> str:
    """`a.b.c` of a Name/Attribute chain, "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _has_ascii(flags: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("ASCII", "A") for n in ast.walk(flags))


def _is_escaped(node: ast.AST) -> bool:
    """A literal, `printable(...)`, or an f-string made only of those."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call):
        if _name(node.func) == "json.dumps":  # ASCII, every control character escaped, unless told
            return not any(k.arg == "ensure_ascii" for k in node.keywords)
        return _name(node.func).split(".")[-1] in _ESCAPED
    if isinstance(node, ast.JoinedStr):
        return all(_is_escaped(v) for v in node.values)
    if isinstance(node, ast.FormattedValue):  # `{n:d}`, `{s:.1f}`: a number's format, never text
        spec = node.format_spec
        last = spec.values[-1] if isinstance(spec, ast.JoinedStr) and spec.values else None
        if isinstance(last, ast.Constant) and str(last.value)[-1:] in tuple("dfgex%"):
            return True
        return _is_escaped(node.value)
    return False


def _is_numeric(node: ast.AST) -> bool:
    """Arithmetic, a length or a literal: `int()` of these parses no text."""
    if isinstance(node, ast.Constant | ast.BinOp | ast.UnaryOp):
        return True
    return isinstance(node, ast.Call) and _name(node.func).split(".")[-1] in _NUMERIC


def raw_uses(source: str) -> Iterator[tuple[str, int, str]]:
    """(class, line, what) of each raw primitive in `source`."""
    tree = ast.parse(source)
    ascii_patterns: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func).split(".")[-1] in _RE_CALLS:
            flags = [*node.args[1:], *(k.value for k in node.keywords if k.arg == "flags")]
            if any(_has_ascii(f) for f in flags):
                ascii_patterns.update(id(n) for a in node.args[:1] for n in ast.walk(a))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # bytes patterns are ASCII
            text = node.value
            if "\\d" in text and "(?a" not in text and id(node) not in ascii_patterns:
                yield "number", node.lineno, "a pattern with \\d, without re.ASCII or (?a)"
        if not isinstance(node, ast.Call):
            continue
        func, dotted = node.func, _name(node.func)
        attr = func.attr if isinstance(func, ast.Attribute) else ""
        receiver = _name(func.value) if isinstance(func, ast.Attribute) else ""
        if dotted in ("open", "io.open", "os.open", "builtins.open"):
            yield "read", node.lineno, f"{dotted}()"
        elif attr == "open" and receiver.split(".")[0] not in _NOT_PATHS:
            yield "read", node.lineno, ".open()"
        elif dotted == "os.walk":
            yield "read", node.lineno, "os.walk()"
        elif attr in _READS:
            yield "read", node.lineno, f".{attr}()"
        elif receiver == "shutil" and attr in _SHUTIL:
            yield "write", node.lineno, f"shutil.{attr}()"
        elif receiver == "os" and attr in _OS_WRITES:
            yield "write", node.lineno, f"os.{attr}()"
        elif attr in _WRITES and receiver != "os":
            yield "write", node.lineno, f".{attr}()"
        elif attr == "replace" and len(node.args) == 1 and not node.keywords:
            yield "write", node.lineno, ".replace(target)"
        elif dotted in ("int", "float") and node.args and not _is_numeric(node.args[0]):
            yield "number", node.lineno, f"{dotted}() of text"
        elif dotted == "print" and not all(_is_escaped(a) for a in node.args):
            yield "print", node.lineno, "print() of text not passed through printable()"
        elif dotted in ("sys.stdout.write", "sys.stderr.write") and not all(
            _is_escaped(a) for a in node.args
        ):
            yield "print", node.lineno, f"{dotted}() of text not passed through printable()"
