"""One segment file (store.textindex.segment): documents, lines, page runs, the vocabulary's lookups, postings in
both forms, damaged files refused, and files written whole or not at all (a full disk is NoSpace)."""

from __future__ import annotations

import errno
import json
import zlib
from pathlib import Path
from typing import Callable

import pytest
from pyroaring import BitMap

from store.errors import NoSpace
from store.textindex.segment import MAGIC, ROARING_MIN, CorruptSegment, DocIn, DocMeta, Segment, write_atomically
from store.textindex.tokens import Bound, Run
from tests.store.textindex.support import write_segment

PDF = DocIn(7, 3, "/lib/a.pdf", "pdf", ["Page One", "second LINE", "Page Two", "", "Page Three é"],
            runs=[(1, 1, False), (3, 2, True), (5, 3, False)])
MD = DocIn(9, 4, "/lib/b.md", "markdown", ["only line"])


@pytest.fixture
def seg(tmp_path: Path) -> Segment:
    return write_segment(tmp_path, [PDF, MD])


def test_a_written_segment_reads_back_its_documents(seg):
    assert seg.docs == [DocMeta(7, 3, "/lib/a.pdf", "pdf", 0, 5), DocMeta(9, 4, "/lib/b.md", "markdown", 5, 1)]
    assert seg.lines == 6 and seg.entry_ids.tolist() == [7, 9]
    assert seg.name == seg.path.name and seg.size() == seg.path.stat().st_size


def test_lines_read_back_as_extracted_one_at_a_time_or_in_a_range(seg):
    assert [seg.line(i) for i in range(seg.lines)] == PDF.lines + MD.lines  # not folded
    assert seg.line_range(1, 4) == ["second LINE", "Page Two", ""]
    assert seg.line_range(3, 3) == [] and seg.line_range(4, 3) == []
    assert seg.line_range(0, 6) == PDF.lines + MD.lines


def test_page_runs_give_each_line_its_page_and_ocr(seg):
    assert [seg.page_of(0, i) for i in range(5)] == [(1, False), (1, False), (2, True), (2, True), (3, False)]
    assert seg.page_of(1, 5) == (1, False)  # a document without pages: one run, page 1
    assert seg.runs_of(0) == PDF.runs and seg.runs_of(1) == [(1, 1, False)]
    assert [seg.doc_of(i) for i in range(6)] == [0, 0, 0, 0, 0, 1]
    assert seg.docs_ranges([1]) == BitMap([5]) and seg.docs_ranges([0, 1]) == BitMap(range(6))


def test_tokens_are_folded_and_point_at_their_lines(seg):
    assert list(seg.tokens) == sorted([b"page", b"one", b"second", b"line", b"two", b"three", "é".encode(),
                                       b"only"])
    (line,) = seg.find_tokens(Run(b"line", "equals"))
    assert seg.postings(line) == BitMap([1, 5])  # line ids count across the segment's documents


# --- the vocabulary: each bound of a run -----------------------------------------------------------------------

VOCAB = DocIn(1, 1, "/v.txt", "text", ["alpha alphabet", "betaalpha alp", "alphalpha alphaxalpha",
                                       "alphaé gamma", "ALPHA", "zeta"])


@pytest.mark.parametrize(("text", "bound", "tokens"), [
    ("alpha", "equals", {"alpha"}),
    ("alph", "equals", set()),
    ("alpha", "starts", {"alpha", "alphabet", "alphalpha", "alphaxalpha", "alphaé"}),  # a prefix range, non-ASCII
    ("alp", "starts", {"alp", "alpha", "alphabet", "alphalpha", "alphaxalpha", "alphaé"}),
    ("zeta", "starts", {"zeta"}),  # the last token
    ("alpha", "ends", {"alpha", "betaalpha", "alphalpha", "alphaxalpha"}),
    ("é", "ends", {"alphaé"}),
    ("ma", "ends", {"gamma"}),
    ("alpha", "contains", {"alpha", "alphabet", "betaalpha", "alphalpha", "alphaxalpha", "alphaé"}),
    ("lp", "contains", {"alp", "alpha", "alphabet", "betaalpha", "alphalpha", "alphaxalpha", "alphaé"}),
    ("a", "contains", {"alp", "alpha", "alphabet", "betaalpha", "alphalpha", "alphaxalpha", "alphaé", "gamma",
                       "zeta"}),
    ("ah", "contains", set()),
    ("qq", "starts", set()),
    ("qq", "ends", set()),
])
def test_find_tokens_finds_the_tokens_holding_a_run_as_its_bound_asks(tmp_path, text: str, bound: Bound,
                                                                      tokens: set[str]):
    seg = write_segment(tmp_path, [VOCAB])
    found = seg.find_tokens(Run(text.encode(), bound))
    assert len(found) == len(set(found))  # a token holding the run twice is listed once
    assert {seg.tokens[i].decode() for i in found} == tokens
    lines = BitMap([n for n, line in enumerate(VOCAB.lines) if any(t in tokens for t in line.lower().split())])
    assert seg.union(found) == lines


def test_union_of_no_tokens_is_empty(seg):
    assert seg.union(()) == BitMap()


# --- postings ------------------------------------------------------------------------------------------------


def test_postings_are_plain_arrays_below_roaring_min_lines_and_roaring_bitmaps_from_it(tmp_path):
    n = 150
    lines = []
    for i in range(n):
        words = ["every", "every"]  # twice on each line: a line once in the postings
        words += ["often"] if i % 2 == 0 else []
        words += ["few"] if i in (3, 70, 149) else []
        words += ["under"] if i < ROARING_MIN - 1 else []
        words += ["atmin"] if i >= n - ROARING_MIN else []
        lines.append(" ".join(words))
    seg = write_segment(tmp_path, [DocIn(1, 1, "/a", "text", lines[:100]), DocIn(2, 1, "/b", "text", lines[100:])])
    expected = {"every": range(n), "often": range(0, n, 2), "few": [3, 70, 149],
                "under": range(ROARING_MIN - 1), "atmin": range(n - ROARING_MIN, n)}
    kinds = {}
    for word, ids in expected.items():
        (token,) = seg.find_tokens(Run(word.encode(), "equals"))
        assert seg.postings(token) == BitMap(ids), word
        kinds[word] = int(seg._views["post_kind"][token])  # 1: a serialized roaring bitmap; 0: a plain array
    assert kinds == {"every": 1, "often": 1, "few": 0, "under": 0, "atmin": 1}


# --- damaged files --------------------------------------------------------------------------------------------


def _base(data: bytes) -> int:
    """Where the sections start: after the magic, the header's length and checksum, and the header."""
    head_len = int.from_bytes(data[len(MAGIC):len(MAGIC) + 4], "little")
    return (len(MAGIC) + 8 + head_len + 7) & ~7


def _flip(at: Callable[[bytes], int]) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        out = bytearray(data)
        out[at(data)] ^= 0xFF
        return bytes(out)
    return damage


def _other_format(data: bytes) -> bytes:
    """The header rewritten as a future format would, its checksum right."""
    head_len = int.from_bytes(data[len(MAGIC):len(MAGIC) + 4], "little")
    head = data[len(MAGIC) + 8:len(MAGIC) + 8 + head_len].replace(b'"format":1', b'"format":2')
    return data[:len(MAGIC) + 4] + zlib.crc32(head).to_bytes(4, "little") + head + data[len(MAGIC) + 8 + head_len:]


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated to half": lambda d: d[:len(d) // 2],
    "truncated by a byte": lambda d: d[:-1],
    "truncated inside the header": lambda d: d[:20],
    "empty": lambda d: b"",
    "bytes appended": lambda d: d + bytes(8),
    "magic overwritten": lambda d: b"X" * len(MAGIC) + d[len(MAGIC):],
    "header length overwritten": lambda d: d[:len(MAGIC)] + b"\xff\xff\xff\x7f" + d[len(MAGIC) + 4:],
    "header byte overwritten": _flip(lambda d: len(MAGIC) + 8 + 3),
    "first section byte overwritten": _flip(_base),
    "a middle byte overwritten": _flip(lambda d: (_base(d) + len(d)) // 2),
    "last byte overwritten": _flip(lambda d: len(d) - 1),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_segment_file_raises_corrupt_segment(tmp_path, damage):
    path = write_segment(tmp_path, [PDF, MD, VOCAB]).path
    data = path.read_bytes()
    assert json.loads(data[len(MAGIC) + 8:_base(data)].rstrip(b"\0"))["format"] == 1
    path.write_bytes(damage(data))
    with pytest.raises(CorruptSegment):
        Segment(path)


def test_a_segment_of_another_format_raises_corrupt_segment(tmp_path):
    path = write_segment(tmp_path, [MD]).path
    path.write_bytes(_other_format(path.read_bytes()))
    with pytest.raises(CorruptSegment, match="format 2"):
        Segment(path)


def test_a_missing_segment_file_raises_corrupt_segment(tmp_path):
    with pytest.raises(CorruptSegment):
        Segment(tmp_path / "seg-999999.tx")


def test_a_segment_is_written_under_a_temporary_name_and_renamed(tmp_path):
    seg = write_segment(tmp_path, [MD])
    assert [p.name for p in tmp_path.iterdir()] == [seg.name]


@pytest.mark.parametrize("failure, raised", [
    (OSError(errno.ENOSPC, "No space left on device"), NoSpace),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), NoSpace),
    (OSError(errno.EIO, "Input/output error"), OSError),
    (KeyboardInterrupt(), KeyboardInterrupt),
], ids=["ENOSPC", "EDQUOT", "EIO", "interrupted"])
def test_a_write_that_fails_leaves_the_file_as_it_was_and_no_temporary_file(tmp_path, failure, raised):
    target = tmp_path / "manifest.json"
    target.write_bytes(b"the last good state")

    def half_then_fail(f) -> None:
        f.write(b"half a new st")
        raise failure

    with pytest.raises(raised) as caught:
        write_atomically(target, half_then_fail)
    if raised is NoSpace:  # the folder named, so the person knows which disk to free
        assert caught.value.message.startswith(f"the disk holding the text index at {tmp_path} is full (")
        assert caught.value.__cause__ is failure
    else:
        assert caught.value is failure
    assert target.read_bytes() == b"the last good state"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]
