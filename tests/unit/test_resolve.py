"""Resolve once: one answer per fact, the same on every path (host build, container build,
repair, verify, smoke, workflows). Each test here failed on the code that re-derived facts."""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path

import pytest
import yaml

from release.builder import cibw
from release.builder.host import BuildContext, pep517_invocation
from release.config.matrix import LoadedMatrix, loads
from release.inspect.verify import verify_wheel
from release.machine.recipe import Recipe
from release.machine.toolchain import Toolchain
from release.plan.resolve import read_build_backend, resolve_variant
from release.plan.steps import BuildStep, make_plan
from release.plan.version import tag_version, version_from_tag
from release.smoke.runner import vendored_runtime
from tests.hostile.builders import elf_bytes

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"

PYPROJECTS = {
    "scikit-build-core": '[build-system]\nrequires = ["scikit-build-core"]\n'
    'build-backend = "scikit_build_core.build"\n[project]\nname = "e"\nversion = "0"\n',
    "setuptools": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    '[project]\nname = "e"\nversion = "0"\n',
    "meson-python": '[build-system]\nrequires = ["meson-python"]\nbuild-backend = "mesonpy"\n'
    '[project]\nname = "e"\nversion = "0"\n',
}


def _matrix(tmp_path: Path, *, shape: str = "scikit-build-core", rocm_exclude: bool = True) -> LoadedMatrix:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    engine = tmp_path / "engine"
    engine.mkdir(exist_ok=True)
    (engine / "pyproject.toml").write_text(PYPROJECTS[shape], encoding="utf-8")
    data["engine"]["source"] = "engine"
    data["variants"]["rocm"]["cmake_defines"] = {"XFER_BACKEND": "hip", "XFER_FLAGS": "-O2 -g0"}
    data["variants"]["rocm"]["env"] = {"HIP_PLATFORM": "amd"}
    if not rocm_exclude:
        del data["variants"]["rocm"]["exclude"]
    path = tmp_path / "matrix.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return loads(text, path=path, backends_dir=BACKENDS)


def _rocm_wheel(directory: Path, *, soname_only: bool = False) -> Path:
    """A wheel of the rocm variant that vendors the HIP runtime (what repair must prevent)."""
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / "xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("xfer/__init__.py", "")
        if soname_only:
            zf.writestr("xfer_engine_rocm.libs/libhip-renamed.so", elf_bytes(soname="libamdhip64.so.6"))
        else:
            zf.writestr("xfer_engine_rocm.libs/libamdhip64-1a2b3c4d.so.6", b"\0" * 64)
        zf.writestr("xfer_engine_rocm-0.1.0.dist-info/METADATA", "Name: xfer-engine-rocm\nVersion: 0.1.0\n")
        zf.writestr("xfer_engine_rocm-0.1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("xfer_engine_rocm-0.1.0.dist-info/RECORD", "")
    return wheel


def test_excludes_are_one_answer_even_without_a_variant_exclude(tmp_path: Path) -> None:
    """The rocm variant without `exclude`: repair used to exclude nothing while verify still
    expected libamdhip64 to be kept out. Now the backend's excludes apply on every path."""
    variant = make_plan(_matrix(tmp_path, rocm_exclude=False)).variant("rocm")
    assert "libamdhip64.so*" in variant.excludes
    repair = shlex.split(cibw.repair_command(variant))
    assert [repair[i + 1] for i, w in enumerate(repair) if w == "--exclude"] == list(variant.excludes)
    wheel = _rocm_wheel(tmp_path)
    report = verify_wheel(wheel, variant=variant)
    assert report.rule("vendored-runtime").status == "fail"
    assert vendored_runtime(wheel, variant) == ["xfer_engine_rocm.libs/libamdhip64-1a2b3c4d.so.6"]
    assert vendored_runtime(_rocm_wheel(tmp_path / "renamed", soname_only=True), variant) == [
        "xfer_engine_rocm.libs/libhip-renamed.so"
    ]  # smoke judges as verify does: a renamed copy is found by its SONAME


def test_system_libraries_are_excluded_by_repair_and_known_to_verify(tmp_path: Path) -> None:
    loaded = _matrix(tmp_path)
    text = loaded.path.read_text(encoding="utf-8").replace(
        "system_libraries: []", "system_libraries: [libnuma.so.1]"
    )
    variant = resolve_variant(loads(text, path=loaded.path, backends_dir=BACKENDS), "rocm")
    assert variant.excludes[-1] == "libnuma.so.1"
    assert "--exclude libnuma.so.1" in cibw.repair_command(variant)
    assert variant.excludes[:2] == ("libamdhip64.so*", "libhsa-runtime64.so*")
    assert "libnuma.so.1" not in variant.runtime_globs  # a system library is no part of the runtime


def _host(step: BuildStep, tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    ctx = BuildContext(
        variant=step.variant,
        version="0.1.0",
        staged=tmp_path / "staged",
        work=tmp_path / "work",
        env={},
        prefix=None,
        toolchain=Toolchain(backend="rocm", prefix=None, version=None, found_by="test"),
    )
    settings, env = pep517_invocation(ctx, step)
    pairs = dict(s.removeprefix("-C").split("=", 1) for s in settings)
    pairs.pop("build-dir", None)  # the host's per-Python work directory, not a setting of the variant
    return pairs, env


def _container(step: BuildStep) -> tuple[dict[str, str], dict[str, str]]:
    environment = pytest.importorskip("cibuildwheel.environment")
    options = cibw.cibuildwheel_options((step,))
    pairs = dict(token.split("=", 1) for token in shlex.split(options.get("config-settings", "")))
    env = environment.parse_environment(options.get("environment", "")).as_dictionary({})
    return pairs, env


@pytest.mark.parametrize("shape", sorted(PYPROJECTS))
def test_container_configuration_carries_exactly_the_host_settings(shape: str, tmp_path: Path) -> None:
    """Parity: for each engine shape, cibuildwheel gets the CMake settings, environment, excludes
    and floor the host build uses. setuptools engines used to lose their defines in containers."""
    plan = make_plan(_matrix(tmp_path, shape=shape))
    step = next(s for s in plan.builds_of("rocm") if s.python == "3.12")
    assert step.variant.build.backend == shape
    host_pairs, host_env = _host(step, tmp_path)
    container_pairs, container_env = _container(step)
    assert container_pairs == host_pairs
    assert container_env == host_env
    if shape == "setuptools":
        assert shlex.split(host_env["CMAKE_ARGS"]) == ["-DXFER_BACKEND=hip", "-DXFER_FLAGS=-O2 -g0"]
    elif shape == "meson-python":
        assert host_pairs["setup-args"] == "-DXFER_FLAGS=-O2 -g0"  # repeated keys: the last shown here
    else:
        assert host_pairs["cmake.define.XFER_FLAGS"] == "-O2 -g0"
    repair = shlex.split(cibw.cibuildwheel_options((step,))["repair-wheel-command"])
    assert repair[repair.index("--plat") + 1] == step.variant.floor
    assert [repair[i + 1] for i, w in enumerate(repair) if w == "--exclude"] == list(step.variant.excludes)
    assert cibw.cibuildwheel_options((step,))["build"] == f"{step.python_tag}-manylinux_x86_64"


def test_the_build_backend_is_read_from_the_engine(tmp_path: Path) -> None:
    for shape, text in PYPROJECTS.items():
        (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
        assert read_build_backend(tmp_path) == shape
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    assert read_build_backend(tmp_path) == "setuptools", "PEP 517: no build-backend means setuptools"
    (tmp_path / "pyproject.toml").write_text("not toml [", encoding="utf-8")
    assert read_build_backend(tmp_path) == "other"


@pytest.mark.parametrize(
    ("pattern", "tag", "version"),
    [
        ("v*", "v1.2.0", "1.2.0"),
        ("release-[0-9]*", "release-1.2.0", "1.2.0"),
        ("rel-?*", "rel-1.2.0", "1.2.0"),
    ],
)
def test_one_tag_prefix_rule_for_publish_and_wheel_name(pattern: str, tag: str, version: str) -> None:
    """The tag pattern's literal prefix was worked out twice (and differed for `?` and `[`)."""
    assert tag_version(tag, pattern) == version
    if pattern != "rel-?*":
        assert version_from_tag(tag, pattern) == version


def test_every_variant_is_resolved_once_per_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from release.plan import steps

    calls: list[str] = []
    real = steps.resolve_variant

    def counting(loaded: LoadedMatrix, name: str, **kw: object) -> object:
        calls.append(name)
        return real(loaded, name, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(steps, "resolve_variant", counting)
    plan = steps.make_plan(_matrix(tmp_path))
    assert sorted(calls) == sorted(plan.variants)
    # the first machine's steps share the plan's object; another machine's steps share the one
    # `for_machine` made for it (its floor), never a resolution of their own
    first = [s for s in plan.builds if s.variant.floor == plan.variants[s.variant.name].floor]
    assert first, "the first machine's steps"
    assert all(s.variant is plan.variants[s.variant.name] for s in first), "steps share the one object"
    others: dict[tuple[str, str], set[int]] = {}
    for s in plan.builds:
        if s not in first:
            others.setdefault((s.variant.name, s.variant.floor), set()).add(id(s.variant))
    assert all(len(ids) == 1 for ids in others.values()), others


@pytest.fixture(autouse=True)
def _interpreters(fake_interpreters: object) -> None:
    """make_command reads the interpreters it gives an image: fakes, not this machine's."""


def _rocm_build_image(tmp_path: Path, **build_image: object) -> tuple[str | None, Recipe]:
    """(the rocm local build image's GCC major, its make-image.sh recipe) for a matrix whose
    `variants.rocm.build_image` has `build_image` merged in (`debian` keys merged too)."""
    from release.machine.images import recipe_of

    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    declared = data["variants"]["rocm"]["build_image"]
    debian = build_image.pop("debian", {})
    assert isinstance(debian, dict)
    declared["debian"] = {**declared["debian"], **debian}
    declared.update(build_image)
    path = tmp_path / "matrix.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    recipe = resolve_variant(loads(text, path=path, backends_dir=BACKENDS), "rocm").build_image.local_recipe
    assert recipe is not None
    return recipe.gcc, recipe_of(recipe)


@pytest.mark.parametrize(
    ("build_image", "gcc"),
    [
        ({}, "14"),  # the release image (manylinux_2_28 from the floor) compiles with GCC 14
        ({"release": "quay.io/pypa/manylinux_2_28_x86_64:2025.01.01-1"}, "14"),
        ({"release": "manylinux_2_34"}, "14"),
        ({"debian": {"gcc": "13"}}, "13"),  # the matrix names another
        ({"release": "localhost/my-builder:1"}, None),  # not known: the suite's g++
        ({"debian": {"gcc": "suite"}}, None),
    ],
)
def test_the_local_build_image_compiles_with_the_release_images_gcc(
    tmp_path: Path, build_image: dict[str, object], gcc: str | None
) -> None:
    resolved, recipe = _rocm_build_image(tmp_path, **build_image)
    assert resolved == gcc
    assert recipe.gcc == (gcc or "")


def test_the_cuda_build_image_installs_the_declared_toolkit_with_the_backends_command(tmp_path: Path) -> None:
    """`toolkit_install: [--from-pypi]`: make-image.sh runs cuda.json's install command for the
    variant's toolkit with those arguments; `[]` runs it with none (rocm: it adds the host-only
    hipcc to Debian's HIP); a recipe without the key installs nothing."""
    from release.machine.images import recipe_of

    plan = make_plan(_matrix(tmp_path))
    cuda, rocm = plan.variant("cuda").build_image.local_recipe, plan.variant("rocm").build_image.local_recipe
    cpu = plan.variant("cpu").build_image.local_recipe
    assert cuda is not None and rocm is not None and cpu is not None
    assert cuda.toolkit_install == "bash scripts/install-cuda.sh 13.0 --from-pypi"
    assert recipe_of(cuda).toolkit_install == cuda.toolkit_install
    assert rocm.toolkit_install == "bash scripts/install-rocm.sh 7.2"
    assert cpu.toolkit_install is None and recipe_of(cpu).toolkit_install == ""


def test_serving_images_get_no_compiler(tmp_path: Path) -> None:
    rocm = resolve_variant(_matrix(tmp_path), "rocm")
    assert all(i.local.gcc is None for i in rocm.images if i.local is not None)
