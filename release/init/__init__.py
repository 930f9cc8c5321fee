"""Adoption (`release init`): reading a project and its wheels (`scan.py`), the starter matrix
(`scaffold.py`), the thin noxfile and guard (`repository.py`, `guard.py`), and the GitHub
workflows rendered from one template each (`workflows.py`, `templates/`)."""
