"""`release rehearse --python/--floor`: the jobs' checkout holds matrix.yaml with those two lines
changed, and nothing else; what cannot be narrowed is one line naming why."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.config.matrix import LoadedMatrix, load
from release.errors import UsageError
from release.rehearse.narrow import narrowed

ROOT = Path(__file__).resolve().parents[2]
COMMENT = "        # release wheels are built in manylinux_2_28 (AlmaLinux 8)"


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
        ('python: ["3.10", "3.11", "3.12", "3.13", "3.14"]', 'python: ["3.12", "3.13"]'),
        (f"  floor: manylinux_2_28_x86_64{COMMENT}", f"  floor: manylinux_2_39_x86_64{COMMENT}"),
    ]
    listed = "3.10, 3.11, 3.12, 3.13, 3.14"
    assert said[0].startswith(f"python [3.12, 3.13] (--python; matrix.yaml lists {listed})")
    assert said[1].startswith(
        "platform.floor manylinux_2_39_x86_64 (--floor; matrix.yaml says manylinux_2_28"
    )
    narrowed_path = tmp_path / "narrowed" / "matrix.yaml"
    narrowed_path.parent.mkdir()
    narrowed_path.write_text(text, encoding="utf-8")
    (narrowed_path.parent / "packaging").symlink_to(ROOT / "packaging")
    again = load(narrowed_path)
    assert again.matrix.python == ("3.12", "3.13")
    assert again.matrix.platform.floor == "manylinux_2_39_x86_64"


def test_a_policy_floor_stays_a_policy_for_every_machine(tmp_path: Path) -> None:
    """A matrix of two machines (`floor: manylinux_2_28`, x86_64 and aarch64): `--floor
    manylinux_2_39_x86_64` narrows it to the policy manylinux_2_39, each machine its own tag; the
    tag itself beside aarch64 would be the checkout's located error."""
    source = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    old = "  floor: manylinux_2_28_x86_64 "
    assert source.count(old) == 1
    two = source.replace(old, "  floor: manylinux_2_28\n  architectures: [x86_64, aarch64]\n ")
    loaded = _real(tmp_path, two)
    result = narrowed(loaded, [], "manylinux_2_39_x86_64")
    assert result is not None
    text, said = result
    assert said == [
        "platform.floor manylinux_2_39 (--floor manylinux_2_39_x86_64: a policy, as matrix.yaml's, each "
        "of x86_64, aarch64 its own tag; matrix.yaml says manylinux_2_28, whose build image is in a registry)"
    ]
    narrowed_path = tmp_path / "narrowed" / "matrix.yaml"
    narrowed_path.parent.mkdir()
    narrowed_path.write_text(text, encoding="utf-8")
    (narrowed_path.parent / "packaging").symlink_to(ROOT / "packaging")
    platform = load(narrowed_path).matrix.platform
    floors = [platform.floor_of(m) for m in platform.machines]
    assert floors == ["manylinux_2_39_x86_64", "manylinux_2_39_aarch64"]


def test_no_option_leaves_the_checkout_alone(tmp_path: Path) -> None:
    assert narrowed(_real(tmp_path), [], None) is None


@pytest.mark.parametrize(
    ("pythons", "floor", "message"),
    [
        (["3.9"], None, "--python 3.9: not a Python of matrix.yaml (3.10, 3.11, 3.12, 3.13, 3.14)"),
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
    one_line = 'python: ["3.10", "3.11", "3.12", "3.13", "3.14"]'
    text = source.replace(one_line, 'python:\n  - "3.10"\n  - "3.12"')
    assert text != source
    with pytest.raises(UsageError, match=r"no one-line `python: \[\.\.\.\]` list"):
        narrowed(_real(tmp_path, text), ["3.12"], None)
