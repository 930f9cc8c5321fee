"""Building: the toolchain and interpreters a build needs, found and installed (`toolchain.py`,
`interpreters.py`, `install.py`),
the variant's staged project (`stage.py`), the core compiled once per variant (`prebuild.py`),
wheels on this machine (`host.py`) or through cibuildwheel in the variant's image (`container.py`,
`cibw.py`, `images.py`), and `auditwheel repair` with the resolved excludes (`repair.py`)."""
