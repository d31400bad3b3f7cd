"""The content-addressed cache (store/cache.py): named by the hash of the bytes, written once, never half-written,
and nothing outside it is resolved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store import cache


def test_the_same_bytes_are_stored_once_under_their_hash(tmp_path: Path) -> None:
    first = cache.put(tmp_path, b"a thumbnail", "jpg")
    again = cache.put(tmp_path, b"a thumbnail", "jpg")
    other = cache.put(tmp_path, b"another", "jpg")
    assert first == again != other
    assert cache.is_cache_path(first) and first.startswith("cache/")
    assert (tmp_path / first).read_bytes() == b"a thumbnail"
    assert len(list(cache.cache_dir(tmp_path).rglob("*.jpg"))) == 2


def test_a_stored_file_is_made_fresh_again_when_put_twice(tmp_path: Path) -> None:
    rel = cache.put(tmp_path, b"kept", "png")
    os.utime(tmp_path / rel, (1, 1))  # as if old: a sweep would take it
    cache.put(tmp_path, b"kept", "png")
    assert (tmp_path / rel).stat().st_mtime > 1


def test_a_write_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "ab" / "cd" / "x.jpg"
    with pytest.raises(RuntimeError):
        with cache.written_beside(target) as tmp:
            Path(tmp).write_bytes(b"half")
            raise RuntimeError("the encoder failed")
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_only_well_formed_paths_inside_the_cache_resolve(tmp_path: Path) -> None:
    rel = cache.put(tmp_path, b"x", "json")
    assert cache.resolve(tmp_path, rel) == (tmp_path / rel).resolve()
    assert cache.resolve(tmp_path, "cache/../assay.db") is None
    assert cache.resolve(tmp_path, rel.replace(".json", ".exe")) is None
    outside = tmp_path / "secret.txt"
    outside.write_text("no")
    link = tmp_path / "cache" / "00" / "00" / ("0" * 32 + ".txt")
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)  # a well-formed name pointing out of the cache
    assert cache.is_cache_path(str(link.relative_to(tmp_path)))
    assert cache.resolve(tmp_path, str(link.relative_to(tmp_path))) is None
    assert cache.mime_type(rel) == "application/json" and cache.mime_type("cache/x.bin") == "application/octet-stream"
