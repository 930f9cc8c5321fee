"""Configuration: the frozen model of `matrix.yaml` and its loader (`matrix.py`; the JSON Schema
is generated from it), YAML to dataclasses with file:line errors (`dataschema.py`), the checks
across keys as named checks run from registries (`checks.py`, `variantchecks.py`, `shapes.py`),
per-backend data from `packaging/backends/*.json` (`backends.py`) and the Pythons the toolkit
knows (`pythons.json`)."""
