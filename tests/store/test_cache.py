"""The content-addressed cache (store/cache.py): named by the hash of the bytes, written once, never half-written
(not even on a full disk), and nothing outside it is resolved."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from store import cache
from tests.small_disk import small_disk


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


def test_a_put_on_a_full_disk_raises_enospc_leaves_nothing_and_works_once_space_is_freed(tmp_path):
    data = os.urandom(64 * 1024)  # does not compress, does not fit
    with small_disk(tmp_path / "disk", 256) as disk:
        disk.fill(16 * 1024)
        with pytest.raises(OSError) as raised:
            cache.put(disk.path, data, "jpg")
        assert raised.value.errno == errno.ENOSPC  # the callers report it as NO_SPACE (flows.media.common.no_space)
        assert [p for p in cache.cache_dir(disk.path).rglob("*") if p.is_file()] == []  # no part, no temporary file
        disk.unfill()
        rel = cache.put(disk.path, data, "jpg")
        assert (disk.path / rel).read_bytes() == data
