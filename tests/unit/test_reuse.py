"""release.builder.reuse: the order of wheel builds around a shared compiler cache, and ccache's
settings and statistics; a container build's up-to-date stamp (release.builder.container)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from release.builder.container import container_up_to_date
from release.builder.reuse import Wave, build_waves, ccache_env, read_stats_log, remember
from release.config.matrix import load
from release.plan.steps import BuildStep, make_plan
from release.wheel.files import file_sha256
from release.wheel.names import report_path


def test_with_a_shared_cache_the_first_wheel_builds_alone_on_every_core() -> None:
    waves = build_waves(4, jobs=2, cores=2, shared_cache=True)
    assert waves == (Wave(range(0, 1), 2), Wave(range(1, 4), 2))


def test_without_a_cache_every_wheel_starts_at_once_up_to_jobs() -> None:
    assert build_waves(4, jobs=2, cores=2, shared_cache=False) == (Wave(range(0, 4), 2),)


@pytest.mark.parametrize(
    ("count", "jobs", "cores", "expected"),
    [
        (1, 2, 2, (Wave(range(0, 1), 2),)),  # one wheel: every core, with or without a cache
        (2, 1, 8, (Wave(range(0, 1), 8), Wave(range(1, 2), 8))),  # one at a time: all cores each
        (3, 4, 8, (Wave(range(0, 1), 8), Wave(range(1, 3), 5))),  # two left share eight cores, +1
        (5, 8, 2, (Wave(range(0, 1), 2), Wave(range(1, 5), 2))),  # four on two cores: one each, +1
        (0, 2, 2, ()),
    ],
)
def test_waves_cover_every_wheel_once(count: int, jobs: int, cores: int, expected: tuple[Wave, ...]) -> None:
    waves = build_waves(count, jobs=jobs, cores=cores, shared_cache=True)
    assert waves == expected
    assert [i for w in waves for i in w.steps] == list(range(count))


def test_ccache_hashes_no_build_directory_and_rewrites_paths_below_the_work_directory(tmp_path: Path) -> None:
    env = ccache_env(tmp_path)
    assert env["CCACHE_BASEDIR"] == str(tmp_path)
    assert env["CCACHE_NOHASHDIR"] == "true"


def test_stats_log_counts_direct_and_preprocessed_hits(tmp_path: Path) -> None:
    log = tmp_path / "x.ccache"
    log.write_text(
        "# ../src/a.cpp\ndirect_cache_hit\n# ../src/b.cpp\ndirect_cache_miss\npreprocessed_cache_hit\n"
        "# ../src/c.cpp\ndirect_cache_miss\npreprocessed_cache_miss\ncache_miss\ncalled_for_link\n",
        encoding="utf-8",
    )
    stats = read_stats_log(log)
    assert stats is not None and (stats.hits, stats.misses) == (2, 1)
    assert stats.text == "2/3 (67%)"
    assert read_stats_log(tmp_path / "absent") is None


def _rocm_step() -> BuildStep:
    plan = make_plan(load(Path(__file__).resolve().parents[2] / "matrix.yaml"))
    return next(s for s in plan.builds if s.variant.name == "rocm")


def test_a_container_build_s_stamp_finds_its_wheel_unchanged_and_nothing_else(tmp_path: Path) -> None:
    """The stamp of a container build names its wheel relative to the checkout (a copy of the
    checkout with its build/ and wheelhouse/ keeps it); the wheel is taken only under the same key,
    with the same bytes, beside its report."""
    step, root = _rocm_step(), tmp_path / "checkout"
    wheel = root / "wheelhouse" / "rocm" / f"x-0.1.0-{step.python_tag}-{step.python_tag}-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"a wheel")
    report_path(wheel).write_text("{}", encoding="utf-8")
    stamps = root / "build" / "rocm" / "stamps"
    stamp = stamps / f"container-{step.identifier}.json"
    elsewhere = tmp_path / "elsewhere.whl"
    elsewhere.write_bytes(b"a wheel")
    remember(stamp, "k1", elsewhere, root)
    assert json.loads(stamp.read_text(encoding="utf-8"))["wheel"] == str(elsewhere)
    remember(stamp, "k1", wheel, root)
    record = json.loads(stamp.read_text(encoding="utf-8"))
    assert record == {"key": "k1", "wheel": f"wheelhouse/rocm/{wheel.name}", "sha256": file_sha256(wheel)}
    assert container_up_to_date(stamps, step, {step.identifier: "k1"}, root) == wheel
    moved = tmp_path / "copy"
    shutil.copytree(root, moved)
    found = container_up_to_date(moved / "build" / "rocm" / "stamps", step, {step.identifier: "k1"}, moved)
    assert found == moved / "wheelhouse" / "rocm" / wheel.name
    assert container_up_to_date(stamps, step, {step.identifier: "k2"}, root) is None  # another input
    assert container_up_to_date(stamps, step, {}, root) is None  # no key (an image without an ID)
    wheel.write_bytes(b"another wheel")
    assert container_up_to_date(stamps, step, {step.identifier: "k1"}, root) is None  # other bytes
    wheel.write_bytes(b"a wheel")
    report_path(wheel).unlink()
    assert container_up_to_date(stamps, step, {step.identifier: "k1"}, root) is None  # no report
