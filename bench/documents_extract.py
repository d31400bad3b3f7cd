"""The documents benchmark's extraction figures: the one-core PyMuPDF / read loop, the extract_text plan run over a
fresh store (the corpus indexed first), extraction alone through the pool, what the store holds afterwards (counts,
index size), the text engine's own floor (indexing the stored text alone), and the stored text written out for
ripgrep.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from bench.documents_corpus import DocCorpus

EXTENSIONS = (".pdf", ".md", ".txt")


def baseline_extract(corpus: DocCorpus) -> dict:
    """The plain loop, one core: PyMuPDF ``get_text`` of every page of every PDF, a read + UTF-8 decode of every
    other file. Returns seconds and the characters of text it got."""
    import pymupdf

    chars = 0
    started = time.perf_counter()
    for p in corpus.docs:
        if p.suffix == ".pdf":
            with pymupdf.open(p) as doc:
                for page in doc:
                    chars += len(page.get_text())
        else:
            chars += len(p.read_bytes().decode("utf-8"))
    return {"seconds": time.perf_counter() - started, "chars": chars}


# --- ours: the plan run ----------------------------------------------------------------------------------------------

def extract_plan(name: str, folder: Path, ocr: bool = False):
    from dsl.model import Plan

    exts = ", ".join(EXTENSIONS)
    return Plan.from_object({"name": name, "sources": [
        {"name": "corpus", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [{"name": name, "when": f"extension in [{exts}]",
                   "outcomes": [{"type": "extract_text", "ocr": ocr}]}]})


class Stores:
    """Fresh SQLite stores under ``scratch``, each with ``folders`` indexed (not timed)."""

    def __init__(self, scratch: Path, roots: list[Path]) -> None:
        self.scratch, self.roots, self.made = scratch, roots, 0

    def fresh(self, label: str, folders: list[Path], *, use_prefect: bool):
        from flows.index.flow import run_index_job
        from flows.plans.service import PlanService
        from flows.core.roots import Roots
        from store import jobs as store_jobs
        from store.engine import make_engine

        self.made += 1
        data = self.scratch / f"{self.made:02d}-{label}"
        data.mkdir(parents=True)
        engine = make_engine(f"sqlite:///{data / 'assay.db'}")
        for folder in folders:
            run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(folder)), root=str(folder))
        service = PlanService(engine, Roots.of([str(r) for r in self.roots]), use_prefect=use_prefect)
        return engine, service, data


def stored_counts(engine) -> dict:
    """What the store holds after a run: documents by status, their lines, characters and segments."""
    from sqlalchemy import text

    with engine.connect() as conn:
        by_status = dict(conn.execute(text("SELECT status, count(*) FROM documents GROUP BY status")).all())
        lines, chars = conn.execute(text("SELECT coalesce(sum(lines), 0), coalesce(sum(chars), 0) FROM documents "
                                         "WHERE status = 'ok'")).one()
        segments = conn.execute(text("SELECT count(*) FROM document_segments")).scalar_one()
    return {"ok": by_status.get("ok", 0), "error": by_status.get("error", 0), "lines": int(lines),
            "chars": int(chars), "segments": int(segments)}


def index_size(db: Path, index_dir: Path) -> dict:
    """Bytes of the text engine's files (postings, vocabulary and its copy of the lines), of document_segments with
    its indexes (the store's text, read with SQLite's dbstat) and of the whole database file."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        seg_names = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'document_segments'")}
        seg = sum(size for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
                  if name in seg_names)
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    finally:
        conn.close()
    live = [index_dir / item["name"] for item in json.loads((index_dir / "manifest.json").read_text())["segments"]]
    engine_bytes = sum(p.stat().st_size for p in live) + (index_dir / "manifest.json").stat().st_size
    on_disk = sum(p.stat().st_size for p in index_dir.iterdir() if p.is_file())
    text_copy = sum(_section(p, "text") for p in live)
    return {"engine": engine_bytes, "engine_text": text_copy, "engine_disk": on_disk, "segments": seg,
            "file": page_size * pages}


def _section(path: Path, name: str) -> int:
    """The length of one section of a segment file (its header says)."""
    from store.textindex.segment import Segment

    seg = Segment(path)
    try:
        return len(seg._views[name])
    finally:
        seg.close()


def pool_extract(corpus: DocCorpus) -> dict:
    """Extraction alone: every document through the extraction pool (flows.documents.worker.run_extractions, the
    plan's own options with OCR off), results counted and dropped: no store. Returns seconds, characters, errors."""
    from flows.documents.settings import current
    from flows.documents.worker import run_extractions

    chars = errors = 0
    started = time.perf_counter()
    for _, extracted in run_extractions(((i, str(p)) for i, p in enumerate(corpus.docs)),
                                        current().extract_options()):
        chars += sum(len(page.text) for page in extracted.pages)
        errors += not extracted.ok
    return {"seconds": time.perf_counter() - started, "chars": chars, "errors": errors}


def engine_floor(engine, target: Path) -> dict:
    """The text engine's own floor: the whole store indexed from scratch into an empty directory (reading the text
    back from the store, tokenising, writing segments), one thread, nothing else running."""
    from store.textindex import TextIndex

    index = TextIndex(target, engine)
    started = time.perf_counter()
    snapshot = index.sync(None)
    seconds = time.perf_counter() - started
    chars = sum(seg.text_bytes for seg in snapshot.segments)
    index.close()
    return {"seconds": seconds, "chars": chars, "segments": len(snapshot.segments)}


def export_text(engine, folder: Path, out: Path) -> int:
    """Write each stored document's text (its pages joined by newlines: the document's lines, numbered as search
    numbers them) to ``out``/<path relative to folder>.txt, one document at a time. Returns the bytes written."""
    from sqlalchemy import text

    from store.documents import read_pages

    with engine.connect() as conn:
        rows = conn.execute(text("SELECT e.id, e.path FROM documents d JOIN entries e ON e.id = d.entry_id "
                                 "WHERE d.status = 'ok' ORDER BY e.path")).all()
    total = 0
    for entry_id, path in rows:
        target = out / (os.path.relpath(path, folder) + ".txt")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            for k, (_, page_text, _) in enumerate(read_pages(engine, entry_id, None)):
                total += fh.write(("\n" if k else "") + page_text)
            total += fh.write("\n")
    return total
