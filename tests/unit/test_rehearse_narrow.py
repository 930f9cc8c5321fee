"""`release rehearse --python/--floor`: the jobs' checkout holds matrix.yaml with those two lines
changed, and nothing else; what cannot be narrowed is one line naming why."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.config.matrix import LoadedMatrix, load
from release.errors import UsageError
from release.plan.steps import make_plan
from release.rehearse.narrow import narrowed

ROOT = Path(__file__).resolve().parents[2]
COMMENT = (
    "               # release wheels are built in manylinux_2_28 (AlmaLinux 8); each machine gets its tag"
)


def _real(tmp_path: Path, text: str | None = None) -> LoadedMatrix:
    path = tmp_path / "matrix.yaml"
    source = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    path.write_text(
        (text or source).replace("source: engine", f"source: {ROOT / 'engine'}", 1), encoding="utf-8"
    )
    (tmp_path / "packaging").symlink_to(ROOT / "packaging")
    return load(path)


def test_the_python_list_and_the_floor_are_the_only_lines_that_change(tmp_path: Path) -> None:
    loaded = _real(tmp_path)
    result = narrowed(loaded, ["3.13", "3.12"], "manylinux_2_39_x86_64")
    assert result is not None
    text, said = result
    before = loaded.path.read_text(encoding="utf-8").splitlines()
    after = text.splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [
        (
            'python: ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t"]',
            'python: ["3.12", "3.13"]',
        ),
        (f"  floor: manylinux_2_28{COMMENT}", f"  floor: manylinux_2_39{COMMENT}"),
    ]
    listed = "3.10, 3.11, 3.12, 3.13, 3.14, 3.15, 3.14t, 3.15t"
    assert said[0].startswith(f"python [3.12, 3.13] (--python; matrix.yaml lists {listed})")
    # matrix.yaml's floor is a policy (x86_64 and aarch64): the narrowed one is too, never a tag of
    # x86_64 alone beside aarch64 (the checkout's located error)
    assert said[1].startswith(
        "platform.floor manylinux_2_39 (--floor manylinux_2_39_x86_64: a policy, as matrix.yaml's, "
        "each of x86_64, aarch64 its own tag; matrix.yaml says manylinux_2_28,"
    )
    narrowed_path = tmp_path / "narrowed" / "matrix.yaml"
    narrowed_path.parent.mkdir()
    narrowed_path.write_text(text, encoding="utf-8")
    (narrowed_path.parent / "packaging").symlink_to(ROOT / "packaging")
    again = load(narrowed_path)
    assert again.matrix.python == ("3.12", "3.13")
    assert again.matrix.platform.floor == "manylinux_2_39"
    platform = again.matrix.platform
    floors = [platform.floor_of(m) for m in platform.machines]
    assert floors == ["manylinux_2_39_x86_64", "manylinux_2_39_aarch64"]


def test_a_one_machine_floor_stays_that_machines_tag(tmp_path: Path) -> None:
    """A matrix of x86_64 alone (`floor: manylinux_2_28_x86_64`, no architectures): `--floor
    manylinux_2_39_x86_64` writes that tag, as before aarch64 was declared."""
    source = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    old = "  floor: manylinux_2_28 "
    arches = "  architectures: [x86_64, aarch64]"
    grace = "    hardware: [gh200, gb200-pd]"
    assert source.count(old) == source.count(arches) == source.count(grace) == 1
    one = source.replace(old, "  floor: manylinux_2_28_x86_64 ").replace(arches, "  # (x86_64 alone)")
    loaded = _real(tmp_path, one.replace(grace, "    # (no Grace tiers without aarch64 wheels)"))
    result = narrowed(loaded, [], "manylinux_2_39_x86_64")
    assert result is not None
    text, said = result
    assert said == [
        "platform.floor manylinux_2_39_x86_64 (--floor; matrix.yaml says manylinux_2_28_x86_64, whose "
        "build image is in a registry)"
    ]
    assert "  floor: manylinux_2_39_x86_64 " in text


def test_no_option_leaves_the_checkout_alone(tmp_path: Path) -> None:
    assert narrowed(_real(tmp_path), [], None) is None


@pytest.mark.parametrize(
    ("pythons", "floor", "message"),
    [
        (
            ["3.9"],
            None,
            "--python 3.9: not a Python of matrix.yaml (3.10, 3.11, 3.12, 3.13, 3.14, 3.15, 3.14t, 3.15t)",
        ),
        ([], "linux_x86_64", "--floor linux_x86_64: not a manylinux platform tag"),
    ],
)
def test_what_is_not_the_matrixs_is_refused(
    tmp_path: Path, pythons: list[str], floor: str | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        narrowed(_real(tmp_path), pythons, floor)


def test_a_python_list_over_several_lines_cannot_be_narrowed_and_says_so(tmp_path: Path) -> None:
    source = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    one_line = 'python: ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t"]'
    text = source.replace(one_line, 'python:\n  - "3.10"\n  - "3.12"')
    assert text != source
    with pytest.raises(UsageError, match=r"no one-line `python: \[\.\.\.\]` list"):
        narrowed(_real(tmp_path, text), ["3.12"], None)


def test_the_machines_narrow_to_one_line_and_the_plan_follows(tmp_path: Path) -> None:
    """`--arch x86_64`: the checkout's architectures list holds x86_64 alone (its jobs only; the
    aarch64 Pythons of a narrowed run have no interpreter under emulation here), the cuda variant's
    Grace tiers come off its hardware list (they test aarch64 wheels), and the narrowed matrix
    loads, x86_64 steps only."""
    loaded = _real(tmp_path)
    result = narrowed(loaded, ["3.12"], "manylinux_2_39_x86_64", ["x86_64"])
    assert result is not None
    text, said = result
    before = loaded.path.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, text.splitlines(), strict=True) if a != b]
    assert changed[2][0].startswith("  architectures: [x86_64, aarch64]")
    assert changed[2][1].startswith("  architectures: [x86_64]")
    assert changed[3][0].startswith("    hardware: [gh200, gb200-pd]")
    assert changed[3][1].startswith("    hardware: []")  # the Grace tiers test aarch64 wheels only
    assert len(changed) == 4
    assert said[2].startswith("platform.architectures [x86_64] (--arch; matrix.yaml lists x86_64, aarch64")
    narrowed_path = tmp_path / "narrowed" / "matrix.yaml"
    narrowed_path.parent.mkdir()
    narrowed_path.write_text(text, encoding="utf-8")
    (narrowed_path.parent / "packaging").symlink_to(ROOT / "packaging")
    plan = make_plan(load(narrowed_path))
    assert {s.identifier.split("-")[-1] for s in plan.builds} == {"manylinux_x86_64"}
    assert make_plan(loaded).builds_of("cuda")[-1].identifier.endswith("aarch64")  # the real one has both


def test_a_machine_the_matrix_does_not_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError,
        match=r"--arch riscv64: not a machine of matrix\.yaml \(platform\.architectures: x86_64, aarch64\)",
    ):
        narrowed(_real(tmp_path), [], None, ["riscv64"])
