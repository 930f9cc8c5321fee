"""The run's time account and the `slow` marker check (tests/ci_time.py, issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import ci_time


def test_an_unmarked_test_over_the_limit_is_named_and_a_marked_one_is_not(tmp_path: Path) -> None:
    for entry in (
        {"kind": "test", "test": "a.py::slow_unmarked", "own_s": 61.0, "slow": False},
        {"kind": "test", "test": "a.py::slow_marked", "own_s": 500.0, "slow": True},
        {"kind": "test", "test": "a.py::quick", "own_s": 59.9, "slow": False},
        {"kind": "test", "test": "a.py::slower_unmarked", "own_s": 90.0, "slow": False},
        {"kind": "fixture", "fixture": "host_wheelhouse", "scope": "session", "seconds": 300.0},
    ):
        ci_time.record(tmp_path, entry)
    offenders = ci_time.unmarked_slow(ci_time.read(tmp_path))
    assert [o.test for o in offenders] == ["a.py::slower_unmarked", "a.py::slow_unmarked"]


def test_the_limit_stretches_only_with_load_beyond_the_runs_own(tmp_path: Path) -> None:
    # Two cores: the run's own three workers keep the load near 4 (BUSY_PER_CPU per core).
    for entry in (
        {"kind": "test", "test": "a.py::own_load", "own_s": 70.0, "slow": False, "load": 4.0, "cpus": 2},
        {
            "kind": "test",
            "test": "a.py::twice_as_busy",
            "own_s": 110.0,
            "slow": False,
            "load": 8.0,
            "cpus": 2,
        },
        {
            "kind": "test",
            "test": "a.py::too_slow_even_so",
            "own_s": 130.0,
            "slow": False,
            "load": 8.0,
            "cpus": 2,
        },
        {"kind": "test", "test": "a.py::no_load_recorded", "own_s": 61.0, "slow": False},
    ):
        ci_time.record(tmp_path, entry)
    offenders = ci_time.unmarked_slow(ci_time.read(tmp_path))
    assert [(o.test, o.limit) for o in offenders] == [
        ("a.py::too_slow_even_so", 120.0), ("a.py::own_load", 60.0), ("a.py::no_load_recorded", 60.0),
    ]  # fmt: skip


def test_unmarked_tests_over_half_the_limit_are_listed(tmp_path: Path) -> None:
    for entry in (
        {"kind": "test", "test": "a.py::near", "own_s": 45.0, "slow": False},
        {"kind": "test", "test": "a.py::quick", "own_s": 29.0, "slow": False},
        {"kind": "test", "test": "a.py::marked", "own_s": 45.0, "slow": True},
        {"kind": "test", "test": "a.py::over", "own_s": 61.0, "slow": False},
    ):
        ci_time.record(tmp_path, entry)
    assert [o.test for o in ci_time.near_slow(ci_time.read(tmp_path))] == ["a.py::near"]


def test_a_test_entry_carries_the_machine_load() -> None:
    found = ci_time.machine_load()
    assert isinstance(found["load"], float) and found["load"] >= 0
    assert isinstance(found["cpus"], int) and found["cpus"] >= 1


def test_the_account_names_each_shared_fixture_and_image() -> None:
    entries = [
        {"kind": "fixture", "fixture": "host_wheelhouse", "scope": "session", "seconds": 300.0,
         "worker": "gw1", "first": "tests/integration/test_build.py::test_x"},
        {"kind": "fixture", "fixture": "tiny", "scope": "module", "seconds": 0.1,
         "worker": "main", "first": "m"},
        {"kind": "image", "image": "localhost/xfer-build-rocm", "state": "made", "seconds": 420.0,
         "worker": "gw0", "by": "fixture local_images"},
    ]  # fmt: skip
    lines = ci_time.account_lines(entries)
    assert lines[0] == "shared fixtures: 2 set up, 300 s in all (1 took 1 s or more)"
    assert "host_wheelhouse (session, gw1) for tests/integration/test_build.py::test_x" in lines[1]
    assert not any("tiny" in line for line in lines)
    assert "localhost/xfer-build-rocm: made (gw0) by fixture local_images" in lines[-1]


def test_the_account_ends_with_when_each_worker_went_idle() -> None:
    entries = [
        {"kind": "test", "test": "a", "own_s": 100.0, "end": 1100.0, "worker": "gw0"},
        {"kind": "test", "test": "b", "own_s": 10.0, "end": 1500.0, "worker": "gw0"},
        {"kind": "test", "test": "c", "own_s": 50.0, "end": 1300.0, "worker": "gw1"},
        {"kind": "test", "test": "d", "own_s": 5.0, "worker": "gw2"},  # an older entry: no end
    ]
    lines = ci_time.account_lines(entries)
    assert lines[-1] == "last test (of 1 s or more) ended, from the first one's start: gw1 300 s, gw0 500 s"
    assert ci_time.worker_lines([]) == []


def test_what_ensure_said_is_read_back() -> None:
    assert ci_time.image_state(["image t: checking its recipe", "image t: made (300 s)"]) == "made"
    assert ci_time.image_state(["image t: up to date, kept (2 s)"]) == "up to date"
    waited = [
        "making the local image t is locked by pid 7 (/x/.make-t.lock): waiting",
        "image t: up to date, kept (1 s)",
    ]
    assert ci_time.image_state(waited) == "up to date (waited for another maker)"
    assert ci_time.image_state(["image t: present; used as it is (...)"]) == "present, used as it is"


def test_ensure_is_recorded_with_whoever_asked_and_failures_too() -> None:
    notes: list[dict[str, object]] = []

    def ensure(engine: str, image: object, *, log: object) -> None:
        assert callable(log)
        log("image localhost/x: up to date, kept (0 s)")

    recorded = ci_time.ensure_recorder(ensure, lambda e: notes.append(dict(e)), lambda: "test_a")
    recorded("podman", "localhost/x", log=lambda _line: None)
    assert (notes[0]["image"], notes[0]["state"], notes[0]["by"]) == ("localhost/x", "up to date", "test_a")


def test_workers_share_the_controllers_directory(tmp_path: Path) -> None:
    assert ci_time.run_directory(tmp_path / "popen-gw0", worker=True) == tmp_path
    assert ci_time.run_directory(tmp_path, worker=False) == tmp_path


def test_the_longest_files_are_handed_out_first_and_the_rest_keep_their_order() -> None:
    paths = ["tests/unit/test_a.py", "tests/integration/test_readme.py", "tests/unit/test_b.py",
             "tests/integration/test_rehearse.py"]  # fmt: skip
    assert ci_time.long_files_first(paths) == [
        "tests/integration/test_rehearse.py", "tests/integration/test_readme.py",
        "tests/unit/test_a.py", "tests/unit/test_b.py",
    ]  # fmt: skip


def test_every_long_file_named_exists() -> None:
    root = Path(__file__).resolve().parents[2]
    assert [path for path in ci_time.LONG_FILES if not (root / path).is_file()] == []


def test_collection_puts_the_long_files_first(pytestconfig: pytest.Config) -> None:
    """This run's own collection went through the hook: a file from LONG_FILES, if collected, comes
    before every unit test file (checked on the session's items)."""
    items = pytestconfig.pluginmanager.get_plugin("session").items  # type: ignore[union-attr]
    files = list(dict.fromkeys(str(item.path.relative_to(pytestconfig.rootpath)) for item in items))
    assert files == ci_time.long_files_first(files)


def test_a_tag_of_the_same_recipe_is_not_counted_as_made() -> None:
    said = ["image t: checking its recipe", "image t: tagged (the image of the same recipe) (2 s)"]
    assert ci_time.image_state(said) == "tagged"


def _calls(record: Path, lines: list[str], inputs: dict[str, str]) -> None:
    (record / "inputs").mkdir(parents=True)
    (record / "calls.log").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    for name, text in inputs.items():
        (record / "inputs" / f"{name}.txt").write_text(text, encoding="utf-8")


def test_a_tag_made_twice_is_named_with_why_its_inputs_differed(tmp_path: Path) -> None:
    full, one = "a" * 64, "b" * 64
    _calls(
        tmp_path,
        [
            f"900\tlocalhost/x\t{full}\tmade\t100\tbefore this run",
            f"1000\tlocalhost/x\t{full}\tmade\t120\ttests/a.py::test_a",
            f"1010\tlocalhost/y\t{one}\ttagged\t2\ttests/a.py::test_a",
            "not a record",
            f"1100\tlocalhost/x\t{one}\tmade\t118\tpython -m release rehearse",
            f"1200\tlocalhost/x\t{one}\tup-to-date\t1\ttests/b.py::test_b",
        ],
        {
            full: "suite=trixie\npython 3.10 /p/3.10\npython 3.12 /p/3.12\n",
            one: "suite=trixie\npython 3.12 /p/3.12\n",
        },
    )
    calls = ci_time.image_calls(tmp_path, since=1000)
    assert [c.when for c in calls] == [1000, 1010, 1100, 1200]
    lines = ci_time.image_call_lines(calls, tmp_path)
    assert lines[0] == "make-image.sh calls (every process): 4: made 2, tagged 1, up-to-date 1"
    assert lines[1] == "  localhost/x was made 2 times:"
    assert lines[2] == f"      120 s  inputs {full[:12]}  by tests/a.py::test_a"
    assert lines[3] == f"      118 s  inputs {one[:12]}  by python -m release rehearse"
    assert lines[4:] == [f"    inputs {full[:12]} -> {one[:12]}:", "    - python 3.10 /p/3.10"]


def test_a_tag_made_twice_of_one_recipe_says_it_was_lost_in_between(tmp_path: Path) -> None:
    same = "c" * 64
    made = [f"5\tlocalhost/x\t{same}\tmade\t100\tt1", f"6\tlocalhost/x\t{same}\tmade\t90\tt2"]
    _calls(tmp_path, made, {})
    lines = ci_time.image_call_lines(ci_time.image_calls(tmp_path, since=0), tmp_path)
    lost = "the image was removed or its tag moved in between"
    assert lines[-1] == f"    inputs {same[:12]} both times: {lost}"
    assert ci_time.image_calls(tmp_path / "absent", since=0) == []
    assert ci_time.image_call_lines([], tmp_path) == []


def test_the_account_counts_the_wheels_reused_and_built(tmp_path: Path) -> None:
    """Issue 60: the run's account says how many wheels its builds took from the store and how many
    they compiled, and names a wheel compiled twice (its inputs differed)."""
    from release.builder import store

    shared = tmp_path / "store"
    wheel = tmp_path / "w" / "x-0.1-cp312-cp312-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    wheel.with_name(wheel.name + ".verify.json").write_text("{}", encoding="utf-8")
    store.keep(shared, "1" * 64, wheel)
    assert store.take(shared, "1" * 64) is not None
    assert store.take(shared, "1" * 64) is not None
    store.keep(shared, "2" * 64, wheel)  # the same name from other inputs
    lines = ci_time.store_lines(store.events(shared))
    assert lines[0].startswith("wheels reused: 2, built: 2 ")
    assert lines[1:] == [f"  {wheel.name} was built 2 times (different inputs)"]
    assert ci_time.store_lines([]) == []
    run = tmp_path / "pytest-7"
    run.mkdir()
    assert ci_time.wheel_store(run).name == f"release-wheel-store-pytest-7-{run.stat().st_ino}"
