"""TEST STAND-IN: the engine's import package."""

from ._engine import checksum, transport

__all__ = ["checksum", "transport"]
