"""TEST STAND-IN: an engine whose C++ core is compiled again for every Python."""

from shared_core._core import checksum, words

__all__ = ["checksum", "words"]
