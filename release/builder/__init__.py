"""Building wheels (the build stage): the variant's staged project (`stage.py`), the core compiled
once per variant (`prebuild.py`), wheels on this machine (`host.py`) or through cibuildwheel in the
variant's image (`container.py`, `cibw.py`), the compiler cache shared across Pythons (`reuse.py`),
the system packages a build installs (`sysdeps.py`), and `auditwheel repair` with the resolved
excludes (`repair.py`). Named `builder`, not `build`, so no tool mistakes it for build output."""
