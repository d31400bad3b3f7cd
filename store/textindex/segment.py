"""One immutable segment of the text engine: some documents' lines, their tokens' postings and their text.

A segment file holds, for the documents written into it (each a version of one entry's extracted text):

- the documents: entry id, version (the store's change number it was read at), path, format, and where their lines
  are (a run of consecutive line ids, local to the segment) and on which page each line is (runs of lines);
- the vocabulary: every token (``store.textindex.tokens``) in byte order, as one ``\\n``-separated blob, so a
  substring, prefix or suffix of tokens is found by ``find`` / bisection at C speed;
- the postings: for each token the set of lines holding it, as a roaring bitmap (tokens on many lines) or a plain
  array of line ids (tokens on few: cheaper to write, and small);
- the text of every line as extracted (UTF-8), with each line's offset: the engine shows matches and their context
  and checks the lines a needle with separators may be on without reading the store.

Layout: ``MAGIC``, the header's length and its CRC-32 (4 bytes each, little endian), the header (JSON: counts,
documents, each section's offset, length and dtype, and the CRC-32 of everything after the header, checked at open),
then the sections, 8-byte aligned. Readers map the file and view the arrays in
place. Files are written under a temporary name and renamed (:func:`write_atomically`, which the manifest uses too),
so a segment that exists is complete; a write that fails removes its temporary file, and a full disk is NoSpace
(NO_SPACE) naming the index's folder.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import errno
import json
import mmap
import os
import zlib
from dataclasses import dataclass, field
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import IO, Any, Iterable, Sequence, TypeVar

import numpy as np
from pyroaring import BitMap

from store.errors import NoSpace
from store.fold import fold
from store.textindex.tokens import LINE_MARK, Run, Vocabulary, token_lines

MAGIC = b"ASSAYTX1"
FORMAT_VERSION = 1
_FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
ROARING_MIN = 64  # a token on at least this many lines gets a roaring bitmap; fewer: a plain array
MEMO_ENTRIES = 1024  # answers a segment remembers (``Segment.remember``); past this its memo starts over

T = TypeVar("T")


class CorruptSegment(Exception):
    """A segment file that cannot be read (truncated, overwritten, another format): rebuilt from the store."""


@dataclass
class DocIn:
    """A document version to index: its lines in order (as extracted: a list, or ``text``, the lines joined by
    ``\n``, which spares splitting and joining them again) and its page runs: (first line number, page, ocr) with
    line numbers from 1."""

    entry_id: int
    version: int
    path: str
    format: str
    lines: list[str] = field(default_factory=list)
    runs: list[tuple[int, int, bool]] = field(default_factory=lambda: [(1, 1, False)])
    text: str | None = None

    def joined(self) -> str:
        return self.text if self.text is not None else "\n".join(self.lines)


@dataclass(frozen=True)
class DocMeta:
    entry_id: int
    version: int
    path: str
    format: str
    first: int  # local line id of its line 1
    count: int  # lines


class SegmentBuilder:
    """Collects documents and writes them as one segment file. Memory: the text and two 4-byte ids per token."""

    def __init__(self) -> None:
        self.vocab = Vocabulary()
        self.ids: list[np.ndarray] = []
        self.token_line: list[np.ndarray] = []
        self.text: list[bytes] = []
        self.line_off: list[np.ndarray] = []
        self.docs: list[DocMeta] = []
        self.runs: list[tuple[int, int, int]] = []  # (local line id, page, ocr)
        self.run_start: list[int] = [0]
        self.lines = 0
        self.text_bytes = 0

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, doc: DocIn) -> None:
        text = doc.joined()
        raw = (text + "\n").encode("utf-8", "surrogatepass")
        first = self.lines
        ids, lines = token_lines(fold(text).encode("utf-8", "surrogatepass"), self.vocab, first)
        self.ids.append(ids)
        self.token_line.append(lines)
        breaks = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)
        count = len(breaks)
        starts = np.empty(count, dtype=np.int64)
        starts[0] = 0
        starts[1:] = breaks[:-1] + 1
        self.line_off.append((starts + self.text_bytes).astype(np.uint64))
        self.text.append(raw)
        self.text_bytes += len(raw)
        self.docs.append(DocMeta(doc.entry_id, doc.version, doc.path, doc.format, first, count))
        for line, page, ocr in doc.runs:
            self.runs.append((first + line - 1, page, int(ocr)))
        self.run_start.append(len(self.runs))
        self.lines += count

    def write(self, path: Path) -> None:
        """Write the segment to ``path`` (atomically: a temporary file renamed, synced first)."""
        sections: dict[str, bytes | np.ndarray] = {}
        tokens = [t for t in self.vocab if t != LINE_MARK]
        order = sorted(range(len(tokens)), key=tokens.__getitem__)
        # ids in the vocabulary count the line mark (id 0); rank maps an id to its place in byte order
        rank = np.zeros(len(self.vocab), dtype=np.uint32)
        rank[np.array([self.vocab[tokens[i]] for i in order], dtype=np.int64)] = np.arange(len(order),
                                                                                            dtype=np.uint32)
        ids = rank[np.concatenate(self.ids)] if self.ids else np.zeros(0, np.uint32)
        lines = np.concatenate(self.token_line) if self.token_line else np.zeros(0, np.uint32)
        t_sorted, l_sorted = _group(ids, lines)
        sections["vocab"] = b"\n" + b"".join(tokens[i] + b"\n" for i in order)
        sections.update(_postings(t_sorted, l_sorted, len(order)))
        line_off = np.concatenate(self.line_off + [np.array([self.text_bytes], np.uint64)])
        sections["line_off"] = line_off
        sections["text"] = b"".join(self.text)
        sections["doc_first"] = np.array([d.first for d in self.docs], dtype=np.uint32)
        sections["doc_count"] = np.array([d.count for d in self.docs], dtype=np.uint32)
        sections["run_start"] = np.array(self.run_start, dtype=np.uint32)
        runs = np.array(self.runs, dtype=np.int64).reshape(-1, 3)
        sections["run_line"] = runs[:, 0].astype(np.uint32)
        sections["run_page"] = runs[:, 1].astype(np.uint32)
        sections["run_ocr"] = runs[:, 2].astype(np.uint8)
        header: dict[str, Any] = {
            "format": FORMAT_VERSION, "lines": self.lines, "text_bytes": self.text_bytes, "tokens": len(order),
            "docs": [[d.entry_id, d.version, d.path, d.format] for d in self.docs],
        }
        _write_file(path, header, sections)


def _group(ids: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(token, line) pairs sorted by token then line, duplicates removed: one 64-bit key per pair, sorted in place
    (NumPy's vectorised sort: several times faster than stable argsorts and the gathers they need)."""
    if len(ids) == 0:
        return ids, lines
    keys = ids.astype(np.uint64)
    keys <<= np.uint64(32)
    keys |= lines
    keys.sort()
    keep = np.empty(len(keys), dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    keys = keys[keep]
    return (keys >> np.uint64(32)).astype(np.uint32), (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _postings(tokens: np.ndarray, lines: np.ndarray, vocab: int) -> dict[str, Any]:
    """Each token's lines: a plain uint32 array inside ``raw`` for tokens on few lines (no per-token work), a
    serialized roaring bitmap inside ``roaring`` for the others."""
    counts = np.bincount(tokens, minlength=vocab).astype(np.int64)
    big = counts >= ROARING_MIN
    raw_mask = np.repeat(~big, counts)
    raw = lines[raw_mask]
    raw_off = np.zeros(vocab, dtype=np.int64)
    raw_off[~big] = np.concatenate(([0], np.cumsum(counts[~big])[:-1])) if (~big).any() else []
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    blobs: list[bytes] = []
    off = np.zeros(vocab, dtype=np.uint64)
    length = counts.astype(np.uint64)
    pos = 0
    for k in np.flatnonzero(big).tolist():
        s = int(starts[k])
        bm = BitMap(array.array("I", lines[s:s + int(counts[k])].tobytes()))
        bm.run_optimize()
        data = bm.serialize()
        blobs.append(data)
        off[k], length[k] = pos, len(data)
        pos += len(data)
    off[~big] = raw_off[~big].astype(np.uint64)
    return {"post_kind": big.astype(np.uint8), "post_off": off, "post_len": length,
            "post_raw": raw.astype(np.uint32), "post_roaring": b"".join(blobs)}


def _write_file(path: Path, header: dict[str, Any], sections: dict[str, Any]) -> None:
    layout: dict[str, list[Any]] = {}
    pos = 0
    parts: list[tuple[int, bytes | memoryview]] = []
    for name, value in sections.items():
        data = value.tobytes() if isinstance(value, np.ndarray) else value
        dtype = value.dtype.str if isinstance(value, np.ndarray) else "bytes"
        pos = (pos + 7) & ~7
        layout[name] = [pos, len(data), dtype]
        parts.append((pos, data))
        pos += len(data)
    crc = 0
    end = 0
    for offset, data in parts:  # the sections as they lie in the file, padding included
        crc = zlib.crc32(bytes(offset - end), crc)
        crc = zlib.crc32(data, crc)
        end = offset + len(data)
    header = {**header, "sections": layout, "size": end, "crc32": crc}
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    base = (len(MAGIC) + 8 + len(head) + 7) & ~7

    def write(f: IO[bytes]) -> None:
        f.write(MAGIC + len(head).to_bytes(4, "little") + zlib.crc32(head).to_bytes(4, "little") + head)
        for offset, data in parts:
            f.seek(base + offset)
            f.write(data)

    write_atomically(path, write)


def write_atomically(path: Path, write: Callable[[IO[bytes]], object], *, sync: bool = True) -> None:
    """``path`` written whole or not at all: ``write`` fills ``<path>.tmp`` (flushed to disk with ``sync``), which is
    then renamed onto ``path``. When anything fails the temporary file is removed (a full disk must not stay full of
    half-written segments), and a full disk (ENOSPC, EDQUOT) is NoSpace naming the folder, so the caller says
    NO_SPACE rather than an OSError; what was there before stays as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in _FULL_DISK_ERRNOS:
            said = (exc.strerror or str(exc)).lower()
            raise NoSpace(f"the disk holding the text index at {path.parent} is full ({said}): the index keeps its "
                          "last complete state and catches up from the store once space is freed") from exc
        raise


def _random_access(mapped: mmap.mmap) -> None:
    """Searches read a few lines and postings here and there: without this, each page fault maps its neighbours
    too (read-ahead), and a search touching a few thousand lines leaves hundreds of MB resident."""
    try:
        mapped.madvise(mmap.MADV_RANDOM)
    except (AttributeError, OSError, ValueError):  # no madvise on this platform
        pass


def _file_crc(path: Path, start: int) -> int:
    """The CRC-32 of ``path`` from ``start`` on, read in blocks (not through the map: checking must not leave every
    page of the file counted in this process's resident memory)."""
    crc = 0
    with open(path, "rb") as f:
        f.seek(start)
        while block := f.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


class _Tokens(Sequence[bytes]):
    """The vocabulary as a sequence of token bytes, for bisection: token k lies between newlines k and k + 1."""

    def __init__(self, blob: bytes, newlines: np.ndarray) -> None:
        self.blob, self.newlines = blob, newlines

    def __len__(self) -> int:
        return len(self.newlines) - 1

    def __getitem__(self, i: Any) -> Any:
        return self.blob[int(self.newlines[i]) + 1:int(self.newlines[i + 1])]


class Segment:
    """A segment file, mapped read-only."""

    def __init__(self, path: Path, *, verify: bool = True) -> None:
        """Map ``path``; ``verify`` False skips the checksums (a process reading a file another one has checked
        and named to it: search_multiple's workers)."""
        self.path = path
        self.name = path.name
        self._memo: dict[Hashable, Any] = {}
        try:
            with open(path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            _random_access(self._map)
            if self._map[:len(MAGIC)] != MAGIC:
                raise CorruptSegment(f"{path}: not a text index segment")
            head_len = int.from_bytes(self._map[len(MAGIC):len(MAGIC) + 4], "little")
            head = self._map[len(MAGIC) + 8:len(MAGIC) + 8 + head_len]
            if zlib.crc32(head) != int.from_bytes(self._map[len(MAGIC) + 4:len(MAGIC) + 8], "little"):
                raise CorruptSegment(f"{path}: its header does not match its checksum")
            header = json.loads(head)
            base = (len(MAGIC) + 8 + head_len + 7) & ~7
            if header.get("format") != FORMAT_VERSION:
                raise CorruptSegment(f"{path}: format {header.get('format')}, expected {FORMAT_VERSION}")
            # every byte after the header is checked once, at open (~3 GB/s): a damaged file is never read
            if len(self._map) != base + header["size"] or (verify and _file_crc(path, base) != header["crc32"]):
                raise CorruptSegment(f"{path}: its contents do not match their checksum")
            self._views: dict[str, Any] = {}
            for name, (offset, length, dtype) in header["sections"].items():
                start = base + offset
                if start + length > len(self._map):
                    raise CorruptSegment(f"{path}: truncated ({name})")
                view = memoryview(self._map)[start:start + length]
                self._views[name] = view if dtype == "bytes" else np.frombuffer(view, dtype=np.dtype(dtype))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptSegment(f"{path}: {exc}") from exc
        self.lines: int = header["lines"]
        self.text_bytes: int = header["text_bytes"]
        v = self._views
        self.doc_first: np.ndarray = v["doc_first"]
        self.doc_count: np.ndarray = v["doc_count"]
        self.docs = [DocMeta(e, ver, p, fmt, int(a), int(c))
                     for (e, ver, p, fmt), a, c in zip(header["docs"], self.doc_first, self.doc_count)]
        self.entry_ids = np.array([d.entry_id for d in self.docs], dtype=np.int64)
        self._vocab_blob = v["vocab"]
        self._vocab_bytes = bytes(self._vocab_blob)  # find() needs bytes; the vocabulary is small next to the text
        self._newlines = np.flatnonzero(np.frombuffer(self._vocab_bytes, dtype=np.uint8) == 10)
        self.tokens = _Tokens(self._vocab_bytes, self._newlines)
        self._line_off: np.ndarray = v["line_off"]
        self._text = v["text"]
        if len(self._line_off) != self.lines + 1 or len(self.docs) + 1 != len(v["run_start"]):
            raise CorruptSegment(f"{path}: inconsistent sections")

    def release(self) -> None:
        """Let go of the pages of the file this process has read through the map (they stay in the page cache):
        after reading much of it (a merge, a line check over many lines), so they do not stay counted in this
        process's resident memory."""
        try:
            self._map.madvise(mmap.MADV_DONTNEED)
        except (AttributeError, OSError, ValueError):  # no madvise here, or the map is closed
            pass

    def close(self) -> None:
        self._views.clear()
        try:
            self._map.close()
        except BufferError:  # a view is still held by a search in flight: the map goes with the last reference
            pass

    def remember(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, kept on this segment for the next call with ``key`` (at most MEMO_ENTRIES answers, then the
        memo starts over). The searches' caches live on the segment, not in a module-level cache keyed by it: such a
        cache (functools.lru_cache) kept every segment a merge had replaced alive, its file mapped and open, deleted
        or not, until the cache let go (a soak of the server counted hundreds of such descriptors)."""
        try:
            return self._memo[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        value = make()
        if len(self._memo) >= MEMO_ENTRIES:
            self._memo.clear()
        self._memo[key] = value
        return value

    # --- the vocabulary -------------------------------------------------------------------------------------

    def find_tokens(self, run: Run) -> tuple[int, ...]:
        """The indexes of the tokens that hold ``run`` as it asks (equal, start, end, contain)."""
        return self.remember(("tokens", run), lambda: self._find_tokens(run))

    def _find_tokens(self, run: Run) -> tuple[int, ...]:
        t = run.text
        if run.bound == "equals":
            i = bisect.bisect_left(self.tokens, t)
            return (i,) if i < len(self.tokens) and self.tokens[i] == t else ()
        if run.bound == "starts":
            lo = bisect.bisect_left(self.tokens, t)
            hi = bisect.bisect_left(self.tokens, t + b"\xff", lo)  # no UTF-8 token holds 0xff
            return tuple(range(lo, hi))
        pattern = t + b"\n" if run.bound == "ends" else t
        blob = self._vocab_bytes
        found: list[int] = []
        pos = blob.find(pattern, 1)
        while pos != -1:
            found.append(pos)
            end = blob.find(b"\n", pos + len(t))  # the rest of this token is not looked at again
            pos = blob.find(pattern, end + 1)
        if not found:
            return ()
        idx = np.searchsorted(self._newlines, np.array(found, dtype=np.int64), side="right") - 1
        return tuple(idx.tolist())

    def postings(self, token: int) -> BitMap:
        kind = self._views["post_kind"][token]
        off, length = int(self._views["post_off"][token]), int(self._views["post_len"][token])
        if kind:
            return BitMap.deserialize(bytes(self._views["post_roaring"][off:off + length]))
        out = array.array("I")
        out.frombytes(self._views["post_raw"][off:off + length].tobytes())
        return BitMap(out)

    def union(self, tokens: Iterable[int]) -> BitMap:
        maps = [self.postings(t) for t in tokens]
        if not maps:
            return BitMap()
        return maps[0] if len(maps) == 1 else BitMap.union(*maps)

    # --- lines ----------------------------------------------------------------------------------------------

    def line(self, i: int) -> str:
        a, b = int(self._line_off[i]), int(self._line_off[i + 1]) - 1
        return bytes(self._text[a:b]).decode("utf-8", "surrogatepass")

    def texts(self, ids: np.ndarray) -> list[str]:
        """The text of the lines ``ids`` (local ids, any order), in that order."""
        starts = self._line_off[ids].tolist()
        ends = (self._line_off[ids + 1] - 1).tolist()
        text = self._text
        return [str(text[a:b], "utf-8", "surrogatepass") for a, b in zip(starts, ends)]

    def doc_text(self, doc: int) -> str:
        """Document ``doc``'s lines joined by ``\n`` (as DocIn.text takes them)."""
        first = int(self.doc_first[doc])
        start = int(self._line_off[first])
        end = int(self._line_off[first + int(self.doc_count[doc])]) - 1
        return str(self._text[start:end], "utf-8", "surrogatepass")

    def line_range(self, a: int, b: int) -> list[str]:
        """Lines a..b-1 (local ids) as text."""
        if b <= a:
            return []
        start, end = int(self._line_off[a]), int(self._line_off[b]) - 1
        return bytes(self._text[start:end]).decode("utf-8", "surrogatepass").split("\n")

    def doc_of(self, line: int) -> int:
        """The index of the document holding local line ``line``."""
        return int(np.searchsorted(self.doc_first, line, side="right")) - 1

    def page_of(self, doc: int, line: int) -> tuple[int, bool]:
        """(page, ocr) of a local line of document ``doc``."""
        a, b = int(self._views["run_start"][doc]), int(self._views["run_start"][doc + 1])
        run_line = self._views["run_line"][a:b]
        k = a + max(0, int(np.searchsorted(run_line, line, side="right")) - 1)
        return int(self._views["run_page"][k]), bool(self._views["run_ocr"][k])

    def runs_of(self, doc: int) -> list[tuple[int, int, bool]]:
        """The page runs of document ``doc`` as DocIn takes them: (line number from 1, page, ocr)."""
        a, b = int(self._views["run_start"][doc]), int(self._views["run_start"][doc + 1])
        first = int(self.doc_first[doc])
        return [(int(self._views["run_line"][k]) - first + 1, int(self._views["run_page"][k]),
                 bool(self._views["run_ocr"][k])) for k in range(a, b)]

    def docs_ranges(self, docs: Sequence[int]) -> BitMap:
        """The lines of these documents."""
        out = BitMap()
        for d in docs:
            first = int(self.doc_first[d])
            out.add_range(first, first + int(self.doc_count[d]))
        return out

    def size(self) -> int:
        return len(self._map)

