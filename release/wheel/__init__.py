"""The one wheel reader and writer: file names and platform tags (`names.py`), the zip structure
read bounded (`zip.py`, `inflate.py`), METADATA and RECORD (`archive.py`), digests (`files.py`),
our own wheels read and rewritten (`own.py`, `rewrite.py`)."""
