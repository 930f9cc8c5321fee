"""Configuration: the model of matrix.yaml, loading, and per-backend data."""
