"""Serving images' facts: the probe's output parsed, the declaration held against the facts, the
facts file read and written, and the plan's stand-ins made from what the images hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.config.facts import ImageFacts, Layout, facts_path, load_facts, save_facts
from release.config.matrix import load
from release.errors import MatrixError, SmokeError
from release.plan.imagefacts import (
    awaiting_digests,
    compare,
    current,
    missing_pythons,
    pinned_without_facts,
    refuse_missing_pythons,
)
from release.plan.steps import make_plan
from release.smoke.probe import ImagesDisagree, ProbeResult, parse

ROOT = Path(__file__).resolve().parents[2]
HIP = "libamdhip64.so.7"
PY = 'python=["{v}", "cpython", "/opt/python/cp{t}-cp{t}/bin/python", "linux-x86_64"]'


def _python(version: str) -> str:
    return PY.format(v=version, t=version.replace(".", ""))


@pytest.mark.parametrize(
    ("lines", "layout", "where"),
    [
        (
            [f"ldconfig={HIP} /usr/lib/x86_64-linux-gnu/{HIP}"],
            Layout(runtime="system"),
            f"/usr/lib/x86_64-linux-gnu/{HIP}",
        ),
        (
            [f"ldconfig={HIP} /opt/rocm-7.2.4/lib/{HIP}"],
            Layout(runtime="prefix", prefix="/opt/rocm-7.2.4/lib", via="ld.so.conf.d"),
            f"/opt/rocm-7.2.4/lib/{HIP}",
        ),
        (
            [
                "ld_library_path=/opt/rocm/lib",
                f"ldpath={HIP} /opt/rocm/lib",
                f"ldconfig={HIP} /usr/lib/{HIP}",
            ],
            Layout(runtime="prefix", prefix="/opt/rocm/lib", via="LD_LIBRARY_PATH"),
            f"/opt/rocm/lib/{HIP}",
        ),
        ([f"prefix={HIP} /opt/rocm/lib"], Layout(runtime="absent"), None),
        (
            ["ldconfig=libamdhip64.so.6 /usr/lib/x86_64-linux-gnu/libamdhip64.so.6"],
            Layout(runtime="absent"),
            None,
        ),
    ],
    ids=["system", "ld.so.conf.d-prefix", "LD_LIBRARY_PATH-first", "present-off-path", "other-major"],
)
def test_the_loader_order_gives_the_layout(lines: list[str], layout: Layout, where: str | None) -> None:
    facts = parse("\n".join(lines), reference="img", digest=None, sonames=[HIP])
    assert facts.layout == layout
    assert facts.runtime == {HIP: where}


def test_pythons_glibc_and_toolkit_are_read_once_each() -> None:
    output = "\n".join(
        [
            "glibc=2.35",
            _python("3.10"),
            _python("3.10"),  # python3 and python3.10 are one interpreter
            'python=["3.11", "pypy", "/usr/bin/pypy3", "linux-x86_64"]',
            "python=not json",
            "version=/opt/rocm/.info/version 7.2.0-43 ",
            "noise without an equals sign",
        ]
    )
    facts = parse(output, reference="img", digest="sha256:" + "a" * 64, sonames=[])
    assert facts.pythons == {"3.10": "/opt/python/cp310-cp310/bin/python"}
    assert facts.platforms == {"3.10": "linux-x86_64"}
    assert (facts.glibc, facts.toolkit_version, facts.layout) == ("2.35", "7.2.0-43", None)
    cuda = parse('version=/usr/local/cuda/version.json { "cuda" : { "version" : "13.0.1" } }', reference="i",
                 digest=None, sonames=[])  # fmt: skip
    assert cuda.toolkit_version == "13.0.1"


def _loaded(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    (tmp_path / "engine").symlink_to(ROOT / "engine")
    (tmp_path / "packaging").symlink_to(ROOT / "packaging")
    return load(path)


REAL = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
SGLANG = next(line for line in REAL.splitlines() if "its ROCm 7.2.0 flavours" in line)


def _facts(**changes: object) -> ImageFacts:
    base = dict(reference="r", digest=None, source="probe", pythons={"3.10": "/usr/bin/python3.10"},
                glibc="2.35",
                layout=Layout(runtime="prefix", prefix="/opt/rocm/lib", via="LD_LIBRARY_PATH"))  # fmt: skip
    base.update(changes)
    return ImageFacts(**base)  # type: ignore[arg-type]


def test_a_declared_python_the_image_lacks_names_the_line_and_the_edit(tmp_path: Path) -> None:
    assert REAL.count(SGLANG) == 1
    loaded = _loaded(tmp_path, REAL.replace(SGLANG, '    python: ["3.12"]'))
    rows, problems = compare(loaded, "sglang-rocm", _facts())
    (problem,) = problems
    line = loaded.lines["images.sglang-rocm.python"]
    assert str(problem) == (
        f"matrix.yaml:{line}: images.sglang-rocm.python: declares Python 3.12, "
        "but the image has Python 3.10 only: "
        'set python: ["3.10"]'
    )
    assert [(r.fact, r.status) for r in rows] == [("python", "differs"), ("glibc", "ok"), ("runtime", "ok")]


def test_an_old_glibc_and_another_layout_disagree(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, REAL)
    facts = _facts(
        glibc="2.17", layout=Layout(runtime="prefix", prefix="/opt/rocm-7.2.0/lib", via="ld.so.conf.d")
    )
    _rows, problems = compare(loaded, "sglang-rocm", facts)
    text = [str(p) for p in problems]
    assert any(
        "platform.floor: declares manylinux_2_28_x86_64, but the image has glibc 2.17" in t for t in text
    )
    assert any(
        "images.sglang-rocm.simulate: declares "
        "{runtime: prefix, prefix: /opt/rocm/lib, via: LD_LIBRARY_PATH}, "
        "but the image has {runtime: prefix, prefix: /opt/rocm-7.2.0/lib, via: ld.so.conf.d}"
        in t
        and t.endswith("set simulate: {runtime: prefix, prefix: /opt/rocm-7.2.0/lib, via: ld.so.conf.d}")
        for t in text
    ), text


def test_an_image_expected_without_the_runtime_that_has_it_disagrees(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, REAL)
    every = {v: "/x" for v in loaded.matrix.python}
    facts = _facts(pythons=every, glibc="2.41", layout=Layout(runtime="system"),
                   runtime={HIP: f"/usr/lib/x86_64-linux-gnu/{HIP}"})  # fmt: skip
    _rows, problems = compare(loaded, "rocm6-only", facts)
    (problem,) = problems
    assert problem.key == "images.rocm6-only.expect"
    assert f"{HIP} -> /usr/lib/x86_64-linux-gnu/{HIP}" in str(problem)


def test_unknown_facts_are_not_disagreements(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, REAL)
    rows, problems = compare(loaded, "vllm-rocm", _facts(pythons=None, glibc=None, layout=None))
    assert problems == []
    assert {r.status for r in rows} == {"unknown"}


def test_facts_belong_to_one_digest(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, REAL)
    reference = loaded.matrix.images["vllm-rocm"].container
    assert reference is not None
    digest = reference.split("@")[1]
    assert current(loaded, "vllm-rocm", _facts(digest=digest)) is not None
    assert current(loaded, "vllm-rocm", _facts(digest="sha256:" + "0" * 64)) is None
    assert pinned_without_facts(loaded, {"vllm-rocm": _facts(digest=digest)}) == {
        "sglang-rocm": "no recorded facts"
    }


def test_the_repository_declares_what_its_images_hold() -> None:
    """The recorded facts (public sources today) agree with matrix.yaml: SGLang's ROCm 7.2.0
    image is Python 3.10, and its stand-in is made with that Python."""
    loaded = load(ROOT / "matrix.yaml")
    # pin: probe, awaiting their digests
    today = {"vllm-rocm-v033", "amd-vllm-rocm10", "sglang-rocm10", "sglang-rocm724"}
    assert set(loaded.image_facts) == {"vllm-rocm", "sglang-rocm", *today}
    assert pinned_without_facts(loaded, loaded.image_facts) == {}
    assert set(awaiting_digests(loaded, loaded.image_facts)) == today
    assert missing_pythons(loaded, loaded.image_facts) == []
    for name, facts in loaded.image_facts.items():
        assert compare(loaded, name, facts)[1] == []
    standins = {i.name: i.standin for i in make_plan(loaded).variants["rocm"].images if i.standin}
    assert standins["sglang-rocm"].pythons == ("3.10",)
    assert standins["vllm-rocm"].pythons == ("3.12",)


def test_smoke_and_the_release_plan_refuse_a_python_the_facts_lack(tmp_path: Path) -> None:
    (tmp_path / "images.facts.json").symlink_to(ROOT / "images.facts.json")
    loaded = _loaded(tmp_path, REAL.replace(SGLANG, '    python: ["3.12"]'))
    with pytest.raises(
        SmokeError, match=r"images.sglang-rocm.python: declares Python 3.12, but the image has"
    ):
        refuse_missing_pythons(loaded)


def test_the_facts_file_round_trips_and_bad_files_name_the_key(tmp_path: Path) -> None:
    path = facts_path(tmp_path / "matrix.yaml")
    assert load_facts(path) == {}
    facts = {"x": _facts(digest="sha256:" + "b" * 64, notes=("from a probe",))}
    save_facts(path, facts)
    assert load_facts(path) == facts
    data = json.loads(path.read_text(encoding="utf-8"))
    data["images"]["x"]["layout"]["via"] = "rpath"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(
        MatrixError, match=r"images.x.layout.via: expected ld.so.conf.d, LD_LIBRARY_PATH or null"
    ):
        load_facts(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(MatrixError, match="not JSON"):
        load_facts(path)
    path.write_text(json.dumps({"schema_version": 99}), encoding="utf-8")
    with pytest.raises(MatrixError, match="expected schema_version 1"):
        load_facts(path)


def test_a_probe_result_names_every_problem_at_once() -> None:
    result = ProbeResult(without_facts={"vllm-rocm": "no facts for its digest"})
    result.require_agreement("images.facts.json", require_facts=False)  # facts are asked for by --require
    result.failures.append("sglang: pull failed")
    with pytest.raises(ImagesDisagree) as caught:
        result.require_agreement("images.facts.json", require_facts=True)
    assert caught.value.exit_code == 1
    assert str(caught.value).splitlines() == [
        "2 problem(s) with the serving images:",
        "  images.facts.json: images.vllm-rocm: no facts for its digest: run `release images probe --pull "
        "--write` where the registry is reachable, and commit the file",
        "  sglang: pull failed",
    ]


def test_a_floor_for_every_machine_still_meets_the_images_glibc(tmp_path: Path) -> None:
    """`floor: manylinux_2_28` with two machines: the serving images (the first machine's) are held
    to manylinux_2_28_x86_64's glibc as before."""
    two = REAL.replace(
        "  floor: manylinux_2_28_x86_64", "  floor: manylinux_2_28\n  architectures: [x86_64, aarch64]"
    )
    _rows, problems = compare(_loaded(tmp_path, two), "sglang-rocm", _facts(glibc="2.17"))
    assert any("declares manylinux_2_28_x86_64, but the image has glibc 2.17" in str(p) for p in problems)
