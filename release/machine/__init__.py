"""The machine every stage stands on: toolchains found and checked (`toolchain.py`), interpreters
found and installed (`interpreters.py`, `install.py`), fresh venvs (`venv.py`), the local images and
their recipes (`images.py`), the one module that runs containers (`containers.py`) and the locks
that keep two runs apart (`lock.py`)."""
