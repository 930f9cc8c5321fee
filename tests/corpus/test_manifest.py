"""The corpus manifest is well formed (no network: fetch.py does the downloading)."""

from __future__ import annotations

import re

import pytest

from tests.corpus.fetch import cache_dir, load_manifest


def test_manifest_entries() -> None:
    wheels = load_manifest()
    assert len(wheels) >= 8
    assert len({w.filename for w in wheels}) == len(wheels)
    for w in wheels:
        assert re.fullmatch(r"[0-9a-f]{64}", w.sha256), w.filename
        assert w.url.startswith("https://files.pythonhosted.org/packages/")
        assert w.url.endswith("/" + w.filename)
        assert w.filename.endswith(".whl") and "x86_64" in w.filename
        assert w.version in w.filename
        assert w.size > 0 and w.why
    assert sum(w.size for w in wheels) < 2_500_000_000


def test_cache_dir_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELEASE_CORPUS_CACHE", "/tmp/somewhere")
    assert str(cache_dir()) == "/tmp/somewhere"
    assert str(cache_dir("/x")) == "/x"
    monkeypatch.delenv("RELEASE_CORPUS_CACHE")
    assert cache_dir().name == "release-corpus"
