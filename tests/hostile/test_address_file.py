"""Issue 57 cause 6: `release hardware --address-file` on a FIFO or a link to /dev/zero hung (the
wait's `exists()` saw it, then the read blocked or never ended): now one line, at once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from release.errors import UsageError
from release.hardware import pair


def _wait(address: Path) -> None:
    pair.await_address_file(pair.PairOptions(address_file=address, wait=5.0), lambda _line: None)


def test_a_fifo_address_file_ends_at_once(tmp_path: Path) -> None:
    address = tmp_path / "master.json"
    os.mkfifo(address)
    started = time.monotonic()
    with pytest.raises(UsageError, match="a FIFO"):
        _wait(address)
    assert time.monotonic() - started < 2


def test_a_dev_zero_address_file_ends_at_once(tmp_path: Path) -> None:
    address = tmp_path / "master.json"
    address.symlink_to("/dev/zero")
    with pytest.raises(UsageError, match="character device"):
        _wait(address)


def test_a_huge_address_file_is_refused(tmp_path: Path) -> None:
    address = tmp_path / "master.json"
    address.write_bytes(b" " * (pair.MAX_ADDRESS_BYTES + 1))
    with pytest.raises(UsageError, match="larger than"):
        _wait(address)


def test_a_published_failure_is_escaped(tmp_path: Path) -> None:
    address = tmp_path / "master.json"
    address.write_text('{"error": "boom \\u001b]0;owned\\u0007"}', encoding="utf-8")
    error = pair.published_error(address)
    assert error is not None and "\x1b" not in error and "boom" in error


def test_a_pid_file_of_arabic_digits_is_no_leg(tmp_path: Path) -> None:
    address = tmp_path / "master.json"
    pid_file, _record, _log = pair.state(address)
    pid_file.write_text("\u0661\u0662\n", encoding="utf-8")
    with pytest.raises(UsageError, match="no detached prefill leg"):
        pair.attach(pair.PairOptions(address_file=address, wait=1.0), print)
