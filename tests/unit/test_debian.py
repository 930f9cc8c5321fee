"""One Debian mirror setting and one debootstrap path (issue 59, item 7).

The mirror is read in one function (`release.machine.debian.debian_mirror`, and `debian_mirror` in
scripts/_common.sh for the scripts): `DEBIAN_MIRROR`, then the system's apt sources, then the
default. Debootstrap runs in one place, make-image.sh's `debootstrap_into`, which the `base` leaf
(images) and the `rootfs` leaf (the smoke tier's minbase tree) share with its cache and its lock."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from release import process
from release.errors import ToolchainError
from release.machine import debian
from release.machine.debian import DEFAULT_MIRROR, apt_source_files, debian_mirror
from release.smoke import image

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "release"
SCRIPTS = ROOT / "scripts"


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    files = {
        "deb822": ("debian.sources", "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"),
        "security": ("security.sources", "Types: deb\nURIs: http://mirror.example/debian-security\n"),
        "other": ("node.sources", "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\n"),
        "one_line": ("sources.list", "# deb http://old.example/debian sid main\n"
                     "deb [arch=amd64] http://ftp.example/debian bookworm main\n"),
    }  # fmt: skip
    found = {}
    for key, (name, text) in files.items():
        found[key] = tmp_path / name
        found[key].write_text(text)
    return found


def test_the_mirror_is_debian_mirror_then_apt_sources_then_the_default(
    sources: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    assert (
        debian_mirror([sources["other"], sources["security"], sources["deb822"]])
        == "http://mirror.example/debian"
    )
    assert debian_mirror([sources["one_line"], sources["deb822"]]) == "http://ftp.example/debian"
    assert (
        debian_mirror([sources["other"], sources["security"]])
        == DEFAULT_MIRROR
        == "http://deb.debian.org/debian"
    )
    monkeypatch.setenv("DEBIAN_MIRROR", "http://chosen.example/debian/")
    assert debian_mirror([sources["deb822"]]) == "http://chosen.example/debian", "DEBIAN_MIRROR comes first"
    monkeypatch.setenv("DEBIAN_MIRROR", "")
    assert debian_mirror([sources["deb822"]]) == "http://mirror.example/debian", "an empty one is unset"


def test_apt_reads_list_and_sources_files_only(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    for name in ("b.sources", "a.list", "c.list.disabled-by-farm", "d.sources.save"):
        (tmp_path / "sources.list.d" / name).write_text("deb http://x.example/debian sid main\n")
    found = [p.relative_to(tmp_path).as_posix() for p in apt_source_files(tmp_path)]
    assert found == ["sources.list", "sources.list.d/a.list", "sources.list.d/b.sources"]


def _spells(text: str, needle: str) -> bool:
    return needle in "\n".join(re.split(r"(?:^|\s)#", line, maxsplit=1)[0] for line in text.splitlines())


def test_the_mirror_is_one_setting() -> None:
    """One default and one reader in Python, one in the scripts; every script asks that reader."""
    default = "deb.debian.org/debian"
    in_python = sorted(
        p.relative_to(ROOT).as_posix() for p in RELEASE.rglob("*.py") if default in p.read_text()
    )
    assert in_python == ["release/machine/debian.py", "release/settings.py"], "settings.py: in the help"
    shell = {p.name: p.read_text(encoding="utf-8") for p in SCRIPTS.glob("*.sh")}
    assert sorted(name for name, text in shell.items() if _spells(text, default)) == ["_common.sh"]
    assert _spells(shell["make-image.sh"], 'mirror="$(debian_mirror)"'), "make-image.sh's --mirror default"
    assert _spells(shell["python-debian.sh"], "debian_mirror"), "python-debian.sh reads the one setting"
    # The older name stays accepted for one release, as DEBIAN_MIRROR's stand-in only.
    assert sorted(name for name, text in shell.items() if _spells(text, "PYTHON_DEBIAN_MIRROR")) == [
        "python-debian.sh"
    ]
    assert re.search(
        r'DEBIAN_MIRROR="\$\{DEBIAN_MIRROR:-\$\{PYTHON_DEBIAN_MIRROR:-\}\}"', shell["python-debian.sh"]
    )


def _argv_constants(path: Path) -> list[int]:
    """The lines of `path` where a string constant names debootstrap as a program."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"(?:\S*/)?debootstrap", node.value.strip())
    ]


_SHELL_RUN = re.compile(
    r"(?:^|[;&|(`]|\$\(|\b(?:then|do|else|exec|sudo|as_root|env|nice|timeout \S+))\s*"
    r"(?:\S*/)?debootstrap(?=\s|$|[;&|)])"
)


def _shell_runs(text: str) -> list[int]:
    """The lines of a shell script that run debootstrap (a command continued with `\\` is one)."""
    found, command, first = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        first = first or number
        command += " " + re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        if command.endswith("\\"):
            command = command[:-1]
            continue
        if _SHELL_RUN.search(command):
            found.append(first)
        command, first = "", 0
    return found


def test_the_rules_see_a_debootstrap_command(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'import shutil\nARGV = [shutil.which("debootstrap") or "/usr/sbin/debootstrap", "sid"]\n'
    )
    assert _argv_constants(module) == [2, 2]
    assert _shell_runs('x\n  sudo debootstrap --variant=minbase sid "$d"\n') == [2]
    assert _shell_runs("if true; then debootstrap sid /t; fi\n") == [1]
    assert _shell_runs("x\napt-get install -y \\\n  debootstrap mount\nsudo \\\n  debootstrap sid\n") == [4]
    assert (
        _shell_runs('command -v debootstrap || die "apt-get install debootstrap"\n# debootstrap sid\n') == []
    )


def test_one_debootstrap_path() -> None:
    """No module of release/ names debootstrap as a program (the minbase tree is make-image.sh
    `rootfs`'s, through release.machine.debian), and only make-image.sh's one function runs it."""
    in_python = {p.relative_to(ROOT).as_posix(): _argv_constants(p) for p in RELEASE.rglob("*.py")}
    assert {name: lines for name, lines in in_python.items() if lines} == {}
    shells = [*SCRIPTS.rglob("*.sh"), ROOT / ".ci" / "run"]
    runs = {p.relative_to(ROOT).as_posix(): _shell_runs(p.read_text(encoding="utf-8")) for p in shells}
    assert {name: lines for name, lines in runs.items() if lines} == {
        "scripts/make-image.sh": [
            _line_of(SCRIPTS / "make-image.sh", '    debootstrap --variant=minbase "${include[@]}"')
        ]
    }
    text = (SCRIPTS / "make-image.sh").read_text(encoding="utf-8")
    assert _spells(text, 'debootstrap_into "$root" "${pkgs[@]}"'), "the base leaf's debootstrap"
    assert _spells(text, 'debootstrap_into "$rootfs_out" "${extra[@]}"'), "the rootfs leaf's debootstrap"


def _line_of(path: Path, start: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(start))


class _Recorded:
    def __init__(self, returncode: int = 0, stdout: str = "") -> None:
        self.argv: list[Sequence[str]] = []
        self.returncode, self.stdout = returncode, stdout

    def __call__(self, argv: Sequence[str], **_kwargs: object) -> process.Result:
        self.argv.append(list(argv))
        if self.returncode == 0:
            (Path(argv[argv.index("--out") + 1]) / "usr/bin").mkdir(parents=True)
            (Path(argv[argv.index("--out") + 1]) / "usr/bin/ldd").touch()
        return process.Result(tuple(argv), self.returncode, self.stdout)


def test_the_minbase_tree_is_made_by_make_image_rootfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBIAN_MIRROR", "http://chosen.example/debian")
    monkeypatch.setattr(image.os, "geteuid", lambda: 0)
    ran = _Recorded()
    monkeypatch.setattr(debian.process, "run", ran)
    target = tmp_path / "minbase-bookworm"
    assert image.ensure_minbase(target, log=lambda _line: None, workdir=tmp_path / "work") == target
    [argv] = ran.argv
    partial = argv[argv.index("--out") + 1]
    assert argv[:2] == ["bash", str(ROOT / "scripts" / "make-image.sh")]
    assert argv[2:] == [
        "rootfs", "--suite", image.MINBASE_SUITE, "--out", partial, "--mirror", "http://chosen.example/debian",
        "--workdir", str(tmp_path / "work"),
    ]  # fmt: skip
    assert Path(partial).parent == tmp_path and (target / "usr/bin/ldd").exists()
    assert image.ensure_minbase(target, log=lambda _line: None) == target and len(ran.argv) == 1, "made once"


def test_a_failed_rootfs_is_one_line_and_leaves_no_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(image.os, "geteuid", lambda: 0)
    said = "[make-image.sh] error: debootstrap not found: apt-get install debootstrap\n\n"
    monkeypatch.setattr(debian.process, "run", _Recorded(1, "[make-image.sh] [0s] start\n" + said))
    target = tmp_path / "minbase-bookworm"
    with pytest.raises(ToolchainError) as failed:
        image.ensure_minbase(target, log=lambda _line: None)
    assert re.fullmatch(
        rf"making {re.escape(str(target))}\.partial\.\S+ failed: {re.escape(said.strip())}", str(failed.value)
    )
    assert [p.name for p in tmp_path.iterdir()] == [".minbase-bookworm.lock"]


def test_not_root_and_no_sudo_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(image, "sudo_problem", lambda: "sudo asks for a password")
    with pytest.raises(
        ToolchainError,
        match=r"needs root or passwordless sudo \(sudo asks for a password\).*RELEASE_MINBASE_DIR",
    ):
        image.ensure_minbase(tmp_path / "minbase-bookworm", log=lambda _line: None)
