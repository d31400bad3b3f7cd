"""The soak's corpus: a small generated tree under one root, written fresh for every run (the soak moves, adds and
deletes files in it, so a reused tree would not be the same tree).

    corpus = make_corpus(root, clients=20)

Layout under ``root``:

- ``docs/topics/tNN.md``: documents about known topics (bench/semantic_corpus.py's sentences, two chunks each), which
  the semantic search and the text search both find; ``docs/notes/nNN.txt``: plain text of the same kind;
  ``docs/pdf/pNN.pdf``: PDFs of a few pages (PyMuPDF), a topic's text on each page.
- ``images/iNN.jpg|png``: small pictures (Pillow, with EXIF on the JPEGs).
- ``clients/cNN/work/``: the client's own plan's source (a note, a text, a picture; a PDF for every fourth client);
  ``clients/cNN/moves/a/`` holds its ``MOVERS`` files at the start, ``moves/b/`` none: the client moves them back
  and forth.
- ``drop/``: empty; the watched folder the soak's dropper adds files to and deletes them from.

Every file is written beside its name and renamed into place, so the server never sees half a file (the soak's
clients rewrite their pictures with ``picture`` while the server runs).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw

from bench.semantic_corpus import TOPIC_NAMES, TOPICS, document_chunks, queries, topic_of

TOPIC_DOCS = 24  # documents in docs/topics (three per topic)
NOTES = 24
PDFS = 4
PICTURES = 12
MOVERS = 2  # files each client moves back and forth
SEED = 25


@dataclass(frozen=True)
class ClientFiles:
    """One client's files: its plan's source folder and what is in it, and its two folders to move files between."""

    index: int
    work: Path
    files: list[Path]
    moves: tuple[Path, Path]  # a, b
    movers: list[str]  # names of the files that start in a

    @property
    def name(self) -> str:
        return f"c{self.index:02d}"


@dataclass(frozen=True)
class Corpus:
    """The generated tree: the root, the folders to navigate, files to read, questions and words to search for."""

    root: Path
    docs: Path
    drop: Path
    clients: list[ClientFiles]
    folders: list[str]
    documents: list[str]  # texts and PDFs (read_document, inspect, sets)
    pictures: list[str]
    questions: list[str]  # semantic search queries (each answered by one topic's documents)
    words: list[str] = field(default_factory=list)  # text search queries (a word or two of a topic, boolean syntax)


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` into a temp name beside ``path`` (same extension), then rename it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _text(path: Path, content: str) -> None:
    _replace(path, lambda tmp: tmp.write_text(content))


def _document(doc: int) -> str:
    return f"# Document {doc}: {topic_of(doc)}\n\n" + "\n\n".join(document_chunks(doc)[:2]) + "\n"


def _pdf(path: Path, doc: int, pages: int = 3) -> None:
    """A PDF of ``pages`` A4 pages, each a heading and a chunk of the document's text, with an outline and a title."""
    def write(tmp: Path) -> None:
        chunks = document_chunks(doc)
        pdf = pymupdf.open()
        for p in range(pages):
            page = pdf.new_page(width=595, height=842)
            page.insert_text((56, 90), f"{topic_of(doc).title()}, page {p + 1}", fontsize=16)
            page.insert_textbox(pymupdf.Rect(56, 120, 540, 780), chunks[p % len(chunks)], fontsize=11)
        pdf.set_toc([[1, f"Page {p + 1}", p + 1] for p in range(pages)])
        pdf.set_metadata({"title": f"Soak document {doc}", "author": "bench/soak_corpus.py"})
        pdf.save(tmp)
        pdf.close()

    _replace(path, write)


def picture(path: Path, seed: int, size: tuple[int, int] = (320, 240)) -> None:
    """A JPEG or PNG (by the extension) of coloured rectangles and ellipses drawn from ``seed``."""
    rng = random.Random(seed)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
        box = (x0, y0, x0 + rng.randrange(10, 120), y0 + rng.randrange(10, 90))
        fill = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    _replace(path, lambda tmp: image.save(tmp, "JPEG" if path.suffix == ".jpg" else "PNG", quality=85))


def search_words() -> list[str]:
    """Boolean text queries: a topic word, two words of one topic (AND), either of two (OR)."""
    rng = random.Random(SEED)
    out = []
    for i, topic in enumerate(TOPIC_NAMES):
        words = [w for w in TOPICS[topic] if " " not in w and "-" not in w]
        a, b = rng.sample(words, 2)
        out.append((a, f"{a} {b}", f"{a}|{b}")[i % 3])
    return out


def make_corpus(root: Path, *, clients: int) -> Corpus:
    """Write the tree under ``root`` (which must not exist yet) for ``clients`` clients."""
    root.mkdir(parents=True)
    docs = root / "docs"
    documents: list[str] = []
    for d in range(TOPIC_DOCS):
        path = docs / "topics" / f"t{d:02d}.md"
        _text(path, _document(d))
        documents.append(str(path))
    for n in range(NOTES):
        path = docs / "notes" / f"n{n:02d}.txt"
        _text(path, _document(TOPIC_DOCS + n).replace("# ", "", 1))
        documents.append(str(path))
    for p in range(PDFS):
        path = docs / "pdf" / f"p{p:02d}.pdf"
        _pdf(path, TOPIC_DOCS + NOTES + p)
        documents.append(str(path))
    pictures = []
    for i in range(PICTURES):
        path = root / "images" / f"i{i:02d}.{'jpg' if i % 2 == 0 else 'png'}"
        picture(path, SEED + i)
        pictures.append(str(path))
    mine = []
    for c in range(clients):
        base = root / "clients" / f"c{c:02d}"
        work = base / "work"
        files = [work / "note.md", work / "list.txt", work / "pic.jpg"]
        _text(files[0], _document(100 + c))
        _text(files[1], "".join(f"item {i}: {TOPICS[TOPIC_NAMES[c % len(TOPIC_NAMES)]][i]}\n" for i in range(10)))
        picture(files[2], 100 + c)
        if c % 4 == 0:
            files.append(work / "paper.pdf")
            _pdf(files[-1], 200 + c, pages=2)
        a, b = base / "moves" / "a", base / "moves" / "b"
        b.mkdir(parents=True)
        movers = [f"m{k}.txt" for k in range(MOVERS)]
        for name in movers:
            _text(a / name, f"client {c} file {name}: moved back and forth\n")
        mine.append(ClientFiles(c, work, files, (a, b), movers))
    drop = root / "drop"
    drop.mkdir()
    folders = [str(root), str(docs), str(docs / "topics"), str(docs / "notes"), str(docs / "pdf"),
               str(root / "images"), str(root / "clients")] + [str(c.work) for c in mine[:8]]
    return Corpus(root=root, docs=docs, drop=drop, clients=mine, folders=folders, documents=documents,
                  pictures=pictures, questions=[q.text for q in queries(24)], words=search_words())
