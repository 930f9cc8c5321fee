"""PEP 825 variant wheels: one distribution whose wheels carry a variant label and
`variant.json` (`metadata.py`), made from the per-variant wheels with no compile (`make.py`),
checked by verify, and installed by pip and uv from local indexes (`resolution.py`) in every
case check-resolution plans (`cases.py`)."""
