"""PEP 825 variant metadata: what a variant wheel's `variant.json` and the index's
`{name}-{version}-variants.json` say, derived from a resolved variant and checked when read.

The knowledge (the schema URL installers accept, each backend's namespace, provider, label and
properties) is data: `providers.json` beside this module. The schema is pinned to the one uv
0.13.8 reads (`peps/825/v0.1.1`; variantlib 0.2.2 writes `v0.2.0`, which uv refuses), and each
provider names its `plugin-api`, without which uv skips the namespace.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from release.wheel.names import NULL_LABEL, VARIANT_LABEL

if TYPE_CHECKING:
    from release.plan.resolve import ResolvedVariant

PROVIDERS_FILE = Path(__file__).with_name("providers.json")
DIST_INFO_FILE = "variant.json"
"""The leaf of `*.dist-info/` that holds a variant wheel's metadata."""
INDEX_SUFFIX = "-variants.json"
"""`{name}-{version}-variants.json`: what an index serves beside the variant wheels."""
_NAME = re.compile(r"^[a-z0-9_]+$")
_VALUE = re.compile(r"^[a-z0-9_.]+$")


class VariantDataError(ValueError):
    """Variant metadata that cannot be made or read; the message says which and why."""


@dataclass(frozen=True)
class Provider:
    """The plugin an installer runs (or has built in) to judge one namespace's properties."""

    namespace: str
    requires: tuple[str, ...]
    plugin_api: str

    def to_json(self) -> dict[str, object]:
        return {"requires": list(self.requires), "plugin-api": self.plugin_api}


@dataclass(frozen=True)
class Description:
    """One variant as PEP 825 describes it: a label and properties (none for the null variant)."""

    label: str
    properties: Mapping[str, Mapping[str, tuple[str, ...]]]
    """namespace -> feature -> values, sorted."""
    provider: Provider | None
    variant: str
    """The matrix variant it describes."""

    @property
    def is_null(self) -> bool:
        return not self.properties

    def property_lines(self) -> list[str]:
        """`nvidia :: cuda_version_lower_bound :: 13.0`, one per value."""
        return [
            f"{ns} :: {feature} :: {value}"
            for ns, features in self.properties.items()
            for feature, values in features.items()
            for value in values
        ]


@dataclass(frozen=True)
class _BackendData:
    null: bool
    namespace: str
    provider: Provider | None
    label: str
    properties: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class ProviderData:
    """`providers.json`, read and checked once."""

    schema_url: str
    backends: Mapping[str, _BackendData]


@functools.cache
def provider_data(path: Path = PROVIDERS_FILE) -> ProviderData:
    """The variant knowledge; `VariantDataError` naming the file and key when it is malformed."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        backends: dict[str, _BackendData] = {}
        for name, entry in raw["backends"].items():
            if entry.get("null"):
                backends[name] = _BackendData(True, "", None, NULL_LABEL, {})
                continue
            provider = Provider(
                entry["namespace"], tuple(entry["provider"]["requires"]), entry["provider"]["plugin-api"]
            )
            props = {str(k): tuple(str(v) for v in vs) for k, vs in entry["properties"].items()}
            backends[name] = _BackendData(False, entry["namespace"], provider, entry["label"], props)
        return ProviderData(str(raw["variant_schema"]), backends)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{path}: cannot read the variant provider data ({type(exc).__name__}: {exc})"
        raise VariantDataError(msg) from None


def _fields(toolkit: str | None, architectures: Sequence[str]) -> dict[str, str]:
    parts = (toolkit or "").split(".")
    major = parts[0] if parts and parts[0].isdigit() else ""
    minor = parts[1] if len(parts) > 1 and parts[1].isdigit() else "0"
    return {
        "major": major,
        "minor": minor,
        "next_major": str(int(major) + 1) if major else "",
        "architectures": " ".join(architectures),
    }


def describe(variant: ResolvedVariant, data: ProviderData | None = None) -> Description:
    """The label and properties of `variant`, from its backend, toolkit and architectures."""
    data = data or provider_data()
    known = data.backends.get(variant.backend_name)
    if known is None:
        have = ", ".join(sorted(data.backends))
        msg = (
            f"variant {variant.name!r}: backend {variant.backend_name!r} has no variant properties in "
            f"{PROVIDERS_FILE.name} (backends with them: {have}); leave it out of variant_wheels.variants"
        )
        raise VariantDataError(msg)
    if known.null:
        return Description(NULL_LABEL, {}, None, variant.name)
    values = _fields(variant.toolkit, variant.architectures)
    if not values["major"]:
        msg = (
            f"variant {variant.name!r}: its variant properties come from the toolkit version, and "
            f"{variant.toolkit_source} declares none (set `toolkit`, e.g. '13.0')"
        )
        raise VariantDataError(msg)
    features: dict[str, tuple[str, ...]] = {}
    for feature, templates in known.properties.items():
        found: list[str] = []
        for template in templates:
            found.extend(template.format(**values).split())
        if found:
            features[feature] = tuple(sorted(set(found)))
    label = known.label.format(**values)
    desc = Description(label, {known.namespace: dict(sorted(features.items()))}, known.provider, variant.name)
    problems = property_problems(desc.properties) + label_problems(label)
    if problems:
        msg = f"variant {variant.name!r}: {'; '.join(problems)}"
        raise VariantDataError(msg)
    return desc


def label_problems(label: str) -> list[str]:
    if not VARIANT_LABEL.match(label):
        return [f"label {label!r} is not 1 to 16 of a-z, 0-9, '_' and '.' (PEP 825)"]
    return []


def property_problems(properties: Mapping[str, Mapping[str, Sequence[str]]]) -> list[str]:
    problems = []
    for ns, features in properties.items():
        if not _NAME.match(ns):
            problems.append(f"namespace {ns!r} is not lower-case letters, digits and '_'")
        for feature, values in features.items():
            if not _NAME.match(feature):
                problems.append(f"feature {ns} :: {feature!r} is not lower-case letters, digits and '_'")
            problems.extend(
                f"value {ns} :: {feature} :: {v!r} is not lower-case letters, digits, '_' and '.'"
                for v in values
                if not _VALUE.match(v)
            )
    return problems


def _providers(descriptions: Sequence[Description]) -> dict[str, Provider]:
    found: dict[str, Provider] = {}
    for desc in descriptions:
        if desc.provider is not None:
            found.setdefault(desc.provider.namespace, desc.provider)
    return found


def document(descriptions: Sequence[Description], data: ProviderData | None = None) -> dict[str, Any]:
    """The PEP 825 document listing `descriptions`: a wheel's `variant.json` (one of them, with
    the providers of the whole set) or the index's `-variants.json` (all of them)."""
    data = data or provider_data()
    providers = _providers(descriptions)
    return {
        "$schema": data.schema_url,
        "default-priorities": {"namespace": list(providers)},
        "providers": {ns: p.to_json() for ns, p in providers.items()},
        "variants": {
            d.label: {ns: {f: list(v) for f, v in feats.items()} for ns, feats in d.properties.items()}
            for d in descriptions
        },
    }


def dist_info_document(desc: Description, every: Sequence[Description]) -> dict[str, Any]:
    """A wheel's `variant.json`: its own label, the providers of the whole set (so that every
    wheel and the index agree on them)."""
    doc = document(every)
    doc["variants"] = {desc.label: document([desc])["variants"][desc.label]}
    return doc


def render(doc: Mapping[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


def index_file_name(distribution_stem: str, version: str) -> str:
    """`engine-0.1.0-variants.json`."""
    return f"{distribution_stem}-{version}{INDEX_SUFFIX}"


def read_document(data: bytes, *, label: str | None, data_file: ProviderData | None = None) -> list[str]:
    """Problems with a `variant.json` (with the label of its wheel) or a `-variants.json` (label
    None): the pinned schema, the labels, property syntax, and a provider with a `plugin-api`
    for every namespace, listed in `default-priorities`. Empty when it is what installers read."""
    known = data_file or provider_data()
    try:
        doc = json.loads(data)
    except ValueError as exc:
        return [f"not JSON ({exc})"]
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    problems: list[str] = []
    if doc.get("$schema") != known.schema_url:
        problems.append(f"$schema is {doc.get('$schema')!r}, not {known.schema_url} (what uv 0.13.8 accepts)")
    variants = doc.get("variants")
    if not isinstance(variants, dict) or not variants:
        return [*problems, "no `variants` object"]
    if label is not None and list(variants) != [label]:
        problems.append(f"`variants` lists {sorted(variants)}, not exactly the file name's label {label!r}")
    found = doc.get("providers")
    providers: dict[str, Any] = found if isinstance(found, dict) else {}
    priorities = doc.get("default-priorities")
    ordered = priorities.get("namespace") if isinstance(priorities, dict) else None
    if not isinstance(ordered, list) or sorted(map(str, ordered)) != sorted(providers):
        problems.append(
            f"default-priorities.namespace is {ordered!r}, not the providers' namespaces {sorted(providers)}"
        )
    for ns, provider in providers.items():
        api = provider.get("plugin-api") if isinstance(provider, dict) else None
        if not isinstance(api, str) or ":" not in api:
            problems.append(f"provider {ns!r} has no `plugin-api` module:attribute (uv skips it)")
    for name, props in variants.items():
        problems.extend(label_problems(name))
        if not isinstance(props, dict) or not all(
            isinstance(f, dict) and all(isinstance(v, list) for v in f.values()) for f in props.values()
        ):
            problems.append(f"variant {name!r}: properties are not namespace -> feature -> [values]")
            continue
        problems.extend(f"variant {name!r}: {p}" for p in property_problems(props))
        problems.extend(
            f"variant {name!r}: namespace {ns!r} has no provider" for ns in props if ns not in providers
        )
        if name == "null" and props:
            problems.append("the null variant has properties")
    return problems or _variantlib_problems(doc, label)


def _variantlib_problems(doc: Mapping[str, Any], label: str | None) -> list[str]:
    """What `variantlib`, the PEP's reference library, finds wrong (its first line)."""
    from variantlib.errors import ValidationError  # noqa: PLC0415 (verify start-up time)
    from variantlib.variant_dist_info import VariantDistInfo  # noqa: PLC0415
    from variantlib.variants_json import VariantsJson  # noqa: PLC0415

    try:
        if label is None:
            VariantsJson(dict(doc))
        else:
            VariantDistInfo(json.dumps(doc), expected_label=label)
    except (ValidationError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [f"variantlib {importlib.metadata.version('variantlib')} refuses it: {first}"]
    return []


def properties_in(data: bytes, label: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """namespace -> feature -> sorted values of `label` in a document `read_document` passed."""
    props = json.loads(data)["variants"][label]
    return {ns: {f: tuple(sorted(v)) for f, v in feats.items()} for ns, feats in props.items()}
