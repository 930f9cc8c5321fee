"""Where the toolkit's own data files are, in a source tree and in an installed toolkit.

Kept free of heavy imports: `verify` reads backend data without loading the YAML machinery.
"""

from __future__ import annotations

from pathlib import Path


def toolkit_backends() -> Path:
    """The backend data shipped with the toolkit: `packaging/backends/` in its source tree, which
    an installed toolkit carries as `release/backends_data/` (see pyproject.toml)."""
    here = Path(__file__).resolve().parents[1]
    installed = here / "backends_data"
    return installed if installed.is_dir() else here.parent / "packaging" / "backends"


def toolkit_scripts() -> Path:
    """The toolchain and image scripts shipped with the toolkit: `scripts/` in its source tree,
    `release/scripts_data/` in an installed toolkit."""
    here = Path(__file__).resolve().parents[1]
    installed = here / "scripts_data"
    return installed if installed.is_dir() else here.parent / "scripts"


def setup_podman_command() -> str:
    """The command that installs and sets up podman on a Debian/Ubuntu host, as a user types it."""
    script = toolkit_scripts() / "setup-podman.sh"
    try:
        shown = script.relative_to(Path.cwd())
    except ValueError:
        shown = script
    return f"bash {shown}"
