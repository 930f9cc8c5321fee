"""TheRock's runtime layouts of a smoke image, staged on the host for make-image.sh's layer leaf:
the runtime's files copied out of the image under the layer by soname, their RUNPATH `$ORIGIN` as
TheRock's (patchelf), and for the pip layout (`rocm_sdk`) the stand-in SDK's wheels
(scripts/therock-standin/wheels.py: `rocm_sdk`, the nonce-named library package, a torch that
preloads through it) with the sitecustomize that shows the venv's packages to the image's Python."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from release import process
from release.config.pythons import python
from release.config.resources import toolkit_scripts
from release.errors import ToolchainError
from release.machine.containers import ContainerEngine
from release.machine.recipe import Recipe
from release.machine.toolchain import tool_path

LAYOUTS = {"none": "therock_os", "rocm_sdk": "therock_pip"}
"""runtime_via -> the layer function of scripts/image-layers.sh that lays TheRock's runtime out."""
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def stage(engine: ContainerEngine, base: str, recipe: Recipe) -> Path:
    """A temporary directory (the caller removes it) holding what the layer installs."""
    where = Path(tempfile.mkdtemp(prefix="therock-stage."))
    globs = " ".join(recipe.runtime_libs)
    by_soname = 'case "$f" in *.so.[0-9]|*.so.[0-9][0-9]) cp -L "$f" /stage/ ;; esac'
    script = f"set -e; cd {LIBDIR}; for f in {globs}; do {by_soname}; done"
    if recipe.runtime_via == "rocm_sdk":  # the interpreter's own sitecustomize, which the layer replaces
        v = recipe.pythons[-1]
        own = f"{python(v).manylinux_path()}/lib/{python(v).executable}/sitecustomize.py"
        script += f"; if [ -f {own} ]; then cp {own} /stage/own-sitecustomize.py; fi"
    proc = engine.run_script(base, script, mounts={where: "/stage"})
    files = sorted(where.glob("*.so.*"))
    if proc.returncode != 0 or not files:
        why = (proc.stderr.strip().splitlines() or ["no file matched"])[-1]
        wanted = ",".join(recipe.runtime_libs)
        msg = f"no file matching {wanted} in {LIBDIR} of {base[:12]} ({why}): include the runtime package"
        raise ToolchainError(msg)
    patchelf = shutil.which("patchelf", path=tool_path()) or "patchelf"
    _run([patchelf, "--set-rpath", "$ORIGIN", *map(str, files)], what="patchelf --set-rpath '$ORIGIN'")
    if recipe.runtime_via == "rocm_sdk":
        wheels = toolkit_scripts() / "therock-standin" / "wheels.py"
        _run(
            [sys.executable, str(wheels), str(where / "wheels"), "--torch", *map(str, files)],
            what="the stand-in's wheels",
        )
        v = recipe.pythons[-1]
        site = f"{recipe.runtime_prefix}/lib/python{v}/site-packages"
        copied = where / "own-sitecustomize.py"
        kept = copied.read_text(encoding="utf-8") if copied.is_file() else None
        copied.unlink(missing_ok=True)
        (where / "sitecustomize.py").write_text(sitecustomize(kept, site), encoding="utf-8")
    return where


def sitecustomize(own: str | None, site: str) -> str:
    """The image interpreter's sitecustomize in the pip layout: its own (a Debian-built CPython's is
    what puts its site-packages, and its pip, on the path: scripts/python-debian.sh), kept, then the
    venv's site directory added, as TheRock's venv shows its packages."""
    kept = f"{own.rstrip()}\n\n" if own else ""
    return f"{kept}import site\nsite.addsitedir({site!r})\n"


def layer_args(recipe: Recipe) -> list[str]:
    """The layer function and its arguments (image-layers.sh) for a TheRock layout."""
    globs = ",".join(recipe.runtime_libs)
    if recipe.runtime_via == "rocm_sdk":
        return ["therock_pip", recipe.runtime_prefix, globs, recipe.pythons[-1]]
    return ["therock_os", recipe.runtime_prefix, globs, recipe.runtime_links]


def _run(argv: list[str], *, what: str) -> None:
    proc = process.run(argv, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        msg = f"{what} failed: {last}"
        raise ToolchainError(msg)
