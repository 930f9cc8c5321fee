"""The compiler cache of container builds (`release.builder.compiler_cache`): its key, what it adds to
cibuildwheel's settings, the per-Python hits read back, and the cold cache of a rebuild."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from release.builder import cibw, compiler_cache, container
from release.config.matrix import LoadedMatrix, loads
from release.machine.containers import ContainerEngine
from release.plan.steps import BuildStep, make_plan

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "standins" / "shared_core"
BACKENDS = ROOT / "packaging" / "backends"


def _steps(tmp_path: Path, extra: str = "") -> tuple[BuildStep, ...]:
    """The shared-core stand-in's steps, its matrix placed in `tmp_path` (the work root's parent)."""
    text = (STANDIN / "matrix.yaml").read_text(encoding="utf-8").replace("source: .", f"source: {STANDIN}")
    text = text.replace("    backend: cpu\n", f"    backend: cpu\n{extra}")
    loaded: LoadedMatrix = loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    return make_plan(loaded).builds_of("cpu")


def _key(**changed: object) -> str:
    parts: dict[str, object] = {
        "image": "sha256:aaa",
        "compilers": "cc /usr/bin/gcc-14 gcc (Debian 14.2.0-19) 14.2.0 0123",
        "before_all": "",
        "toolkit": "",
        "options": {"CIBW_ENVIRONMENT": "A=1", "CIBW_CONFIG_SETTINGS": "x=1", "CIBW_BUILD": "cp312-*"},
    }
    return compiler_cache.cache_key(**{**parts, **changed})  # type: ignore[arg-type]


def test_an_image_compiler_toolkit_or_flag_change_is_another_cache() -> None:
    base = _key()
    assert _key() == base
    changed = [
        _key(image="sha256:bbb"),
        _key(compilers="cc /usr/bin/gcc-15 gcc (Debian 15.1.0-1) 15.1.0 4567"),
        _key(before_all="bash install-cuda.sh 13.0"),
        _key(toolkit="13.0"),
        _key(options={"CIBW_ENVIRONMENT": "A=1 CXXFLAGS=-O1", "CIBW_CONFIG_SETTINGS": "x=1"}),
        _key(options={"CIBW_ENVIRONMENT": "A=1", "CIBW_CONFIG_SETTINGS": "x=2"}),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    # Which Pythons a run builds is not part of it: every Python shares the cache.
    assert (
        _key(options={"CIBW_ENVIRONMENT": "A=1", "CIBW_CONFIG_SETTINGS": "x=1", "CIBW_BUILD": "cp310-*"})
        == base
    )


def test_the_additions_mount_the_cache_and_keep_the_variants_own_settings(tmp_path: Path) -> None:
    environment = pytest.importorskip("cibuildwheel.environment")
    steps = _steps(tmp_path, '    env: {CMAKE_CXX_COMPILER_LAUNCHER: "", CXXFLAGS: "-O1"}\n')
    options = cibw.cibuildwheel_env(steps, image="localhost/x", before_build="true")
    options["CIBW_BEFORE_ALL"] = "make the toolkit environment"
    cache = compiler_cache.ContainerCache(tmp_path / "cache dir", tmp_path / "logs", shared=True)
    added = compiler_cache.cibuildwheel_additions(
        cache, options, run=1, install="install ccache", bin_dir="/t/bin", scikit_build=True
    )
    spelled = ContainerEngine("podman").cibuildwheel(compiler_cache.volumes(cache))
    engine, create = spelled.split("; create_args: ")
    assert engine == "podman"
    assert shlex.split(create) == [
        "--network=host",
        f"--volume={tmp_path / 'cache dir'}:{compiler_cache.CACHE_MOUNT}",
        f"--volume={tmp_path / 'logs'}:{compiler_cache.LOG_MOUNT}",
    ]
    parsed = environment.parse_environment(added["CIBW_ENVIRONMENT"]).as_dictionary({})
    assert parsed["CCACHE_DIR"] == compiler_cache.CACHE_MOUNT
    assert parsed["CCACHE_BASEDIR"] == compiler_cache.PROJECT
    assert parsed["CCACHE_STATSLOG"] == f"{compiler_cache.LOG_MOUNT}/run-1.log"
    assert parsed["CMAKE_C_COMPILER_LAUNCHER"] == "ccache"
    assert parsed["CMAKE_CXX_COMPILER_LAUNCHER"] == "", "the matrix's env wins over the cache's"
    assert parsed["CXXFLAGS"] == "-O1"
    # ccache once per container, after the toolkit's environment it goes into, where the image has
    # none; where that install fails, a stand-in that runs the compiler.
    once = added["CIBW_BEFORE_ALL"]
    assert once.startswith(
        "make the toolkit environment && if ! command -v ccache >/dev/null 2>&1; "
        f"then (install ccache && ln -sf /t/bin/ccache {compiler_cache.CCACHE_LINK}) || (printf "
    ), once
    assert 'exec "$@"' in once
    before = added["CIBW_BEFORE_BUILD"]
    assert "ccache" not in before.replace("CCACHE_STATSLOG", ""), "nothing is installed per Python"
    assert before.startswith(f"rm -rf {compiler_cache.BUILD_DIR}; ")
    assert before.endswith("; true")
    settings = dict(token.split("=", 1) for token in shlex.split(added["CIBW_CONFIG_SETTINGS"]))
    assert settings["build-dir"] == compiler_cache.BUILD_DIR


def test_a_variants_own_build_dir_and_other_backends_are_left_alone(tmp_path: Path) -> None:
    steps = _steps(tmp_path, '    config_settings: {build-dir: "build/{wheel_tag}"}\n')
    options = cibw.cibuildwheel_env(steps, image="localhost/x", before_build="x")
    cache = compiler_cache.ContainerCache(tmp_path, tmp_path, shared=True)
    kept = compiler_cache.cibuildwheel_additions(
        cache, options, run=0, install="i", bin_dir="b", scikit_build=True
    )
    assert "CIBW_CONFIG_SETTINGS" not in kept
    other = compiler_cache.cibuildwheel_additions(
        cache, {}, run=0, install="i", bin_dir="b", scikit_build=False
    )
    assert "CIBW_CONFIG_SETTINGS" not in other
    assert "rm -rf" not in other["CIBW_BEFORE_BUILD"]


def test_hits_and_misses_are_read_per_python(tmp_path: Path) -> None:
    cache = compiler_cache.ContainerCache(tmp_path / "c", tmp_path / "logs", shared=True)
    cache.logs.mkdir()
    (cache.logs / "run-0.log").write_text(
        "# release-python 3.12\n# /project/core/a.cpp\ncache_miss\ndirect_cache_miss\nlocal_storage_write\n"
        "# /project/src/b.c\ncache_miss\n"
        "# release-python 3.13\n# /project/core/a.cpp\ndirect_cache_hit\n# /project/src/b.c\ncache_miss\n",
        encoding="utf-8",
    )
    (cache.logs / "run-1.log").write_text(
        "# release-python 3.14\n# /project/core/a.cpp\npreprocessed_cache_hit\n", encoding="utf-8"
    )
    stats = compiler_cache.stats_by_python(cache)
    assert {python: s.text for python, s in stats.items()} == {
        "3.12": "0/2 (0%)",
        "3.13": "1/2 (50%)",
        "3.14": "1/1 (100%)",
    }


def test_a_rebuild_gets_a_cold_private_cache_and_says_so(tmp_path: Path) -> None:
    """No process runs for it: a rebuild never reads the image for a key."""
    (variant,) = {s.variant.name: s.variant for s in _steps(tmp_path)}.values()
    podman = ContainerEngine("podman")
    cache = compiler_cache.open_cache(variant, engine=podman, image="localhost/x", options={}, shared=False)
    assert cache is not None and not cache.shared
    assert cache.directory.parent == tmp_path / "build" / "cpu"
    assert cache.directory.name.startswith("ccache-cold-")
    assert list(cache.directory.iterdir()) == []
    assert "cold" in cache.describe()
    compiler_cache.finish(cache)
    assert not cache.directory.exists()


def test_the_shared_cache_is_under_the_work_root_and_old_keys_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (variant,) = {s.variant.name: s.variant for s in _steps(tmp_path)}.values()
    monkeypatch.setattr(compiler_cache, "compiler_identity", lambda engine, image: "cc gcc 14")
    directories = []
    for n in range(compiler_cache.KEEP + 2):
        monkeypatch.setattr(ContainerEngine, "image_id", lambda _engine, _image, n=n: f"sha256:{n}")
        cache = compiler_cache.open_cache(
            variant, engine=ContainerEngine("podman"), image="localhost/x", options={}, shared=True
        )
        assert cache is not None and cache.shared
        directories.append(cache.directory)
        compiler_cache.finish(cache)
        assert cache.directory.is_dir(), "a shared cache stays for the next build"
    assert all(d.parent == tmp_path / "build" / "ccache" / "cpu" for d in directories)
    assert len(set(directories)) == len(directories)
    assert sorted(p for p in directories[0].parent.iterdir()) == sorted(directories[-compiler_cache.KEEP :])


def test_the_toolkit_is_installed_once_per_container_and_the_repair_runs_from_it(tmp_path: Path) -> None:
    """Issue 47: every Python's before-build installed the toolkit (4-8 s each on the reference
    engine); now before-all makes one environment for it and each Python's repair runs from there."""
    steps = _steps(tmp_path)
    assert len(steps) > 1
    toolkit = container.toolkit_environment(container.install_command(" /project"))
    options = container.container_options(steps, image="localhost/x", toolkit=toolkit)
    once = options["CIBW_BEFORE_ALL"]
    assert once.startswith("(for v in 312 313 311 310; do p=/opt/python/cp$v-cp$v/bin/python; ")
    assert f'uv venv --quiet --python "$p" {container.TOOLKIT_VENV}' in once
    assert f"uv pip install --quiet --python {container.TOOLKIT_PYTHON} /project" in once
    assert options["CIBW_BEFORE_BUILD"] == "true"
    assert options["CIBW_REPAIR_WHEEL_COMMAND"].startswith(f"{container.TOOLKIT_PYTHON} -m release repair ")
    # Which Pythons a run builds does not pick the toolkit's interpreter: the cache key stays.
    alone = container.container_options(steps[:1], image="localhost/x", toolkit=toolkit)
    assert alone["CIBW_BEFORE_ALL"] == once
    # What `cibuildwheel-config` prints for release.yml is unchanged: the build's python repairs.
    assert cibw.cibuildwheel_options(steps)["repair-wheel-command"].startswith("python -m release repair ")


@pytest.mark.parametrize(
    ("engine", "variable"),
    [("podman", "CONTAINER_HOST"), ("podman", "CONTAINER_CONNECTION"), ("/usr/bin/docker", "DOCKER_HOST")],
)
def test_a_remote_engine_builds_without_a_mounted_cache(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    engine: str,
    variable: str,
) -> None:
    """A client of an engine elsewhere (the README's container, on this host's podman socket) would
    mount the engine's machine's path of the cache directory, which is not there: `podman create`
    failed with `statfs ...: no such file or directory`. It builds without one, and says why."""
    for name in ("CONTAINER_HOST", "CONTAINER_CONNECTION", "DOCKER_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "unix:///run/podman/podman.sock")

    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a remote engine's build opened a mounted cache")

    monkeypatch.setattr(compiler_cache, "open_cache", never)
    steps = _steps(tmp_path)
    client = ContainerEngine(engine)
    assert container._open_cache(steps, engine=client, image="localhost/x", toolkit="", shared=True) is None
    said = capsys.readouterr()
    remote = f"{variable}=unix:///run/podman/podman.sock"
    assert f"no compiler cache: the container engine is remote ({remote})" in said.out + said.err
