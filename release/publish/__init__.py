"""Publishing: preflight of the whole set, then an idempotent upload (`preflight.py`,
`upload.py`), the simple-API index client under a deadline (`index.py`, `transport.py`), the
release-day checks (`release_day.py`), the re-hash at every hand-off (`handoff.py`) and the
release manifest (`manifest.py`)."""
