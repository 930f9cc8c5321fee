"""Issue 57 causes 3 and 4: what runs inside a user's `import` (the engine's `xfer/__init__.py`
and `_runtime.py`, and the guard `release init` pastes, whose `find_runtime` is the same source,
release/init/runtime_places.py) never exits, hangs or prints raw bytes because of another package.

The engine's package is imported here from a copy of its sources with a stand-in `_build_info` and
extension (`_xfer`, `_engine`: the compiled module is not built in the unit tier)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import signal
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.init.guard import guard_code
from release.init.runtime_places import find_runtime

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine" / "python" / "xfer"
SDK_PLACE = [{"kind": "sdk-module", "module": "hostile_sdk"}]


@pytest.fixture
def deadline() -> Iterator[None]:
    """A hang ends the test in 10 s (SIGALRM interrupts a blocking open of a FIFO)."""

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError("hung")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _sdk(monkeypatch: pytest.MonkeyPatch, find_libraries: object) -> None:
    module = types.ModuleType("hostile_sdk")
    module.find_libraries = find_libraries  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hostile_sdk", module)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


def _exits(_name: str) -> object:
    sys.exit(0)


def _unprintable(_name: str) -> object:
    raise Unprintable


def _endless(_name: str) -> Iterator[str]:
    while True:
        yield "/nowhere/libamdhip64.so"


@pytest.mark.parametrize(
    ("find_libraries", "why"),
    [(_exits, "SystemExit"), (_unprintable, "Unprintable"), (_endless, "no libamdhip64.so.7 in /nowhere")],
)
def test_a_broken_sdk_means_not_found_there(
    monkeypatch: pytest.MonkeyPatch, deadline: None, find_libraries: object, why: str
) -> None:
    """Was: sys.exit(0) in the SDK ended the importing process; an exception whose __str__ raises
    became a traceback; an endless iterator exhausted memory."""
    _sdk(monkeypatch, find_libraries)
    found, looked = find_runtime("libamdhip64.so.7", SDK_PLACE)
    assert found is None and len(looked) == 1 and why in looked[0], looked


@pytest.mark.parametrize("name", ["esc\x1b]0;owned\x07", "new\nline", "nul\x00byte", "rlo\u202e"])
def test_directory_names_reach_the_message_escaped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    _sdk(monkeypatch, lambda _n: [f"/opt/{name}/libamdhip64.so"])
    found, looked = find_runtime("libamdhip64.so.7", SDK_PLACE)
    assert found is None and all(ch.isprintable() for ch in looked[0]), looked
    if "\x00" not in name:
        (tmp_path / name).mkdir()
    found, looked = find_runtime("libamdhip64.so.7", [{"kind": "directory", "path": str(tmp_path / "*")}])
    assert found is None and all(ch.isprintable() for ch in "".join(looked)), looked


def test_the_pasted_guard_survives_an_sdk_that_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard `release init` writes carries the same finder: an ImportError, never an exit."""

    class Dist:
        class metadata:  # shaped like importlib.metadata's Distribution.metadata
            @staticmethod
            def get_all(key: str) -> list[str]:
                return ["libamdhip64.so.7"] if key == "Requires-External" else []

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())
    _sdk(monkeypatch, _exits)
    runtimes = {"libamdhip64.so.7": ("ROCm", "install ROCm", SDK_PLACE)}
    code = compile(guard_code("kv", ["kv-rocm"], runtimes=runtimes), "kv/__init__.py", "exec")
    with pytest.raises(ImportError, match="SystemExit"):
        exec(code, {})


def _engine_copy(tmp_path: Path) -> Path:
    package = tmp_path / "pkg" / "xfer"
    package.mkdir(parents=True)
    for name in ("__init__.py", "_runtime.py"):
        shutil.copy(ENGINE / name, package / name)
    (package / "_build_info.py").write_text(
        'VERSION = "0.1"\nBACKEND = "cpu"\nRUNTIME_SONAMES = ()\nDEFAULT_DISTRIBUTION = "xfer-engine-cpu"\n',
        encoding="utf-8",
    )
    (package / "_xfer.py").write_text("class XferError(Exception):\n    pass\n", encoding="utf-8")
    (package / "_engine.py").write_text("class Engine:\n    pass\n", encoding="utf-8")
    return package.parent


def test_the_engine_import_reads_no_foreign_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deadline: None
) -> None:
    """Was: `_installed_variants` read every distribution's METADATA: non-UTF-8 gave
    UnicodeDecodeError, a FIFO hung the import, a link to /dev/zero exhausted memory."""
    site = tmp_path / "site"
    for name, make in (
        ("latin", lambda p: p.write_bytes(b"Name: caf\xe9\n")),
        ("fifo", os.mkfifo),
        ("zero", lambda p: p.symlink_to("/dev/zero")),
    ):
        (site / f"{name}-1.0.dist-info").mkdir(parents=True)
        make(site / f"{name}-1.0.dist-info" / "METADATA")
    (site / "xfer_engine_cpu-0.1.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(_engine_copy(tmp_path)))
    for name in [m for m in sys.modules if m == "xfer" or m.startswith("xfer.")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        xfer = importlib.import_module("xfer")
        assert xfer.BACKEND == "cpu"
        (site / "xfer_engine_rocm-0.1.dist-info").mkdir()
        with pytest.raises(ImportError, match="xfer-engine-cpu, xfer-engine-rocm"):
            xfer._check_single_variant()
    finally:
        for name in [m for m in sys.modules if m == "xfer" or m.startswith("xfer.")]:
            del sys.modules[name]
