"""The documents benchmark's corpus: PDFs of several pages, Markdown and plain text, written from a vocabulary with
known word frequencies so that the benchmark's queries have known, realistic hit rates; generated once and reused.

    corpus = ensure_corpus(Path("/tmp/assay-bench-documents"), docs=10_000, scale=1.0)

Layout under the work dir (a folder per spec, so a smaller run never mixes its files with a bigger one's):

- ``n<docs>-s<scale>/docs/d<NNN>/<NNNNN>.pdf|.md|.txt``: 500 documents a folder (a folder is a collection); four in
  ten are PDFs of 3-16 pages (70 lines of at most ~95 characters a page, written with PyMuPDF's ``insert_text``,
  with metadata and an outline), three in ten Markdown (nested headings, paragraphs), three in ten plain text;
  ``scale`` multiplies the pages and lines. At scale 1, 10,000 documents hold about 620 MB of text.
- ``n<docs>-s<scale>/manifest.json``: written last (the corpus is complete when it exists): counts and sizes.

The words: ``VOCABULARY_SIZE`` pseudo-words (syllables, deterministic) drawn with Zipf frequencies (rank r with
weight 1/r), so a word of rank 5 is on about one line in six and one of rank 2,000 on about one in 2,000. Two
things are planted: the rare word ``RARE_WORD`` (about one line in 250,000) and the phrase ``PHRASE`` (about one line
in 2,000; its three words also occur apart, as ordinary words of the vocabulary, so a phrase query has candidate
lines that are not matches). The first word of each line is capitalised, so matching must fold case.

``QUERIES``: the benchmark's queries (reference 001's syntax), each with the ripgrep pipeline that finds the same
lines (``rg -i -F`` per term; AND as a pipe into the next rg, NOT as ``rg -v``, OR as several ``-e``).

Every file is written beside its final name and renamed, so a file that exists is complete; generation runs on every
core (a process per chunk of documents). Paths hold only digits, ``d`` and the extensions, so no query word ever
matches a path in ripgrep's ``path:line:text`` output.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from examples.mediagen.files import atomic  # noqa: E402  (the one temp-then-rename writer of generated media)

log = logging.getLogger("bench.documents_corpus")

VOCABULARY_SIZE = 8000
PER_FOLDER = 500
LINES_PER_PAGE = 70
LINE_CHARS = 95  # a line is cut before it grows past this (fits an A4 page at 8 pt)
SEED = 13
RARE_WORD = "xylophantic"
RARE_EVERY = 250_000  # lines
PHRASE_RANKS = (210, 330, 470)  # the phrase's words: ordinary words of these ranks, also found apart
PHRASE_EVERY = 2_000  # lines
_ONSETS = ["b", "c", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "v", "z", "br", "gr", "pl", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "m", "s"]


def vocabulary() -> list[str]:
    """VOCABULARY_SIZE distinct pseudo-words of 2-4 syllables, in rank order (deterministic)."""
    rng = random.Random(SEED)
    words: list[str] = []
    seen = {RARE_WORD}
    while len(words) < VOCABULARY_SIZE:
        n = 2 + (rng.random() < 0.5) + (rng.random() < 0.2)
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n))
        # no word inside another's hit list by accident for the query words: keep 4-12 letters, unique
        if 4 <= len(w) <= 12 and w not in seen:
            seen.add(w)
            words.append(w)
    return words


WORDS = vocabulary()
_CUM = list(itertools.accumulate(1.0 / r for r in range(1, VOCABULARY_SIZE + 1)))


def word(rank: int) -> str:
    """The vocabulary's word of ``rank`` (1 = the most frequent)."""
    return WORDS[rank - 1]


PHRASE = " ".join(word(r) for r in PHRASE_RANKS)


@dataclass(frozen=True)
class Query:
    """A benchmark query: its label, the text sent to search_documents, and the rg pipeline finding the same lines
    (a list of stages; each stage's arguments follow ``rg --no-config -i -F``; stage 1 also gets ``-n`` and the
    folder, later stages read the previous one's output)."""

    label: str
    text: str
    stages: tuple[tuple[str, ...], ...]


def _q(label: str, text: str, *stages: tuple[str, ...]) -> Query:
    return Query(label, text, tuple(stages))


QUERIES: list[Query] = [
    _q("single term, rare (planted, ~1 line in 250k)", RARE_WORD, ("-e", RARE_WORD)),
    _q("single term, uncommon (rank 2,000)", word(2000), ("-e", word(2000))),
    _q("single term, common (rank 5, ~1 line in 6)", word(5), ("-e", word(5))),
    _q("AND of two terms (ranks 40, 60)", f"{word(40)} {word(60)}", ("-e", word(40)), ("-e", word(60))),
    _q("OR of two terms (rare | rank 3,000)", f"{RARE_WORD}|{word(3000)}", ("-e", RARE_WORD, "-e", word(3000))),
    _q("NOT (rank 500 -rank 2)", f"{word(500)} -{word(2)}", ("-e", word(500)), ("-v", "-e", word(2))),
    _q("phrase of three words", f'"{PHRASE}"', ("-e", PHRASE)),
    _q("mix: (a|b) c -d", f"({word(700)}|{word(900)}) {word(30)} -{word(4)}",
       ("-e", word(700), "-e", word(900)), ("-e", word(30)), ("-v", "-e", word(4))),
]


# --- generation ----------------------------------------------------------------------------------------------------

@dataclass
class DocCorpus:
    """The generated documents (absolute paths) and what the manifest says of them."""

    root: Path  # n<docs>-s<scale>/
    docs: list[Path] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    generated_s: float = 0.0

    @property
    def folder(self) -> Path:
        return self.root / "docs"

    def by_kind(self, kind: str) -> list[Path]:
        ext = {"pdf": ".pdf", "markdown": ".md", "text": ".txt"}[kind]
        return [p for p in self.docs if p.suffix == ext]


def kind_of(i: int) -> str:
    return "pdf" if i % 10 < 4 else "markdown" if i % 10 < 7 else "text"


def doc_path(folder: Path, i: int) -> Path:
    ext = {"pdf": ".pdf", "markdown": ".md", "text": ".txt"}[kind_of(i)]
    return folder / f"d{i // PER_FOLDER:03d}" / f"{i:05d}{ext}"


def _lines(rng: random.Random, n: int) -> list[str]:
    """``n`` lines of Zipf-drawn words (the first capitalised), each cut before LINE_CHARS (sometimes 10 earlier),
    some with the planted phrase or rare word inserted after their first word."""
    total = _CUM[-1]
    draws = rng.random
    out = []
    for _ in range(n):
        ws: list[str] = []
        length = -1
        while True:
            w = WORDS[bisect.bisect_left(_CUM, draws() * total)] if len(ws) else \
                WORDS[bisect.bisect_left(_CUM, draws() * total)].capitalize()
            if length + 1 + len(w) > LINE_CHARS - 10 * (draws() < 0.15):
                break
            ws.append(w)
            length += 1 + len(w)
        r = draws()
        if r < 1 / PHRASE_EVERY:
            ws.insert(1 + int(draws() * (len(ws) - 1)), PHRASE)
        elif r < 1 / PHRASE_EVERY + 1 / RARE_EVERY:
            ws.insert(1 + int(draws() * (len(ws) - 1)), RARE_WORD)
        out.append(" ".join(ws))
    return out


def _rng(i: int) -> random.Random:
    return random.Random(SEED * 1_000_003 + i)


def _pdf(path: Path, i: int, scale: float) -> int:
    import pymupdf

    rng = _rng(i)
    pages = max(1, round((3 + rng.randrange(14)) * scale))
    chars = 0
    doc = pymupdf.open()
    toc = []
    for p in range(pages):
        lines = _lines(rng, LINES_PER_PAGE)
        chars += sum(len(s) + 1 for s in lines)
        page = doc.new_page()
        page.insert_text((36, 40), "\n".join(lines), fontsize=8)
        toc.append([1 if p % 4 == 0 else 2, f"{lines[0][:40]}", p + 1])
    doc.set_metadata({"title": f"Report {i}", "author": f"Author {i % 37}", "subject": "documents benchmark",
                      "keywords": "assay, bench"})
    doc.set_toc(toc)
    atomic(path, lambda tmp: doc.save(tmp, garbage=0, deflate=True))
    doc.close()
    return chars


def _markdown(path: Path, i: int, scale: float) -> int:
    rng = _rng(i)
    n = max(10, round((400 + rng.randrange(600)) * scale))
    lines = _lines(rng, n)
    out = [f"# {lines[0][:50]}", ""]
    for k, line in enumerate(lines[1:], 1):
        if k % 40 == 0:
            out += ["", f"{'#' * (2 + (k // 40) % 3)} {line[:40]}", ""]
        elif k % 8 == 0:
            out += [line, ""]
        else:
            out.append(line)
    text = "\n".join(out) + "\n"
    atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return len(text)


def _text(path: Path, i: int, scale: float) -> int:
    rng = _rng(i)
    n = max(10, round((400 + rng.randrange(600)) * scale))
    lines = _lines(rng, n)
    text = "\n".join(line if k % 10 else line + "\n" for k, line in enumerate(lines, 1)) + "\n"
    atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return len(text)


def _make_chunk(job: tuple[str, list[int], float]) -> int:
    """Write the documents ``indexes`` under ``folder``; returns the characters of text written."""
    folder, indexes, scale = job
    chars = 0
    for i in indexes:
        path = doc_path(Path(folder), i)
        if path.exists():
            continue
        chars += {"pdf": _pdf, "markdown": _markdown, "text": _text}[kind_of(i)](path, i, scale)
    return chars


def corpus_dir(work: Path, docs: int, scale: float) -> Path:
    return work / f"n{docs}-s{scale:g}"


def ensure_corpus(work: Path, *, docs: int, scale: float = 1.0, workers: int | None = None) -> DocCorpus:
    """The corpus under ``work``: reused when its manifest exists, else generated (the missing files only) on
    every core, then the manifest written."""
    root = corpus_dir(work, docs, scale)
    folder = root / "docs"
    corpus = DocCorpus(root=root, docs=[doc_path(folder, i) for i in range(docs)])
    manifest = root / "manifest.json"
    if manifest.exists():
        corpus.manifest = json.loads(manifest.read_text())
        return corpus
    log.info("generating %d documents (scale %g) under %s (once; later runs reuse them)", docs, scale, root)
    started = time.perf_counter()
    import multiprocessing

    chunk = 25
    jobs = [(str(folder), list(range(a, min(docs, a + chunk))), scale) for a in range(0, docs, chunk)]
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        for n, _ in enumerate(pool.map(_make_chunk, jobs), 1):
            if n % 40 == 0 or n == len(jobs):
                log.info("generated %d/%d documents", min(docs, n * chunk), docs)
    corpus.generated_s = time.perf_counter() - started
    kinds = {k: len(corpus.by_kind(k)) for k in ("pdf", "markdown", "text")}
    corpus.manifest = {"docs": docs, "scale": scale, "kinds": kinds,
                       "bytes": sum(p.stat().st_size for p in corpus.docs),
                       "generated_seconds": round(corpus.generated_s, 1), "vocabulary": VOCABULARY_SIZE,
                       "rare_word": RARE_WORD, "phrase": PHRASE}
    manifest.write_text(json.dumps(corpus.manifest, indent=2) + "\n")
    return corpus


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="bench/documents_corpus.py",
                                description="generate the documents benchmark's corpus")
    p.add_argument("--work", default="/tmp/assay-bench-documents")
    p.add_argument("--docs", type=int, default=10_000)
    p.add_argument("--scale", type=float, default=1.0)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    c = ensure_corpus(Path(args.work), docs=args.docs, scale=args.scale)
    print(f"{c.root}: {c.manifest['docs']} documents {c.manifest['kinds']}, {c.manifest['bytes'] / 1e6:.0f} MB on "
          f"disk; generated in {c.generated_s:.1f} s")
