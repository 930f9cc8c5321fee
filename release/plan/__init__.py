"""Planning, pure and without processes: each variant resolved once into a frozen
`ResolvedVariant` (`resolve.py`, **the one place a variant becomes facts**), expanded into build,
smoke and image steps that carry it (`steps.py`, `--select`), the version from a tag
(`version.py`), and what a tag push needs from outside the code (`inputs.py`)."""
