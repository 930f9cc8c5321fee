"""TEST STAND-IN: the variant's own import package (installed as mesonstand_<variant>)."""

from ._crc import crc32, zlib_version

__all__ = ["crc32", "zlib_version"]
