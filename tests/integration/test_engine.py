"""Integration tests of the reference engine: real CMake builds, a real wheel
in a fresh venv, engines in separate processes, and the GPU variants' link
lines (hip against Debian's HIP 5.2, cuda against the CUDA 13 toolkit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import fresh_venv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "engine"
HIP_HEADER = Path("/usr/include/hip/hip_runtime_api.h")
CUDA_ROOT = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda-13.0"))

if shutil.which("cmake") is None or (shutil.which("c++") is None and shutil.which("g++") is None):
    pytest.skip("cmake and a C++ compiler are required", allow_module_level=True)


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("check", True)
    kw.setdefault("text", True)
    kw.setdefault("capture_output", True)
    try:
        return subprocess.run([str(c) for c in cmd], **kw)  # noqa: PLW1510 (check is in kw)
    except subprocess.CalledProcessError as exc:
        msg = f"{cmd} failed ({exc.returncode}):\n{exc.stdout}\n{exc.stderr}"
        raise AssertionError(msg) from exc


def _generator() -> list:
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def _launcher() -> list:
    return ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []


def _configure_build(src: Path, build: Path, *defs: str, target: str | None = None) -> None:
    _run(["cmake", "-S", src, "-B", build, *_generator(), *_launcher(), *defs])
    cmd = ["cmake", "--build", build, "-j", str(os.cpu_count() or 2)]
    if target:
        cmd += ["--target", target]
    _run(cmd)


def _needed(path: Path) -> list[str]:
    out = _run(["readelf", "-d", path]).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def _has_nanobind() -> bool:
    """The binding's generator (nanobind) is importable by the running Python."""
    try:
        _run([sys.executable, "-m", "nanobind", "--cmake_dir"])
        return True
    except AssertionError:
        return False


def _nanobind_dir() -> str:
    return _run([sys.executable, "-m", "nanobind", "--cmake_dir"]).stdout.strip()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cpu_core(tmp_path_factory) -> dict:
    """CPU core + C++ tests built once, installed to a prefix (the XFER_CORE_PREFIX contract)."""
    root = tmp_path_factory.mktemp("cpu-core")
    build, prefix = root / "build", root / "prefix"
    _configure_build(
        ENGINE,
        build,
        "-DXFER_BACKEND=cpu",
        "-DXFER_BUILD_PYTHON=OFF",
        "-DXFER_BUILD_TESTS=ON",
        "-DXFER_VERSION=0.1.0",
    )
    _run(["cmake", "--install", build, "--prefix", prefix])
    return {"build": build, "prefix": prefix}


@pytest.fixture(scope="module")
def cpu_wheel(cpu_core, tmp_path_factory) -> Path:
    """The CPU wheel for the running Python, built against the prebuilt core."""
    try:
        import scikit_build_core  # noqa: F401
    except ImportError:
        pytest.skip("scikit-build-core is not installed for this Python")
    if not _has_nanobind():
        pytest.skip("nanobind is not installed for this Python")
    out = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ, PIP_CONFIG_FILE="/dev/null")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "-w",
            out,
            "-C",
            f"cmake.define.XFER_CORE_PREFIX={cpu_core['prefix']}",
            ENGINE,
        ],
        env=env,
    )
    wheels = list(out.glob("xfer_engine-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv_python(cpu_wheel, tmp_path_factory) -> Path:
    """A fresh venv with only the CPU wheel installed."""
    py = fresh_venv(sys.executable, tmp_path_factory.mktemp("venv") / "venv")
    env = dict(os.environ, PIP_CONFIG_FILE="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1")
    _run([py, "-m", "pip", "install", "--no-index", "--no-deps", cpu_wheel], env=env)
    return py


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "XFER_"))}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    return env


# --------------------------------------------------------------------------- C++


def test_cpp_unit_tests_pass(cpu_core):
    res = _run(["ctest", "--output-on-failure", "--timeout", "60"], cwd=cpu_core["build"], check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "100% tests passed" in res.stdout


def test_core_prefix_layout(cpu_core):
    prefix = cpu_core["prefix"]
    assert (prefix / "bin" / "xfer-master").is_file()
    assert list(prefix.glob("lib*/libxfer_core.a")) and list(prefix.glob("lib*/libxfer_common.a"))
    assert (prefix / "include" / "xfer" / "engine.h").is_file()
    assert list(prefix.glob("lib*/cmake/xfer/xferConfig.cmake"))
    # The master links no GPU runtime and nothing beyond libc/libstdc++.
    needed = _needed(prefix / "bin" / "xfer-master")
    assert not [n for n in needed if n.startswith(("libcuda", "libcudart", "libamdhip", "libhsa", "libmusa"))]


# --------------------------------------------------------------------------- wheel in a fresh venv


def test_wheel_contents(cpu_wheel):
    import zipfile

    names = zipfile.ZipFile(cpu_wheel).namelist()
    assert "xfer/__init__.py" in names and "xfer/_build_info.py" in names
    assert any(n.startswith("xfer/_xfer") and n.endswith(".so") for n in names)
    assert any(n.endswith(".data/scripts/xfer-master") for n in names)
    info = zipfile.ZipFile(cpu_wheel).read("xfer/_build_info.py").decode()
    assert 'BACKEND = "cpu"' in info and "CORE_PREBUILT = True" in info


def test_master_version_from_venv(venv_python):
    master = venv_python.parent / "xfer-master"
    out = _run([master, "--version"], env=_clean_env()).stdout
    assert out.strip() == "xfer-master 0.1.0 (backend cpu)"


def test_selftest_json_from_venv(venv_python, tmp_path):
    res = _run([venv_python, "-m", "xfer", "selftest", "--json"], env=_clean_env(), cwd=tmp_path, timeout=120)
    report = json.loads(res.stdout)
    assert report["ok"] is True
    assert report["backend"] == "cpu" and report["version"] == "0.1.0"
    assert report["distribution"] == "xfer-engine"
    assert report["write"]["verified"] and report["write"]["bytes"] > 0
    assert report["read"]["verified"] and report["read"]["bytes"] > 0
    assert report["master_exit_code"] == 0
    assert report["gpu_direct"] is False and report["gpu_direct_reason"]


def test_second_variant_is_refused(venv_python, tmp_path):
    """A fake second xfer-engine-* distribution in the same venv makes import fail."""
    site = _run([venv_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    dist = Path(site) / "xfer_engine_rocm-0.1.0.dist-info"
    dist.mkdir()
    try:
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: xfer-engine-rocm\nVersion: 0.1.0\n")
        (dist / "RECORD").write_text("xfer/__init__.py,,\n")
        res = _run([venv_python, "-c", "import xfer"], env=_clean_env(), check=False, cwd=tmp_path)
        assert res.returncode != 0
        assert "ImportError" in res.stderr
        assert "xfer-engine-rocm" in res.stderr and "xfer-engine" in res.stderr
        assert "pip uninstall" in res.stderr
    finally:
        shutil.rmtree(dist)


SERVER = textwrap.dedent(
    """
    import sys, xfer
    eng = xfer.Engine("server", sys.argv[1])
    buf = bytearray(b"s" * (1 << 20))
    eng.register(buf)
    print("ready", flush=True)
    sys.stdin.readline()            # wait until the client is done
    sys.stdout.write(buf[:8].decode() + " " + str(sum(buf)) + "\\n")
    sys.stdout.flush()
    eng.close()
    """
)

CLIENT = textwrap.dedent(
    """
    import sys, xfer
    eng = xfer.Engine("client", sys.argv[1])
    region = eng.peer("server")["regions"][0]
    n = region["length"]
    back = bytearray(n)
    eng.register(back)
    eng.read([(back, "server", region["addr"], n)])
    assert bytes(back) == b"s" * n, "read mismatch"
    src = bytearray(b"c" * n)
    eng.write([(src, "server", region["addr"], n)])
    try:
        eng.write([(src, "server", region["addr"] + 1, n)])
    except RuntimeError as exc:
        print("refused:", exc)
    else:
        raise SystemExit("out-of-bounds write was accepted")
    eng.close()
    print("client ok", flush=True)
    """
)


def test_two_engines_in_separate_processes(venv_python, tmp_path):
    env = _clean_env()
    master = subprocess.Popen(
        [venv_python.parent / "xfer-master", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        endpoint = master.stdout.readline().split()[-1]
        server = subprocess.Popen(
            [venv_python, "-c", SERVER, endpoint],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert server.stdout.readline().strip() == "ready"
        client = _run([venv_python, "-c", CLIENT, endpoint], env=env, cwd=tmp_path, timeout=60)
        assert "client ok" in client.stdout and "refused:" in client.stdout
        out, _ = server.communicate("done\n", timeout=30)
        assert out.split() == ["cccccccc", str(ord("c") * (1 << 20))]
        assert server.returncode == 0
    finally:
        master.terminate()
        assert master.wait(timeout=10) == 0


# --------------------------------------------------------------------------- stable ABI (nanobind)


@pytest.fixture(scope="module")
def abi3_build(cpu_core, tmp_path_factory) -> Path:
    """The extension built for the limited API of 3.12 the way scikit-build-core asks for it
    (wheel.py-api=cp312 sets SKBUILD_SABI_COMPONENT and SKBUILD_SABI_VERSION), with Python 3.12."""
    from release.machine.interpreters import find_interpreter

    py312 = find_interpreter("3.12")
    if py312 is None:
        pytest.skip("no Python 3.12 interpreter on this machine")
    if not _has_nanobind():
        pytest.skip("nanobind is not installed for this Python")
    from scikit_build_core import resources

    # What scikit-build-core adds for a CMake older than 3.26: its FindPython with SABIModule.
    find_python = Path(resources.__file__).parent / "find_python"
    build = tmp_path_factory.mktemp("abi3")
    _configure_build(
        ENGINE,
        build,
        f"-DCMAKE_MODULE_PATH={find_python}",
        f"-DPython_EXECUTABLE={py312}",
        f"-Dnanobind_DIR={_nanobind_dir()}",
        f"-DXFER_CORE_PREFIX={cpu_core['prefix']}",
        "-DSKBUILD_SABI_COMPONENT=Development.SABIModule",
        "-DSKBUILD_SABI_VERSION=3.12",
        "-DXFER_VERSION=0.1.0",
    )
    return build


def test_abi3_extension_is_named_and_linked_for_the_stable_abi(abi3_build):
    (so,) = (abi3_build / "python" / "xfer").glob("_xfer*.so")
    assert so.name == "_xfer.abi3.so"
    # abi3audit: every Python symbol it imports is in the stable ABI of 3.12 or older.
    proc = _run([sys.executable, "-m", "abi3audit", "--assume-minimum-abi3", "3.12", "--report", so])
    (spec,) = json.loads(proc.stdout)["specs"].values()
    result = spec["object"]["result"]
    assert result["is_abi3"] and result["non_abi3_symbols"] == [], result
    assert result["computed"] == "3.12" and result["is_abi3_baseline_compatible"], result


def test_abi3_extension_runs_a_transfer_on_a_newer_python(abi3_build, tmp_path):
    from release.machine.interpreters import find_interpreter

    newer = find_interpreter("3.13")
    if newer is None:
        pytest.skip("no Python 3.13 interpreter on this machine")
    script = textwrap.dedent(
        """
        import json, xfer
        src, dst = bytearray(b"x" * 4096), bytearray(4096)
        with xfer.Engine("a", "") as a, xfer.Engine("b", "") as b:
            remote = b.register(dst)["addr"]
            a.register(src)
            a.add_peer("b", "127.0.0.1", b.port)
            a.write([(src, "b", remote, 4096)])
            try:
                a.write([(src, "nobody", 0, 1)])
                error = None
            except xfer.XferError as exc:
                error = type(exc).__mro__[1].__name__
        print(json.dumps({"equal": src == dst, "error": error, "version": xfer.__version__}))
        """
    )
    env = {**_clean_env(), "PYTHONPATH": str(abi3_build / "python")}
    out = _run([newer, "-c", script], env=env, cwd=tmp_path).stdout
    assert json.loads(out) == {"equal": True, "error": "RuntimeError", "version": "0.1.0"}


def test_binding_choice_is_checked_at_configure(tmp_path):
    bad = _run(["cmake", "-S", ENGINE, "-B", tmp_path / "bad", "-DXFER_BINDING=swig"], check=False)
    assert bad.returncode != 0 and "XFER_BINDING must be nanobind or pybind11" in bad.stderr
    abi3 = _run(
        [
            "cmake",
            "-S",
            ENGINE,
            "-B",
            tmp_path / "p11",
            "-DXFER_BINDING=pybind11",
            "-DXFER_BACKEND=cpu",
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DSKBUILD_SABI_COMPONENT=Development.SABIModule",
            "-DSKBUILD_SABI_VERSION=3.12",
        ],
        check=False,
    )
    assert abi3.returncode != 0 and "pybind11 binding cannot target the stable ABI" in abi3.stderr


# --------------------------------------------------------------------------- GPU variants: link lines


def _module_build(tmp_path_factory, name: str, *defs: str) -> Path:
    if not _has_nanobind():
        pytest.skip("nanobind is not installed for this Python")
    build = tmp_path_factory.mktemp(name)
    _configure_build(ENGINE, build, *defs, f"-DPython_EXECUTABLE={sys.executable}", "-DXFER_VERSION=0.1.0")
    return build


@pytest.fixture(scope="module")
def hip_build(tmp_path_factory) -> Path:
    if not HIP_HEADER.exists():
        pytest.skip(f"{HIP_HEADER} not installed (apt install libamdhip64-dev)")
    return _module_build(tmp_path_factory, "hip", "-DXFER_BACKEND=hip")


def _extension(build: Path) -> Path:
    (so,) = (build / "python" / "xfer").glob("_xfer*.so")
    return so


def test_hip_extension_needs_libamdhip64(hip_build):
    needed = _needed(_extension(hip_build))
    assert "libamdhip64.so.5" in needed
    assert not [n for n in needed if n.startswith(("libhsa-runtime", "libcuda", "libcudart"))]
    assert not [n for n in _needed(hip_build / "xfer-master") if n.startswith(("libamdhip", "libhsa"))]
    info = (hip_build / "python" / "xfer" / "_build_info.py").read_text()
    assert 'RUNTIME_SONAMES = ("libamdhip64.so.5", )' in info


def test_hip_build_imports_and_selftests_without_gpu(hip_build, tmp_path):
    env = _clean_env()
    env.update(PYTHONPATH=str(hip_build / "python"), XFER_MASTER=str(hip_build / "xfer-master"))
    res = _run(
        [sys.executable, "-m", "xfer", "selftest", "--json"], env=env, cwd=tmp_path, timeout=120, check=False
    )
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["backend"] == "hip" and report["runtime_library"] == "libamdhip64.so.5"
    assert report["ok"] and report["write"]["verified"] and report["read"]["verified"]
    assert report["device"] is False and report["gpu_direct"] is False


def test_hip_missing_runtime_message(hip_build, tmp_path):
    """With the runtime soname unresolvable, import names the soname and the wheel to pick."""
    pkg = tmp_path / "xfer"
    shutil.copytree(hip_build / "python" / "xfer", pkg)
    info = pkg / "_build_info.py"
    info.write_text(info.read_text().replace('"libamdhip64.so.5"', '"libamdhip64.so.5-not-here"'))
    env = _clean_env()
    env["PYTHONPATH"] = str(tmp_path)
    res = _run([sys.executable, "-c", "import xfer"], env=env, check=False, cwd=tmp_path)
    assert res.returncode != 0
    assert "ImportError" in res.stderr and "libamdhip64" in res.stderr
    assert "xfer-engine-cpu" in res.stderr and "ROCm" in res.stderr


def test_cuda_extension_links_cudart_not_libcuda(tmp_path_factory):
    if not (CUDA_ROOT / "include" / "cuda_runtime_api.h").exists():
        pytest.skip(f"no CUDA toolkit at {CUDA_ROOT}")
    build = _module_build(tmp_path_factory, "cuda", "-DXFER_BACKEND=cuda", f"-DCUDAToolkit_ROOT={CUDA_ROOT}")
    needed = _needed(_extension(build))
    assert "libcudart.so.13" in needed
    assert not [n for n in needed if n.startswith("libcuda.")]
    assert not [n for n in _needed(build / "xfer-master") if n.startswith("libcud")]
    info = (build / "python" / "xfer" / "_build_info.py").read_text()
    assert 'RUNTIME_SONAMES = ("libcudart.so.13", )' in info


# --------------------------------------------------------------------------- two hosts: prefill and decode


class _TwoHosts:
    """Two network namespaces joined by a veth pair: the project's own test hosts."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}"
        self.a, self.b = f"xfa{tag}", f"xfb{tag}"
        self.addr_a, self.addr_b = "10.213.7.1", "10.213.7.2"

    def __enter__(self) -> _TwoHosts:
        cmds = [
            ["ip", "netns", "add", self.a],
            ["ip", "netns", "add", self.b],
            ["ip", "link", "add", f"v{self.a}", "type", "veth", "peer", "name", f"v{self.b}"],
            ["ip", "link", "set", f"v{self.a}", "netns", self.a],
            ["ip", "link", "set", f"v{self.b}", "netns", self.b],
            ["ip", "-n", self.a, "addr", "add", f"{self.addr_a}/24", "dev", f"v{self.a}"],
            ["ip", "-n", self.b, "addr", "add", f"{self.addr_b}/24", "dev", f"v{self.b}"],
        ]
        cmds += [
            ["ip", "-n", ns, "link", "set", dev, "up"] for ns in (self.a, self.b) for dev in ("lo", f"v{ns}")
        ]
        try:
            for cmd in cmds:
                _run(cmd)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)

    def popen(self, ns: str, argv: list, **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", ns, *map(str, argv)], text=True, **kw)


def test_prefill_and_decode_on_two_hosts(venv_python, tmp_path):
    """The hardware workflow's two-node tier, on two network namespaces: decode on host B reads
    host A's buffer through the master on host A, checks every byte, and writes back."""
    env = _clean_env()
    with _TwoHosts() as hosts:
        master = hosts.popen(
            hosts.a, [venv_python.parent / "xfer-master", "--port", "0"], stdout=subprocess.PIPE, env=env
        )
        prefill = None
        try:
            port = master.stdout.readline().strip().rsplit(":", 1)[1]
            endpoint = f"{hosts.addr_a}:{port}"
            prefill = hosts.popen(
                hosts.a,
                [
                    venv_python,
                    "-m",
                    "xfer",
                    "selftest",
                    "--json",
                    "--size",
                    "2",
                    "--role",
                    "prefill",
                    "--master",
                    endpoint,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=tmp_path,
            )
            ready = prefill.stderr.readline()
            assert ready.startswith("prefill serving 2097152 bytes at 10.213.7.1:"), ready
            decode = subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    hosts.b,
                    venv_python,
                    "-m",
                    "xfer",
                    "selftest",
                    "--json",
                    "--size",
                    "2",
                    "--role",
                    "decode",
                    "--master",
                    endpoint,
                ],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=60,
                check=False,
            )
            report = json.loads(decode.stdout)
            assert decode.returncode == 0, decode.stdout + decode.stderr
            assert report["read"] == {"bytes": 2097152, "verified": True, "sha256": report["read"]["sha256"]}
            assert report["write"]["verified"] is True
            prefill.terminate()
            out, _err = prefill.communicate(timeout=30)
            served = json.loads(out)
            assert prefill.returncode == 0, out
            assert served["received"]["verified"] is True
            assert served["served_sha256"] == report["read"]["sha256"]
        finally:
            for proc in (prefill, master):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=10)
