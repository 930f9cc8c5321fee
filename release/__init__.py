"""Release toolkit for GPU transfer-engine wheels, driven by one `matrix.yaml`."""

__version__ = "0.1.0"
