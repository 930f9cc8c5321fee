"""The hardware tier (`release hardware`): one leg (a wheel, a Python, a role) installed and run
on a GPU machine (`leg.py`), its wheel fetched from the release (`fetch.py`), in its serving image
(`container.py`), another machine's leg under emulation (`emulated.py`), and the prefill/decode
pair (`pair.py`)."""
