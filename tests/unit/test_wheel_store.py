"""The run's store of container-built wheels (release.builder.store, issue 60): a wheel is found by
the digest of its inputs, only unchanged and beside its report; a put is whole or absent; every
take and build is an event the run's account counts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from release.builder import store
from release.wheel.names import report_path

KEY = "a" * 64


NAME = "xfer_engine_cpu-0.2.0-cp312-cp312-manylinux_2_39_x86_64.whl"


def _built(directory: Path, name: str = NAME) -> Path:
    wheel = directory / name
    directory.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(b"PK wheel bytes")
    report_path(wheel).write_text(json.dumps({"ok": True}), encoding="utf-8")
    return wheel


def test_a_kept_wheel_is_taken_by_its_key_alone(tmp_path: Path) -> None:
    shared = tmp_path / "store"
    wheel = _built(tmp_path / "checkout-1" / "wheelhouse")
    assert store.take(shared, KEY) is None  # nothing stored yet
    store.keep(shared, KEY, wheel)
    taken = store.take(shared, KEY)
    assert taken is not None and taken.read_bytes() == wheel.read_bytes()
    assert report_path(taken).is_file()
    assert store.take(shared, "b" * 64) is None  # another input, another wheel
    did = [(e["did"], e["wheel"]) for e in store.events(shared)]
    assert did == [("built", wheel.name), ("reused", wheel.name)]


def test_a_changed_or_reportless_stored_wheel_is_not_taken(tmp_path: Path) -> None:
    shared = tmp_path / "store"
    store.keep(shared, KEY, _built(tmp_path / "w"))
    stored = next((shared / KEY).glob("*.whl"))
    stored.write_bytes(b"other bytes")  # its sha256 no longer the stamp's
    assert store.take(shared, KEY) is None
    shared2 = tmp_path / "store2"
    store.keep(shared2, KEY, _built(tmp_path / "w2"))
    report_path(next((shared2 / KEY).glob("*.whl"))).unlink()
    assert store.take(shared2, KEY) is None


def test_no_store_takes_and_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELEASE_WHEEL_STORE", raising=False)
    assert store.store_directory() is None
    assert store.take(None, KEY) is None
    store.keep(None, KEY, _built(tmp_path))  # nothing to do, no error
    with store.holding(None, [KEY], wait_s=1):
        pass
    monkeypatch.setenv("RELEASE_WHEEL_STORE", str(tmp_path / "s"))
    assert store.store_directory() == tmp_path / "s"


def test_the_first_put_of_a_key_stays_and_no_scratch_is_left(tmp_path: Path) -> None:
    shared = tmp_path / "store"
    first = _built(tmp_path / "one")
    store.put(shared, KEY, first)
    second = _built(tmp_path / "two")
    second.write_bytes(b"PK other")
    store.put(shared, KEY, second)
    assert next((shared / KEY).glob("*.whl")).read_bytes() == b"PK wheel bytes"
    assert not list(shared.glob(".put-*"))


def test_a_second_build_of_a_key_waits_for_the_first(tmp_path: Path) -> None:
    """The key's lock: while one build holds it, another waits (and then finds the wheel)."""
    shared = tmp_path / "store"
    order: list[str] = []
    inside = threading.Event()

    def second() -> None:
        inside.wait(5)
        with store.holding(shared, [KEY], wait_s=30):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with store.holding(shared, [KEY, "c" * 64], wait_s=30):
        inside.set()
        thread.join(0.5)
        order.append("first")
    thread.join(10)
    assert order == ["first", "second"]
    for directory in (shared, shared / "locks"):  # the runner user's jobs share them with root
        assert oct(directory.stat().st_mode & 0o7777) == "0o1777", directory


def test_a_cross_built_wheels_key_covers_its_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cross_keys: the same inputs, the same key (in any checkout); another project file or another
    image, another key; an image with no ID (not made yet), no key and nothing taken."""
    from release.builder import cross
    from release.config.matrix import load
    from release.machine.containers import ContainerEngine
    from release.plan.machine import machine_of
    from release.plan.steps import make_plan

    root = Path(__file__).resolve().parents[2]
    steps = tuple(
        s for s in make_plan(load(root / "matrix.yaml")).builds
        if s.variant.name == "cpu" and machine_of(s.variant) == "aarch64"
    )[:2]  # fmt: skip
    assert len(steps) == 2
    ids = {"img": "sha256:1", "other": "sha256:2"}
    monkeypatch.setattr(ContainerEngine, "image_id", lambda _engine, tag: ids.get(tag))
    project = tmp_path / "one"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    copy = tmp_path / "two"
    copy.mkdir()
    (copy / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")

    def keys(where: Path, image: str = "img") -> dict[str, str]:
        podman = ContainerEngine("podman")
        return cross.cross_keys(steps, "aarch64", where, engine=podman, image=image, epoch="1")

    first = keys(project)
    assert len(set(first.values())) == 2  # a key a step
    assert keys(copy) == first  # another checkout of the same inputs
    assert set(keys(project, "other").values()).isdisjoint(first.values())
    (copy / "pyproject.toml").write_text("[project]\nname = 'y'\n", encoding="utf-8")
    assert set(keys(copy).values()).isdisjoint(first.values())
    assert keys(project, "absent") == {}
