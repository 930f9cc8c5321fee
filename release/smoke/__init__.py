"""Smoke tests (`release smoke`): the exact wheels installed in fresh venvs and run (`runner.py`),
in real containers (`container.py`) or images simulated with mount namespaces (`image.py`), and
what each leg found (`outcome.py`)."""
