"""The verification rules of `release verify`, in report order.

Each rule module registers its rules with `@rule("id")` (see `registry`); importing the modules
here, in `MODULES` order, fixes the order of every report. `RULES` and `RULE_IDS` are read from
the registry.
"""

from __future__ import annotations

from importlib import import_module

from release.inspect.rules.registry import Rule, registered

MODULES = (
    "runtime", "libraries", "platform", "device", "package", "integrity", "consistency", "abi", "interpreter",
    "variant",
    "sbom", "devfiles", "machine",
)
"""The rule modules, in report order."""
for _module in MODULES:
    import_module(f"{__name__}.{_module}")
RULES: tuple[Rule, ...] = registered()
RULE_IDS: tuple[str, ...] = tuple(r.id for r in RULES)
