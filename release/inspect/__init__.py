"""Inspection (`release verify`): bounded ELF facts (`elf.py`, `elfformat.py`), the verification
rules (`rules/`, a registry), reading a wheel and writing its versioned report (`reader.py`,
`verify.py`, `report.py`)."""
