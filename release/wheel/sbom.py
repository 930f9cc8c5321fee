"""PEP 770 SBOMs in a wheel: JSON files under its dist-info's `sboms/`, and in a CycloneDX one
the wheel's own component and the libraries it depends on.

auditwheel (6.5 on) writes `sboms/auditwheel.cdx.json` when it grafts a library that a
distribution package owns (dpkg, rpm, apk): the wheel is the component
`pkg:pypi/NAME@VERSION?file_name=WHEEL`, each grafted file one library component whose bom-ref
is the package's purl plus `#` and the sha256 of the file's original path, and the wheel's
entry in `dependencies` lists them. A rewrite that renames the wheel (`release variants`)
renames that component with it (`renamed`), so the SBOM never names a file that is not there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from release.wheel.archive import is_dist_info

SBOM_DIR = "sboms/"
"""Where PEP 770 puts SBOM files, inside the dist-info directory."""
MAX_SBOM = 1 << 20
"""An SBOM larger than this is not read (auditwheel's are a few KiB)."""


class SbomError(ValueError):
    """An SBOM file that is not the JSON or the CycloneDX it claims to be."""


def is_sbom(member: str) -> bool:
    """Whether a member is a JSON SBOM of the top-level dist-info (`x-1.0.dist-info/sboms/y.json`)."""
    rest = member.partition("/")[2]
    return is_dist_info(member) and rest.startswith(SBOM_DIR) and rest.endswith(".json")


@dataclass(frozen=True)
class Purl:
    """The parts of a package URL this toolkit reads: `pkg:TYPE/NAME@VERSION?QUALIFIERS`."""

    type: str
    name: str
    version: str | None
    qualifiers: dict[str, str]


def parse_purl(text: str) -> Purl | None:
    """A package URL's type, name, version and qualifiers (namespace kept in the name); None if it is none."""
    scheme, sep, rest = text.partition(":")
    if scheme != "pkg" or not sep:
        return None
    rest = rest.partition("#")[0].lstrip("/")
    rest, _, query = rest.partition("?")
    kind, sep, path = rest.partition("/")
    if not sep or not path:
        return None
    name, at, version = path.rpartition("@")
    if not at:
        name, version = path, ""
    qualifiers = dict(parse_qsl(query, keep_blank_values=True))
    return Purl(kind.lower(), unquote(name), unquote(version) or None, qualifiers)


def pypi_purl(name: str, version: str, file_name: str) -> str:
    """The purl auditwheel gives a wheel (its name as the file name spells it)."""
    return f"pkg:pypi/{quote(name, safe='')}@{quote(version, safe='')}?file_name={quote(file_name, safe='')}"


@dataclass(frozen=True)
class Sbom:
    """What verify reads from one SBOM file."""

    own: Purl | None
    """The purl of the document's own component when it is a PyPI package (the wheel), else None."""
    listed: tuple[str, ...]
    """The bom-refs the wheel depends on: a CycloneDX document's entry for its own component in
    `dependencies` (auditwheel's grafted libraries); empty for other formats."""
    named: frozenset[str] = frozenset()
    """What the document's components and packages are called (names, purl names, file names),
    lower-cased, from any writer: CycloneDX `components` at any depth, SPDX `packages` and `files`."""


MAX_NAMED = 100_000
"""Names read from one SBOM at most (a bound on a hostile document's walk)."""


def _names(doc: dict[str, Any]) -> frozenset[str]:
    """The names the document gives its components or packages (bounded, iterative)."""
    found: set[str] = set()
    pending: list[object] = [doc.get("components"), doc.get("packages"), doc.get("files")]
    meta = doc.get("metadata")
    if isinstance(meta, dict):
        pending.append([meta.get("component")])
    seen = 0
    while pending and seen < MAX_NAMED:
        items = pending.pop()
        if not isinstance(items, list):
            continue
        for item in items[:MAX_NAMED]:
            seen += 1
            if not isinstance(item, dict):
                continue
            for key in ("name", "fileName", "packageFileName"):
                value = item.get(key)
                if isinstance(value, str):
                    found.add(value.lower().rpartition("/")[2])
            purl = parse_purl(str(item.get("purl", "")))
            if purl is not None:
                found.add(purl.name.lower().rpartition("/")[2])
            pending.append(item.get("components"))
    return frozenset(found)


def _load(data: bytes) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        msg = "not JSON this reader takes (nested too deep)"
        raise SbomError(msg) from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        msg = f"not JSON ({exc})"
        raise SbomError(msg) from None


def _own_ref(doc: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    meta = doc.get("metadata")
    component = meta.get("component") if isinstance(meta, dict) else None
    if not isinstance(component, dict):
        return None
    ref = component.get("bom-ref", component.get("purl"))
    return (component, ref) if isinstance(ref, str) else None


def parse_sbom(data: bytes) -> Sbom:
    """The wheel's component, the libraries it depends on and every name the document gives;
    `SbomError` when the file is not JSON, or is CycloneDX whose `dependencies` is not a list.
    Any other JSON SBOM (SPDX), and a CycloneDX one without `metadata.component` (optional in
    the format: not every writer is auditwheel), is accepted: it lists no dependency of the wheel,
    and names what it names."""
    doc = _load(data)
    if not isinstance(doc, dict):
        return Sbom(None, ())
    named = _names(doc)
    found = _own_ref(doc) if doc.get("bomFormat") == "CycloneDX" else None
    if found is None:
        return Sbom(None, (), named)
    component, ref = found
    purl = parse_purl(str(component.get("purl", "")))
    own = purl if purl is not None and purl.type == "pypi" else None
    dependencies = doc.get("dependencies", [])
    if not isinstance(dependencies, list):
        msg = "CycloneDX dependencies is not a list"
        raise SbomError(msg)
    listed: list[str] = []
    for entry in dependencies:
        depends = entry.get("dependsOn") if isinstance(entry, dict) and entry.get("ref") == ref else None
        if isinstance(depends, list):
            listed.extend(d for d in depends if isinstance(d, str))
    return Sbom(own, tuple(dict.fromkeys(listed)), named)


def renamed(name: str, version: str, file_name: str) -> Callable[[bytes], bytes]:
    """An edit for `release.wheel.rewrite`: the SBOM with the wheel's own component (a PyPI purl)
    renamed to `name` `version` in the file `file_name`, everywhere its bom-ref is used. Any other
    SBOM is left as it is."""

    def edit(data: bytes) -> bytes:
        try:
            doc = _load(data)
        except SbomError:
            return data
        found = _own_ref(doc) if isinstance(doc, dict) and doc.get("bomFormat") == "CycloneDX" else None
        old = parse_purl(str(found[0].get("purl", ""))) if found is not None else None
        if found is None or old is None or old.type != "pypi":
            return data
        purl = pypi_purl(name, version, file_name)
        _rename(doc, found[1], purl, name, version)
        return json.dumps(doc).encode("utf-8")

    return edit


def _rename(doc: dict[str, Any], old_ref: str, purl: str, name: str, version: str) -> None:
    components = doc.get("components")
    for component in [doc["metadata"]["component"], *(components if isinstance(components, list) else [])]:
        if isinstance(component, dict) and component.get("bom-ref", component.get("purl")) == old_ref:
            component.update({"name": name, "version": version, "purl": purl})
            if "bom-ref" in component:
                component["bom-ref"] = purl
    dependencies = doc.get("dependencies")
    for entry in dependencies if isinstance(dependencies, list) else []:
        if not isinstance(entry, dict):
            continue
        if entry.get("ref") == old_ref:
            entry["ref"] = purl
        depends = entry.get("dependsOn")
        if isinstance(depends, list):
            entry["dependsOn"] = [purl if d == old_ref else d for d in depends]
