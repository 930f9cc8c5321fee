"""PEP 825 variant wheels: one distribution whose wheels carry a variant label and
`variant.json`, made from the per-variant wheels, checked by verify and installed by uv."""
