"""Where each smoke leg runs: stand-ins for registry images (resolved once, in the plan), the
release's pulls, and the build image for wheels this host cannot install."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from release.config.matrix import Image, LoadedMatrix, Simulation, loads
from release.errors import SmokeError
from release.machine.containers import ContainerEngine
from release.plan.resolve import LocalImage, ResolvedImage, ResolvedVariant
from release.plan.steps import make_plan
from release.smoke import runner
from release.smoke.outcome import Outcome, summary
from release.smoke.placement import place, uninstallable
from release.smoke.selection import HOST_IMAGE
from release.wheel.names import parse_wheel_name

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
VLLM = (
    "docker.io/vllm/vllm-openai-rocm:v0.21.0"
    "@sha256:98a77b20df03adeb1cfc0ced009b4df6dd52b0a994ab99a32421f30876a9ae0c"
)
SGLANG = (
    "docker.io/lmsysorg/sglang:v0.5.16-rocm720-mi30x"
    "@sha256:80d04638deb64fac000fa565cb46e5d2f692173dc125a32a956014a6383ecaee"
)
HOST_236 = frozenset({"manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "linux_x86_64", "any"})


def _loaded(tmp_path: Path, edit: object = None) -> LoadedMatrix:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    if callable(edit):
        edit(data)
    text = yaml.safe_dump(data, sort_keys=False)
    return loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)


def _rocm(tmp_path: Path, edit: object = None) -> ResolvedVariant:
    return make_plan(_loaded(tmp_path, edit)).variants["rocm"]


def _image(variant: ResolvedVariant, name: str) -> ResolvedImage:
    return next(i for i in variant.images if i.name == name)


# -- resolution -----------------------------------------------------------------------------------


def test_serving_images_without_a_recipe_get_a_stand_in_of_the_declared_runtime(tmp_path: Path) -> None:
    rocm = _rocm(tmp_path)
    vllm, sglang = _image(rocm, "vllm-rocm"), _image(rocm, "sglang-rocm")
    assert vllm.local is None and vllm.standin is not None
    assert vllm.made_here is vllm.standin
    assert vllm.standin.tag == "localhost/xfer-standin-vllm-rocm"
    # packaging/backends/rocm.json: ROCm 7.2 binds libamdhip64.so.7, which experimental carries
    assert vllm.standin.packages == ("libamdhip64-7/experimental",)
    assert vllm.standin.suite == "trixie"  # the variant's build_image.debian.suite
    assert vllm.standin.pythons == ("3.12",)  # the image's own Pythons
    assert not vllm.standin.toolchain
    assert (vllm.standin.runtime_prefix, vllm.standin.runtime_via) == ("/opt/rocm/lib", "ld.so.conf.d")
    assert "libamdhip64.so*" in vllm.standin.runtime_globs
    assert sglang.standin is not None
    assert (sglang.standin.runtime_prefix, sglang.standin.runtime_via) == ("/opt/rocm/lib", "LD_LIBRARY_PATH")
    # Images with their own recipe are made from it, never stood in for.
    for name in ("rocm-distro", "rocm-opt-prefix", "rocm-ld-library-path", "rocm-absent", "rocm6-only"):
        image = _image(rocm, name)
        assert image.standin is None and image.local is not None
        assert image.made_here is image.local


def test_the_stand_in_follows_the_toolkit_major_and_the_build_suite(tmp_path: Path) -> None:
    def rocm5_trixie(data: dict[str, dict[str, dict[str, object]]]) -> None:
        rocm = data["variants"]["rocm"]
        rocm["toolkit"] = "5.7"
        rocm["build_image"] = {"debian": {"suite": "trixie", "packages": ["libamdhip64-dev"]}}

    standin = _image(_rocm(tmp_path, rocm5_trixie), "vllm-rocm").standin
    assert standin is not None
    assert (standin.packages, standin.suite) == (("libamdhip64-5",), "trixie")

    def no_build_image(data: dict[str, dict[str, dict[str, object]]]) -> None:
        data["variants"]["rocm"].pop("build_image")

    standin = _image(_rocm(tmp_path, no_build_image), "vllm-rocm").standin
    assert standin is not None and standin.suite == "sid"
    assert standin.packages == ("libamdhip64-7/experimental",)  # sid lacks HIP 7 too

    def rocm6_sid(data: dict[str, dict[str, dict[str, object]]]) -> None:
        data["variants"]["rocm"]["toolkit"] = "6.4"
        data["variants"]["rocm"]["build_image"] = {"debian": {"suite": "sid"}}

    standin = _image(_rocm(tmp_path, rocm6_sid), "vllm-rocm").standin
    assert standin is not None and standin.packages == ("libamdhip64-6",)  # sid's own

    def rocm10(data: dict[str, dict[str, dict[str, object]]]) -> None:
        data["variants"]["rocm"]["toolkit"] = "10.0"  # still libamdhip64.so.7

    standin = _image(_rocm(tmp_path, rocm10), "vllm-rocm").standin
    assert standin is not None and standin.packages == ("libamdhip64-7/experimental",)


def test_no_stand_in_without_a_debian_runtime_for_the_toolkit(tmp_path: Path) -> None:
    def cuda_image(data: dict[str, dict[str, dict[str, object]]]) -> None:
        data["images"]["vllm-cuda"] = {  # cuda.json names no Debian package for its runtime
            "container": "docker.io/vllm/vllm-openai:v0.21.0",
            "python": ["3.12"],
            "simulate": {"runtime": "system"},
        }
        data["variants"]["cuda"]["images"] = ["vllm-cuda"]

    cuda = make_plan(_loaded(tmp_path, cuda_image)).variants["cuda"]
    vllm = _image(cuda, "vllm-cuda")
    assert vllm.standin is None and vllm.made_here is None


def test_no_stand_in_for_an_image_without_a_container_reference(tmp_path: Path) -> None:
    cpu = make_plan(_loaded(tmp_path)).variants["cpu"]
    assert [(i.name, i.standin) for i in cpu.images] == [("clean-minbase", None)]


# -- where a leg runs -------------------------------------------------------------------------------


def _everything_usable(_recipe: LocalImage) -> bool:
    return True


def test_without_pull_a_serving_image_runs_in_its_stand_in(tmp_path: Path) -> None:
    vllm = _image(_rocm(tmp_path), "vllm-rocm")
    where = place("vllm-rocm", vllm.image, vllm, "3.12", engine="podman", pull=False,
                  usable=_everything_usable)  # fmt: skip
    assert where.container == "localhost/xfer-standin-vllm-rocm"
    assert where.recipe is vllm.standin and where.pull is None
    assert where.runner == f"stand-in for {VLLM}: podman container localhost/xfer-standin-vllm-rocm"


def test_with_pull_a_serving_image_is_never_stood_in_for(tmp_path: Path) -> None:
    vllm = _image(_rocm(tmp_path), "vllm-rocm")
    where = place("vllm-rocm", vllm.image, vllm, "3.12", engine="podman", pull=True,
                  usable=_everything_usable)  # fmt: skip
    assert (where.container, where.pull, where.recipe, where.runner) == (VLLM, VLLM, None, None)


def test_with_pull_the_rehearsals_named_stand_in_runs_instead_of_a_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RELEASE_IMAGE_STANDINS (the rehearsal sets it: no registry here) maps the pinned reference to
    a local tag: `--pull` runs that image, names it, and pulls nothing; other references still pull."""
    vllm = _image(_rocm(tmp_path), "vllm-rocm")
    pairs = f"{VLLM}=localhost/xfer-standin-vllm-rocm,docker.io/x/y:1=localhost/y"
    monkeypatch.setenv("RELEASE_IMAGE_STANDINS", pairs)
    where = place("vllm-rocm", vllm.image, vllm, "3.12", engine="podman", pull=True,
                  usable=_everything_usable)  # fmt: skip
    assert (where.container, where.pull, where.recipe) == ("localhost/xfer-standin-vllm-rocm", None, None)
    assert where.runner == (
        f"stand-in for {VLLM}: podman container localhost/xfer-standin-vllm-rocm "
        "(no registry; RELEASE_IMAGE_STANDINS)"
    )
    monkeypatch.setenv("RELEASE_IMAGE_STANDINS", "docker.io/x/y:1=localhost/y")
    where = place("vllm-rocm", vllm.image, vllm, "3.12", engine="podman", pull=True,
                  usable=_everything_usable)  # fmt: skip
    assert (where.container, where.pull) == (VLLM, VLLM)


def test_without_an_engine_or_a_usable_stand_in_the_serving_image_is_simulated(tmp_path: Path) -> None:
    vllm = _image(_rocm(tmp_path), "vllm-rocm")
    where = place("vllm-rocm", vllm.image, vllm, "3.12", engine=None, pull=False, usable=_everything_usable)
    assert where.container is None and where.note == ""
    where = place("vllm-rocm", vllm.image, vllm, "3.12", engine="podman", pull=False, usable=lambda _r: False)
    assert where.container is None
    assert where.note == "localhost/xfer-standin-vllm-rocm is absent, only root makes it: simulated"


def test_local_recipes_still_win_with_and_without_pull(tmp_path: Path) -> None:
    distro = _image(_rocm(tmp_path), "rocm-distro")
    for pull in (False, True):
        where = place("rocm-distro", distro.image, distro, "3.12", engine="podman", pull=pull,
                      usable=_everything_usable)  # fmt: skip
        assert where.container == "localhost/xfer-smoke-rocm-distro" and where.runner is None


@pytest.mark.parametrize(
    ("wheel", "reason"),
    [
        ("x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl", ""),
        ("x-0.1.0-cp312-cp312-manylinux_2_36_x86_64.whl", ""),
        ("x-0.1.0-cp312-cp312-linux_x86_64.whl", ""),
        ("x-0.1.0-py3-none-any.whl", ""),
        ("x-0.1.0-cp312-cp312-manylinux_2_39_x86_64.whl", "host glibc 2.36 cannot install manylinux_2_39"),
        (
            "x-0.1.0-cp312-cp312-manylinux_2_39_x86_64.manylinux_2_40_x86_64.whl",
            "host glibc 2.36 cannot install manylinux_2_40",
        ),
        ("x-0.1.0-cp312-cp312-manylinux_2_28_aarch64.whl", "host glibc 2.36 cannot install manylinux_2_28"),
    ],
)
def test_which_wheels_this_host_cannot_install(wheel: str, reason: str) -> None:
    assert uninstallable(parse_wheel_name(wheel), HOST_236, "glibc 2.36") == reason


REFUSED = "host glibc 2.36 cannot install manylinux_2_39"


def _host_image() -> Image:
    return Image(simulate=Simulation(runtime="absent"), expect="runtime-missing")


def test_a_wheel_the_host_cannot_install_runs_its_host_leg_in_the_build_image(tmp_path: Path) -> None:
    rocm = _rocm(tmp_path)
    build = rocm.build_image.local_recipe
    assert build is not None and build.tag == "localhost/xfer-build-rocm"
    where = place(HOST_IMAGE, _host_image(), None, "3.12", engine="podman", pull=False,
                  usable=_everything_usable, cannot_install=REFUSED, build_image=build)  # fmt: skip
    assert (where.container, where.recipe) == (build.tag, build)
    assert where.runner == f"podman container localhost/xfer-build-rocm ({REFUSED})"
    # The build image carries the declared runtime where the distribution puts it.
    assert where.image.simulate == Simulation(runtime="system") and where.image.expect == "pass"
    # An installable wheel stays on the host.
    where = place(HOST_IMAGE, _host_image(), None, "3.12", engine="podman", pull=False,
                  usable=_everything_usable, build_image=build)  # fmt: skip
    assert where.container is None and where.image == _host_image()


def test_a_simulated_leg_moves_only_where_the_build_image_has_its_layout(tmp_path: Path) -> None:
    rocm = _rocm(tmp_path)
    build = rocm.build_image.local_recipe
    system = Image(simulate=Simulation(runtime="system"))
    where = place("somewhere", system, None, "3.12", engine="podman", pull=False,
                  usable=_everything_usable, cannot_install=REFUSED, build_image=build)  # fmt: skip
    assert where.container == "localhost/xfer-build-rocm" and where.image is system
    prefix = Image(simulate=Simulation(runtime="prefix", prefix="/opt/rocm/lib"))
    where = place("prefixed", prefix, None, "3.12", engine="podman", pull=False,
                  usable=_everything_usable, cannot_install=REFUSED, build_image=build)  # fmt: skip
    assert where.container is None
    layout = "does not have this image's layout (prefix runtime)"
    assert where.install_hint == f"{REFUSED}, and the build image localhost/xfer-build-rocm {layout}"


@pytest.mark.parametrize(
    ("engine", "has_build", "why"),
    [
        (None, True, "no podman or docker answers to run it in the variant's build image"),
        ("podman", False, "the variant declares no local build image (build_image.debian) to run it in"),
    ],
)
def test_without_a_container_the_host_leg_stays_here_and_says_why(
    tmp_path: Path, engine: str | None, has_build: bool, why: str
) -> None:
    build = _rocm(tmp_path).build_image.local_recipe if has_build else None
    where = place(HOST_IMAGE, _host_image(), None, "3.12", engine=engine, pull=False,
                  usable=_everything_usable, cannot_install=REFUSED, build_image=build)  # fmt: skip
    assert where.container is None
    assert where.note == where.install_hint == f"{REFUSED}, and {why}"


# -- the run: runner column and failed pulls ---------------------------------------------------------


def _wheelhouse(tmp_path: Path, platform: str) -> Path:
    directory = tmp_path / "wheelhouse" / "rocm"
    directory.mkdir(parents=True)
    for tag in ("cp310", "cp312"):  # SGLang's ROCm image holds Python 3.10, vLLM's 3.12
        (directory / f"xfer_engine_rocm-0.1.0-{tag}-{tag}-{platform}.whl").write_bytes(b"")
    return tmp_path / "wheelhouse"


@pytest.fixture
def legs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Every leg the run starts: (image, container tag, runner); nothing really runs."""
    started: list[tuple[str, str, str]] = []

    def run(self: runner.Smoke, _interpreter: Path, _runtime: object) -> Outcome:
        engine, tag = self.container or ("", "")
        self.outcome.runner = self.runner or (f"{engine} container {tag}" if tag else "simulation")
        started.append((self.image_name, tag, self.outcome.runner))
        return self.outcome

    monkeypatch.setattr(runner.Smoke, "run", run)
    monkeypatch.setattr(runner, "file_sha256", lambda _p: "0" * 64)
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: ContainerEngine("podman")))
    monkeypatch.setattr(runner, "local_image_usable", lambda _e, _r: True)
    monkeypatch.setattr(runner, "ensure_image", lambda _e, _r, log: None)
    monkeypatch.setattr(runner, "host_platforms", lambda: HOST_236)
    monkeypatch.setattr(runner, "host_libc", lambda: "glibc 2.36")
    monkeypatch.setattr(runner, "container_interpreter", lambda v: Path(f"/opt/python/{v}/bin/python"))
    return started


def test_the_smoke_table_names_stand_ins_and_the_build_image(
    tmp_path: Path, legs: list[tuple[str, str, str]]
) -> None:
    rocm = _rocm(tmp_path)
    wheelhouse = _wheelhouse(tmp_path, "manylinux_2_39_x86_64")
    images = ["host", "rocm-distro", "vllm-rocm", "sglang-rocm"]
    outcomes = runner.smoke_variant(rocm, wheelhouse=wheelhouse, python="3.12", images=images, log=print)
    serving = ["sglang-rocm"]
    outcomes += runner.smoke_variant(rocm, wheelhouse=wheelhouse, python="3.10", images=serving, log=print)
    assert [(image, tag) for image, tag, _ in legs] == [
        ("host", "localhost/xfer-build-rocm"),
        ("rocm-distro", "localhost/xfer-smoke-rocm-distro"),
        ("vllm-rocm", "localhost/xfer-standin-vllm-rocm"),
        ("sglang-rocm", "localhost/xfer-standin-sglang-rocm"),
    ]
    table = summary(outcomes)
    assert f"podman container localhost/xfer-build-rocm ({REFUSED})" in table
    assert f"stand-in for {VLLM}: podman container localhost/xfer-standin-vllm-rocm" in table
    assert f"stand-in for {SGLANG}: podman container localhost/xfer-standin-sglang-rocm" in table


def test_with_pull_a_failed_pull_fails_that_leg_naming_the_reference(
    tmp_path: Path, legs: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def pull(_engine: ContainerEngine, reference: str, *, log: object) -> None:
        if "vllm" in reference:
            msg = f"cannot pull {reference}: no registry"
            raise SmokeError(msg)

    monkeypatch.setattr(ContainerEngine, "pull", pull)
    monkeypatch.setattr(runner, "image_interpreter", lambda _e, _r, _v: Path("/usr/bin/python3.12"))
    rocm = _rocm(tmp_path)
    wheelhouse = _wheelhouse(tmp_path, "manylinux_2_28_x86_64")
    images = ["vllm-rocm", "sglang-rocm"]
    outcomes = runner.smoke_variant(rocm, wheelhouse=wheelhouse, python=None, images=images,
                                    log=lambda _l: None, pull=True)  # fmt: skip
    by_image = {o.image: o for o in outcomes}
    assert not by_image["vllm-rocm"].ok
    assert by_image["vllm-rocm"].error == f"cannot pull {VLLM}: no registry"
    assert by_image["vllm-rocm"].runner == f"podman container {VLLM}"
    # The other serving image ran, from its reference: no stand-in with --pull.
    assert legs == [("sglang-rocm", SGLANG, f"podman container {SGLANG}")]
