"""Text, Markdown and source files: lines, words, characters and the encoding, read in chunks.

The encoding is UTF-8 (``utf-8-sig`` with a BOM), UTF-16 when a BOM says so, else latin-1 (which decodes any bytes):
the file is decoded incrementally, and a UTF-8 decoding error anywhere switches to latin-1 for the counts.
"""

from __future__ import annotations

import codecs
from typing import Any

TEXT_EXTENSIONS = frozenset(
    ".txt .md .markdown .rst .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .conf .xml .html .htm .log .tex "
    ".py .js .ts .tsx .jsx .c .h .cc .cpp .hpp .go .rs .java .kt .rb .php .sh .bash .sql .css .scss .lua .r .swift "
    ".srt .vtt".split())
CHUNK = 1 << 20


def looks_binary(path: str, probe: int = 8192) -> bool:
    """Whether ``path`` starts with NUL bytes that no text holds (UTF-16 text, which has them, starts with a BOM):
    a ``.ts`` that is an MPEG transport stream rather than TypeScript, a ``.log`` that is a database."""
    with open(path, "rb") as fh:
        head = fh.read(probe)
    return b"\x00" in head and _sniff(head) != "utf-16"


def _sniff(head: bytes) -> str:
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return "utf-8"


def _count(path: str, encoding: str, chunk: int) -> tuple[int, int, int]:
    """(lines, words, chars) of ``path`` decoded as ``encoding``; UnicodeDecodeError if it is not."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    lines = words = chars = 0
    in_word = False
    last = ""
    with open(path, "rb") as fh:
        while True:
            data = fh.read(chunk)
            final = not data
            text = decoder.decode(data, final=final)
            if text:
                chars += len(text)
                lines += text.count("\n")
                # words split on whitespace across chunk boundaries: count word starts
                pieces = text.split()
                if pieces:
                    words += len(pieces)
                    if in_word and not text[0].isspace():
                        words -= 1  # the first piece continues the previous chunk's last word
                    in_word = not text[-1].isspace()
                else:
                    in_word = False
                last = text[-1]
            if final:
                break
    if chars and last != "\n":
        lines += 1  # a last line without a newline still counts
    return lines, words, chars


def stats(path: str, chunk: int = CHUNK) -> tuple[dict[str, Any], dict[str, Any]]:
    """(flat, details) of a text file: lines, words, chars, encoding."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    encoding = _sniff(head)
    try:
        lines, words, chars = _count(path, encoding, chunk)
    except UnicodeDecodeError:
        encoding = "latin-1"
        lines, words, chars = _count(path, encoding, chunk)
    flat = {"lines": lines, "words": words, "chars": chars, "encoding": encoding}
    return flat, {"kind": "text", **flat}
