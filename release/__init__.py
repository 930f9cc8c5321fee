"""Release toolkit for GPU transfer-engine wheels, driven by one `matrix.yaml`."""

DISTRIBUTION = "gpu-wheel-release"
"""The toolkit's name on PyPI (`pip install gpu-wheel-release`); its command is `release`."""
__version__ = "0.1.0"


def requirement() -> str:
    """The pinned requirement of this toolkit, as generated workflows install it."""
    return f"{DISTRIBUTION}=={__version__}"
