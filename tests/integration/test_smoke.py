"""`release smoke` end to end: fresh venvs, the simulated images, the minbase image, conflicts.

Two kinds of wheels: small hand-made ones (a package that loads libamdhip64 with ctypes), which
prove the smoke machinery on its own, and the real engine wheels from `host_wheelhouse`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from release.config.matrix import load
from release.machine.interpreters import find_interpreter
from release.plan.steps import make_plan
from release.smoke.image import distribution_libdir
from release.smoke.runner import smoke_variant

from .conftest import (
    HOST_HIP,
    HOST_HIP_PYTHONS,
    NEWEST,
    ROOT,
    fresh_venv,
    tag,
    toolkit,
    write_wheel,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="simulated images need root (mount namespaces)"),
]

HIP = distribution_libdir() / "libamdhip64.so.5"
needs_hip = pytest.mark.skipif(not HIP.exists(), reason="Debian's HIP runtime is not installed")
PY = "3.12" if find_interpreter("3.12") else f"{sys.version_info[0]}.{sys.version_info[1]}"

FAKE_INIT = """
import ctypes
try:
    _hip = ctypes.CDLL("libamdhip64.so.5")
except OSError:
    raise ImportError(
        "fakexfer (fake-engine-rocm) needs the HIP runtime libamdhip64.so.5, which the loader cannot find:"
        " install it or pick fake-engine-cpu"
    ) from None
"""
FAKE_MAIN = """import json
import sys

def master():
    print("fake-master 0.1.0")

if __name__ == "__main__":
    if "--log" in sys.argv:
        print("INFO fakexfer: transport tcp up")  # a library's log line before the verdict
    print(json.dumps({"ok": %s}))
"""


def make_wheel(directory: Path, *, dist: str, python: str, init: str, ok: bool = True) -> Path:
    """A minimal wheel for `fakexfer`, written by hand (no build backend, no process)."""
    tag = "cp" + python.replace(".", "")
    norm = dist.replace("-", "_")
    info = f"{norm}-0.1.0.dist-info"
    files = {
        "fakexfer/__init__.py": init,
        "fakexfer/__main__.py": FAKE_MAIN % ("True" if ok else "False"),
        f"{info}/entry_points.txt": "[console_scripts]\nfake-master = fakexfer.__main__:master\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n",
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}-{tag}-linux_x86_64\n"
        ),
    }
    return write_wheel(directory / f"{norm}-0.1.0-{tag}-{tag}-linux_x86_64.whl", files)


def fake_matrix(directory: Path, *, ok: bool = True) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"].update(
        source=str(ROOT / "engine"),
        import_name="fakexfer",
        scripts=["fake-master"],
        smoke={
            "commands": [["fake-master", "--version"], ["{python}", "-m", "fakexfer", "selftest", "--json"]]
        },
    )
    data["python"] = [PY]
    for image in data["images"].values():
        image.pop("debian", None)  # the fake wheels bind the host's HIP 5.2: simulate, no sid containers
    data["variants"] = {k: v for k, v in data["variants"].items() if k in ("cpu", "rocm")}
    data["variants"]["cpu"]["distribution"] = "fake-engine-cpu"
    data["variants"]["rocm"]["distribution"] = "fake-engine-rocm"
    if HOST_HIP:  # the fake wheels bind the host's runtime (libamdhip64.so.5): declare its ROCm
        data["variants"]["rocm"]["toolkit"] = HOST_HIP
        data["variants"]["rocm"].pop("build_image", None)
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    make_wheel(directory / "wheelhouse" / "rocm", dist="fake-engine-rocm", python=PY, init=FAKE_INIT, ok=ok)
    make_wheel(directory / "wheelhouse" / "cpu", dist="fake-engine-cpu", python=PY, init="", ok=ok)
    return path


@needs_hip
@pytest.mark.slow  # 52 s of its own in the fresh run: every simulated layout, each a namespace
def test_fake_rocm_wheel_in_every_simulated_layout(tmp_path: Path) -> None:
    loaded = load(fake_matrix(tmp_path))
    images = ["host", "rocm-distro", "rocm-opt-prefix", "rocm-ld-library-path", "rocm-absent"]
    lines: list[str] = []
    outcomes = smoke_variant(
        make_plan(loaded).variant("rocm"),
        wheelhouse=tmp_path / "wheelhouse",
        python=PY,
        images=images,
        log=lines.append,
    )
    by_image = {o.image: o for o in outcomes}
    assert sorted(by_image) == sorted(images)
    assert all(o.ok for o in outcomes), "\n".join(lines)
    location = {
        o.image: next(s.detail for s in o.steps if s.name == "runtime location")
        for o in outcomes
        if o.expect == "pass"
    }
    assert Path(location["rocm-distro"]).parent.resolve() == distribution_libdir().resolve()
    assert location["rocm-opt-prefix"] == "/opt/rocm-7.2.4/lib/libamdhip64.so.5.2.21153"
    assert location["rocm-ld-library-path"] == "/opt/rocm/lib/libamdhip64.so.5.2.21153"
    refused = next(s for s in by_image["rocm-absent"].steps if s.name == "import fakexfer refused")
    assert refused.detail.startswith("ImportError: fakexfer (fake-engine-rocm) needs the HIP runtime")


@needs_hip
def test_a_bare_loader_error_fails_the_absent_image(tmp_path: Path) -> None:
    matrix = fake_matrix(tmp_path)
    bare = 'import ctypes\nctypes.CDLL("libamdhip64.so.5")\n'
    (tmp_path / "wheelhouse" / "rocm").joinpath(
        next((tmp_path / "wheelhouse" / "rocm").iterdir()).name
    ).unlink()
    make_wheel(tmp_path / "wheelhouse" / "rocm", dist="fake-engine-rocm", python=PY, init=bare)
    outcomes = smoke_variant(
        make_plan(load(matrix)).variant("rocm"),
        wheelhouse=tmp_path / "wheelhouse",
        python=PY,
        images=["rocm-absent"],
        log=lambda _line: None,
    )
    (outcome,) = outcomes
    assert not outcome.ok
    assert outcome.error.startswith("import fakexfer refused: bare loader error: OSError: libamdhip64.so.5:")


def test_cli_reports_a_failing_selftest_with_exit_7_and_the_output_tail(tmp_path: Path) -> None:
    matrix = fake_matrix(tmp_path, ok=False)
    proc = toolkit(
        "--matrix", str(matrix), "smoke", "--variant", "cpu", "--python", PY, "--image", "host", check=False
    )
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "python -m fakexfer selftest --json ... FAILED" in proc.stdout
    assert '  | {"ok": false}' in proc.stdout
    assert "error: 1 smoke check(s) failed:" in proc.stderr
    assert "reported ok: false" in proc.stderr


def test_a_command_that_logs_a_line_then_reports_ok_false_fails_the_leg(tmp_path: Path) -> None:
    """The verdict is the JSON object on the last line (issue 43: a log line first hid it);
    `{import_name}` is the variant's; `--verbose` and the JSON report show what each command
    printed, passing or not. (A self-test that prints no verdict: tests/unit/test_smoke_verdict.py.)"""
    matrix = fake_matrix(tmp_path, ok=False)
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    data["engine"]["smoke"] = {
        "commands": [["fake-master", "--version"]],
        "self_tests": [["{python}", "-m", "{import_name}", "selftest", "--log"]],
    }
    matrix.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    argv = ("--matrix", str(matrix), "smoke", "--variant", "cpu", "--python", PY, "--image", "host")
    proc = toolkit(*argv, "--json", "--verbose", check=False)
    assert proc.returncode == 7, proc.stdout + proc.stderr
    (result,) = json.loads(proc.stdout)["results"]
    steps = {s["name"]: s for s in result["steps"]}
    failed = steps["python -m fakexfer selftest --log"]
    assert not failed["ok"] and failed["detail"] == "reported ok: false", steps
    assert failed["output"] == 'INFO fakexfer: transport tcp up\n{"ok": false}', failed
    passed = steps["fake-master --version"]
    assert passed["ok"] and passed["output"] == "fake-master 0.1.0", passed
    assert "fake-master --version (ok)\n  | fake-master 0.1.0" in proc.stderr, proc.stderr  # --verbose


def test_cli_json_output(tmp_path: Path) -> None:
    matrix = fake_matrix(tmp_path)
    proc = toolkit("--matrix", str(matrix), "smoke", "--variant", "cpu", "--image", "host", "--json")
    data = json.loads(proc.stdout)
    assert data["schema_version"] == 1
    assert data["ok"] is True
    (result,) = data["results"]
    assert result["image"] == "host"
    assert (
        result["wheel"]
        == f"fake_engine_cpu-0.1.0-cp{PY.replace('.', '')}-cp{PY.replace('.', '')}-linux_x86_64.whl"
    )
    names = [s["name"] for s in result["steps"]]
    assert names[-2:] == [
        "fake-master --version",
        "{python} -m fakexfer selftest --json".replace("{python}", "python"),
    ]
    assert f"[{PY} host] import fakexfer ... ok" in proc.stderr


def test_minbase_image_with_the_fake_cpu_wheel(tmp_path: Path) -> None:
    if not shutil.which("debootstrap") and not Path("/usr/sbin/debootstrap").exists():
        pytest.skip("debootstrap is not installed")
    matrix = fake_matrix(tmp_path)
    proc = toolkit("--matrix", str(matrix), "smoke", "--variant", "cpu", "--image", "clean-minbase")
    assert "clean-minbase" in proc.stdout
    assert "1/1 passed" in proc.stdout


# -- the real engine wheels ----------------------------------------------------------------------


@needs_hip
@pytest.mark.slow
def test_rocm_wheel_passes_in_distro_and_prefix_layouts_and_refuses_without_runtime(
    host_wheelhouse: tuple[Path, Path], tmp_path: Path
) -> None:
    matrix, built = host_wheelhouse
    wheelhouse = tmp_path / "wheelhouse"  # the wheels of the Pythons that can load the host's HIP
    (wheelhouse / "rocm").mkdir(parents=True)
    for version in HOST_HIP_PYTHONS:
        for path in (built / "rocm").glob(f"*-{tag(version)}-*"):
            shutil.copy2(path, wheelhouse / "rocm")
    for wheel in (wheelhouse / "rocm").glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            assert not [n for n in archive.namelist() if "libamdhip64" in n], "the wheel vendors the runtime"
    proc = toolkit(
        "--matrix",
        str(matrix),
        "smoke",
        "--variant",
        "rocm",
        "--wheelhouse",
        str(wheelhouse),
        "--json",
        "--image",
        "rocm-distro",
        "--image",
        "rocm-opt-prefix",
        "--image",
        "rocm-ld-library-path",
        "--image",
        "rocm-absent",
        check=False,
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    results = data["results"]
    assert {r["python"] for r in results} == set(HOST_HIP_PYTHONS)
    for r in results:
        steps = {s["name"]: s for s in r["steps"]}
        if r["image"] == "rocm-distro":
            assert (
                Path(steps["runtime location"]["detail"]).parent.resolve() == distribution_libdir().resolve()
            )
        elif r["image"] == "rocm-opt-prefix":
            assert steps["runtime location"]["detail"].startswith("/opt/rocm-7.2.4/lib/libamdhip64.so.5")
        elif r["image"] == "rocm-ld-library-path":
            assert steps["runtime location"]["detail"].startswith("/opt/rocm/lib/libamdhip64.so.5")
        else:
            message = steps["import xfer refused"]["detail"]
            assert message.startswith(RUNTIME_MISSING), message
            assert "cannot open shared object file" not in message
            assert "To use this variant, install the HIP runtime that provides libamdhip64.so.5" in message
            assert "`pip install xfer-engine-cpu` for no GPU" in message


def test_cpu_wheel_imports_and_selftests_in_minbase(host_wheelhouse: tuple[Path, Path]) -> None:
    matrix, wheelhouse = host_wheelhouse
    proc = toolkit(
        "--matrix",
        str(matrix),
        "smoke",
        "--variant",
        "cpu",
        "--wheelhouse",
        str(wheelhouse),
        "--image",
        "clean-minbase",
        "--json",
    )
    data = json.loads(proc.stdout)
    assert data["ok"] is True
    for r in data["results"]:
        assert [s["name"] for s in r["steps"]][-1] == "python -m xfer selftest --json"


def test_second_variant_in_one_venv_is_refused_naming_both(
    host_wheelhouse: tuple[Path, Path], tmp_path: Path
) -> None:
    _matrix, wheelhouse = host_wheelhouse
    (cpu,) = sorted((wheelhouse / "cpu").glob(f"*{tag(NEWEST)}*.whl"))
    (rocm,) = sorted((wheelhouse / "rocm").glob(f"*{tag(NEWEST)}*.whl"))
    interpreter = find_interpreter(NEWEST)
    assert interpreter is not None
    venv = tmp_path / "venv"
    env = {
        "PATH": "/usr/bin:/bin",
        "PIP_CONFIG_FILE": "/dev/null",
        "PIP_NO_INPUT": "1",
        "HOME": str(tmp_path),
    }
    fresh_venv(interpreter, venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index"]
    subprocess.run([*pip, str(cpu)], check=True, env=env)
    subprocess.run([*pip, str(rocm)], check=True, env=env)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import xfer"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == CONFLICT_MESSAGE, last


RUNTIME_MISSING = (
    "ImportError: xfer: the installed variant xfer-engine-rocm (backend hip, built for AMD GPUs, ROCm/HIP) "
    "needs libamdhip64.so.5 (ROCm 5.x), and no copy of libamdhip64.so.5 was found (looked: already "
    "loaded in this process (no); the dynamic loader's path (ldconfig, LD_LIBRARY_PATH); the pip "
    "packages rocm_sdk.find_libraries('amdhip64') names (rocm_sdk is not installed); "
    "/opt/rocm/core-*/lib; /opt/rocm/lib)."
)
CONFLICT_MESSAGE = (
    "ImportError: xfer: several variants of the engine are installed in this environment: "
    "xfer-engine-cpu, xfer-engine-rocm. They share the import package 'xfer' and overwrite each other's "
    "files, so which one you get is undefined. Keep exactly one: "
    "`pip uninstall xfer-engine-cpu xfer-engine-rocm` and then reinstall the one for your hardware "
    "(xfer-engine-cpu: no GPU, xfer-engine: CUDA, xfer-engine-rocm: ROCm, xfer-engine-musa: MUSA)."
)


NO_PIP_IN_VENV = "import importlib.util, sys; sys.exit(importlib.util.find_spec('pip') is not None)"


@pytest.mark.parametrize("runs_pip", [False, True], ids=["interpreter-pip", "pip-in-venv"])
def test_the_fresh_venv_gets_pip_only_when_a_smoke_command_runs_it(tmp_path: Path, runs_pip: bool) -> None:
    """The host leg's venv is `python -m venv`'s; the interpreter's own pip installs into it
    (`--python`, no ensurepip) unless a smoke command runs pip, which then finds the venv's."""
    matrix = fake_matrix(tmp_path)
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    check = ["pip", "show", "fake-engine-cpu"] if runs_pip else ["{python}", "-c", NO_PIP_IN_VENV]
    data["engine"]["smoke"]["commands"] = [check]
    matrix.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    proc = toolkit("--matrix", str(matrix), "smoke", "--variant", "cpu", "--image", "host", "--json")
    (result,) = json.loads(proc.stdout)["results"]
    steps = {s["name"]: s for s in result["steps"]}
    assert all(s["ok"] for s in result["steps"]), proc.stderr
    venv_step = steps[f"venv (python {PY})"]
    if runs_pip:
        assert venv_step["detail"] == ""  # pip is the venv's own: `pip show` found the install there
    else:
        assert venv_step["detail"].startswith("installs with the interpreter's pip "), venv_step
    assert steps["import fakexfer"]["ok"]
