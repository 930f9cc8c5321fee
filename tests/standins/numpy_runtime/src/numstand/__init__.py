"""TEST STAND-IN: sums a contiguous float64 buffer (a numpy array) in C."""

import numpy as np

from ._sum import total

__all__ = ["np", "total"]
