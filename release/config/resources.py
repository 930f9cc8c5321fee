"""Where the toolkit's own data files are, in a source tree and in an installed toolkit.

Kept free of heavy imports: `verify` reads backend data without loading the YAML machinery.
"""

from __future__ import annotations

from pathlib import Path

from release import DISTRIBUTION, __version__


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


def missing_script_message(name: str, needed_by: str) -> str:
    """One line for a script the toolkit should ship and does not: the toolkit (which one, where),
    the file, and the fix."""
    scripts = toolkit_scripts()
    if scripts.name == "scripts_data" or not (scripts.parent / "pyproject.toml").is_file():
        fix = (
            "reinstall the toolkit from a wheel that carries its scripts "
            f"(`pip install --force-reinstall {DISTRIBUTION}=={__version__}`)"
        )
    else:
        fix = f"restore it in the toolkit's checkout (`git -C {scripts.parent} checkout -- scripts/{name}`)"
    return (
        f"{needed_by} needs {name}, which the toolkit {DISTRIBUTION} {__version__} does not carry "
        f"({scripts / name} is missing): {fix}"
    )


def setup_podman_command() -> str:
    """The command that installs and sets up podman on a Debian/Ubuntu host, as a user types it."""
    script = toolkit_scripts() / "setup-podman.sh"
    try:
        shown = script.relative_to(Path.cwd())
    except ValueError:
        shown = script
    return f"bash {shown}"


def default_backends_dir(matrix_path: Path) -> tuple[Path, ...]:
    """The toolkit's backend data, then a project's own `packaging/backends/` beside the matrix:
    its files add backends, or replace the toolkit's of the same name."""
    own = toolkit_backends()
    local = matrix_path.resolve().parent / "packaging" / "backends"
    if local.is_dir() and local.resolve() != own.resolve():
        return (own, local)
    return (own,)
