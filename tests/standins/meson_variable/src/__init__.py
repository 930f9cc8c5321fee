"""TEST STAND-IN: one variant's import package (mesonvar_<variant>)."""

from ._core import add

__all__ = ["add"]
