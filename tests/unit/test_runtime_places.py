"""Where a wheel's import finds its GPU runtime (`runtime_places` in the backend data, read by
`release/init/runtime_places.py::find_runtime`): in order, one copy, and bad input (a `rocm_sdk`
that raises, a nonce directory without the library, a broken ROCM_SDK_PRELOAD_LIBRARIES) ends in
the one-sentence message, never a traceback. The libraries loaded here are the C library the
process already holds (loading it again by any path gives the same copy)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.config.backends import load_backends
from release.init import runtime_places
from release.init.guard import guard_code
from release.init.runtime_places import find_runtime

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "scripts" / "therock-standin"
ROCM = [p.as_data() for p in load_backends(ROOT / "packaging" / "backends")["rocm"].runtime_places]


def _function(path: Path, name: str) -> str:
    source = path.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node) or ""


def test_the_engine_carries_the_toolkits_finder() -> None:
    engine = ROOT / "engine" / "python" / "xfer" / "_runtime.py"
    assert _function(engine, "find_runtime") == _function(Path(runtime_places.__file__), "find_runtime")


def _libc() -> Path:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.split(None, 5)[-1].strip()
            if os.path.basename(path).startswith("libc.so") or os.path.basename(path).startswith("libc-2"):
                return Path(path)
    pytest.fail("this process maps no C library")


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The stand-in `rocm_sdk` importable, its nonce-named library package in `tmp_path` (lib/ empty)."""
    core = tmp_path / "_rocm_sdk_core_10_0_0"
    (core / "lib").mkdir(parents=True)
    (core / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("rocm_sdk", "rocm_sdk._dist_info", "_rocm_sdk_core_10_0_0"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield core / "lib"
    for name in ("rocm_sdk", "rocm_sdk._dist_info", "_rocm_sdk_core_10_0_0"):
        sys.modules.pop(name, None)


def test_a_copy_already_loaded_is_the_one_used() -> None:
    found, looked = find_runtime("libc.so.6", ROCM)
    assert (found, looked) == ("libc.so.6", [])


def test_the_sdk_modules_directory_is_used_and_holds_the_exact_soname(
    sdk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocm_sdk._dist_info as info

    monkeypatch.setitem(info.LIBRARIES, "c", ("rocm-sdk-core", "libc.so*"))
    (sdk / "libc.so.6").symlink_to(_libc())
    only_sdk = [{"kind": "sdk-module", "module": "rocm_sdk"}]
    assert find_runtime("libc.so.6", only_sdk) == (str(sdk / "libc.so.6"), [])
    # find_libraries names a file, but its directory lacks the soname the wheel binds: not found
    found, looked = find_runtime("libc.so.7", only_sdk)
    assert found is None and looked == [
        f"the pip packages rocm_sdk.find_libraries('c') names (no libc.so.7 in {sdk})"
    ]


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("absent", "rocm_sdk is not installed"),
        ("raises", "rocm_sdk failed: RuntimeError: this SDK is broken"),
        ("empty-nonce-dir", "rocm_sdk failed: FileNotFoundError: Could not find rocm library 'amdhip64'"),
        ("no-core-package", "ModuleNotFoundError: Missing required rocm libraries"),
        ("broken-preload-variable", "rocm_sdk failed: FileNotFoundError"),
    ],
)
def test_bad_sdk_input_ends_in_the_sentence(
    case: str, why: str, sdk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "absent":
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(STANDIN), str(tmp_path))])
    elif case == "raises":
        broken = tmp_path / "broken"
        (broken / "rocm_sdk").mkdir(parents=True)
        (broken / "rocm_sdk" / "__init__.py").write_text("raise RuntimeError('this SDK\\nis broken')\n")
        monkeypatch.syspath_prepend(str(broken))
    elif case == "no-core-package":
        (tmp_path / "_rocm_sdk_core_10_0_0" / "__init__.py").unlink()
        (tmp_path / "_rocm_sdk_core_10_0_0").rename(tmp_path / "other")
    elif case == "broken-preload-variable":
        monkeypatch.setenv("ROCM_SDK_PRELOAD_LIBRARIES", ";amdhip64;no-such-library,")
    found, looked = find_runtime("libamdhip64.so.7", ROCM)
    assert found is None
    sdk_phrase = looked[2]
    assert sdk_phrase.startswith("the pip packages rocm_sdk.find_libraries('amdhip64') names (")
    assert why in sdk_phrase and "\n" not in sdk_phrase, sdk_phrase
    assert looked[0] == "already loaded in this process (no)"
    assert looked[3:] == ["/opt/rocm/core-*/lib", "/opt/rocm/lib"]


def test_directories_are_searched_newest_version_first(tmp_path: Path) -> None:
    for version in ("9.0", "10.0"):
        (tmp_path / f"core-{version}" / "lib").mkdir(parents=True)
        (tmp_path / f"core-{version}" / "lib" / "libc.so.6").symlink_to(_libc())
    place = [{"kind": "directory", "path": f"{tmp_path}/core-*/lib"}]
    assert find_runtime("libc.so.6", place)[0] == str(tmp_path / "core-10.0" / "lib" / "libc.so.6")


def test_a_file_that_does_not_load_is_said(tmp_path: Path) -> None:
    (tmp_path / "libamdhip64.so.7").write_bytes(b"not an ELF file")
    found, looked = find_runtime("libamdhip64.so.7", [{"kind": "directory", "path": str(tmp_path)}])
    assert found is None and looked[0].startswith(
        f"{tmp_path} ({tmp_path}/libamdhip64.so.7 did not load: OSError"
    )


def test_the_adopters_guard_names_every_place_in_one_sentence(
    sdk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs = ["libamdhip64.so.7"]

    class Metadata:
        def get_all(self, key: str) -> list[str]:
            return list(needs) if key == "Requires-External" else []

    class Dist:
        metadata = Metadata()

    def distribution(name: str) -> object:
        if name == "kv-rocm":
            return Dist()
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    backend = load_backends(ROOT / "packaging" / "backends")["rocm"]
    runtimes = {"libamdhip64.so.7": ("ROCm 7.x or 10.x", backend.runtime_help("libamdhip64.so.7"), ROCM)}
    code = compile(guard_code("kv", ["kv-cpu", "kv-rocm"], runtimes=runtimes), "kv/__init__.py", "exec")
    with pytest.raises(ImportError) as raised:
        exec(code, {})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "kv: kv-rocm needs libamdhip64.so.7 (ROCm 7.x or 10.x), and no copy of it was found"
    )
    for place in ("already loaded", "dynamic loader", "rocm_sdk.find_libraries('amdhip64')",
                  "/opt/rocm/core-*/lib", "/opt/rocm/lib", "rocm[libraries]"):  # fmt: skip
        assert place in message, place
    namespace: dict[str, object] = {}
    runtimes["libc.so.6"] = ("C", "", ROCM)
    needs[:] = ["libc.so.6"]  # one the process holds: found, and the guard leaves nothing behind
    exec(
        compile(guard_code("kv", ["kv-cpu", "kv-rocm"], runtimes=runtimes), "kv/__init__.py", "exec"),
        namespace,
    )
    assert "find_runtime" not in namespace and "_require_the_gpu_runtime" not in namespace


def test_the_therock_images_are_layers_made_with_their_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """matrix.yaml's TheRock stand-ins resolve into make-image.sh layouts the loader cannot see
    (`--runtime-via rocm_sdk` into the /opt/venv stand-in, `none` into core-10.0/lib with links),
    each given the toolkit's patchelf and interpreter for the RUNPATH and the stand-in's wheels;
    what a probe of such an image would record is 'absent' (the import finds it, not the loader)."""
    from release.config.matrix import load
    from release.machine import images
    from release.plan.imagefacts import expected_layout
    from release.plan.steps import make_plan

    monkeypatch.setattr(images, "self_contained_home", lambda v: Path(f"/p/{v}"))
    loaded = load(ROOT / "matrix.yaml")
    made = {i.name: i for i in make_plan(loaded).variants["rocm"].images}
    want = {
        "therock-pip": ("/opt/venv", "rocm_sdk", None, ("3.12",)),  # SGLang's rocm10 images
        "therock-os": ("/opt/rocm/core-10.0/lib", "none", "/opt/rocm/lib", ("3.12", "3.14")),  # + AMD vLLM
    }
    for name, (prefix, via, links, pythons) in want.items():
        local = made[name].local
        assert local is not None and (local.runtime_prefix, local.runtime_via, local.runtime_links) == (
            prefix,
            via,
            links,
        )
        recipe = images.recipe_of(local)
        assert recipe.runtime_via == via and recipe.runtime_links == (links or "")
        assert recipe.pythons == pythons and recipe.base_pythons  # a layer
        assert recipe.layer()[0] == "layout"
        assert expected_layout(loaded.matrix.images[name]) == expected_layout(
            loaded.matrix.images["rocm-absent"]
        )
    assert loaded.matrix.images["therock-pip"].companions == ("torch",)


def test_bad_runtime_places_are_one_line_each(tmp_path: Path) -> None:
    from release.errors import MatrixError

    data = json.loads((ROOT / "packaging" / "backends" / "rocm.json").read_text(encoding="utf-8"))
    cases = {
        "directory": (
            [{"kind": "directory", "path": "opt/rocm/lib"}],
            "runtime_places[0]: expected an absolute path",
        ),
        "module": (
            [{"kind": "loaded"}, {"kind": "sdk-module"}],
            "runtime_places[1]: an sdk-module place needs a `module`",
        ),
        "kind": ([{"kind": "nowhere"}], "nowhere"),
    }
    for places, says in cases.values():
        (tmp_path / "rocm.json").write_text(json.dumps({**data, "runtime_places": places}), encoding="utf-8")
        with pytest.raises(MatrixError) as raised:
            load_backends(tmp_path)
        assert says in str(raised.value), str(raised.value)
