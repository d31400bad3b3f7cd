"""Text statistics (flows/media/text.py) and the streamed content hash (hashing.py)."""

from __future__ import annotations

import codecs

import pytest
import xxhash

from examples import mediagen as media
from flows.media import hashing, text


@pytest.mark.parametrize("encoding, expected", [
    ("utf-8", "utf-8"), ("utf-8-sig", "utf-8-sig"), ("utf-16", "utf-16"),
    ("cp1252", "latin-1"),  # not UTF-8 (a Windows text): read as latin-1, which decodes any byte
])
def test_encoding_is_detected_and_counts_are_the_same_in_every_encoding(tmp_path, encoding, expected):
    path = media.text(tmp_path / "notes.md", lines=12, encoding=encoding)
    flat, details = text.stats(str(path))
    assert flat["encoding"] == expected
    assert (flat["lines"], flat["words"]) == (12, 12 * 8)
    assert flat["chars"] == len(path.read_bytes().decode(expected))
    assert details["lines"] == 12


def test_counts_are_right_across_chunk_boundaries(tmp_path):
    path = tmp_path / "long.txt"
    content = "alpha beta\ngamma  delta epsilon\n\nzeta" * 50
    path.write_text(content, encoding="utf-8")
    for chunk in (3, 7, 64, 1 << 20):
        flat, _ = text.stats(str(path), chunk=chunk)
        assert flat["words"] == len(content.split())
        assert flat["lines"] == content.count("\n") + 1  # the last line has no newline and still counts
        assert flat["chars"] == len(content)


def test_a_multibyte_character_split_by_a_chunk_stays_utf8(tmp_path):
    path = tmp_path / "cafe.txt"
    path.write_text("café " * 100, encoding="utf-8")
    assert text.stats(str(path), chunk=5)[0]["encoding"] == "utf-8"


def test_an_empty_text_file_has_nothing_to_count(tmp_path):
    flat, _ = text.stats(str(media.empty(tmp_path / "empty.txt")))
    assert (flat["lines"], flat["words"], flat["chars"]) == (0, 0, 0)


def test_utf16_bom_is_recognised(tmp_path):
    path = tmp_path / "be.txt"
    path.write_bytes(codecs.BOM_UTF16_BE + "one two\n".encode("utf-16-be"))
    flat, _ = text.stats(str(path))
    assert flat["encoding"] == "utf-16" and flat["words"] == 2


def test_hash_is_xxh3_128_of_the_bytes(tmp_path):
    path = tmp_path / "data.bin"
    data = bytes(range(256)) * 5000
    path.write_bytes(data)
    assert hashing.hash_file(str(path)) == "xxh128:" + xxhash.xxh3_128_hexdigest(data)


def test_hash_is_streamed_in_chunks_and_does_not_depend_on_the_chunk_size(tmp_path, monkeypatch):
    path = tmp_path / "data.bin"
    path.write_bytes(b"x" * 10_000 + b"y" * 333)
    sizes = []
    real = xxhash.xxh3_128

    class Spy:
        def __init__(self):
            self.inner = real()

        def update(self, chunk):
            sizes.append(len(chunk))
            self.inner.update(chunk)

        def hexdigest(self):
            return self.inner.hexdigest()

    monkeypatch.setattr(hashing.xxhash, "xxh3_128", Spy)
    streamed = hashing.hash_file(str(path), chunk=4096)
    assert max(sizes) <= 4096 and len(sizes) == 3
    monkeypatch.undo()
    assert streamed == hashing.hash_file(str(path))


def test_hash_of_an_empty_file_is_the_hash_of_nothing(tmp_path):
    assert hashing.hash_file(str(media.empty(tmp_path / "zero"))) == "xxh128:" + xxhash.xxh3_128_hexdigest(b"")
