"""The semantic benchmark's search figures: a fresh store loaded with the corpus's chunks and their real (cached)
embeddings, the hnswlib index built over them and its recall against brute force, then ``search_documents`` and
``search`` through the Python SDK's client against ``assay serve`` over stdio.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import REPO, hwm_kb, payload, percentile, server_env, server_pid
from bench.semantic_ann import DIM, TOPK, brute_force, recall_at_k
from bench.semantic_corpus import BLOCK, CHUNKS_PER_DOC, EmbeddingCache, queries, topic_of, write_documents
from bench.semantic_embed import fresh_store, model_path, raw_encoder

log = logging.getLogger("bench.semantic")


# --- 3. search over real embeddings ----------------------------------------------------------------------------------

def chunk_spans(doc: int):
    """The ChunkSpans of a written document (``# Document d`` then its chunks as paragraphs), offsets into its text."""
    from bench.semantic_corpus import document_chunks
    from flows.semantic.model import ChunkSpan

    head = f"# Document {doc}\n\n"
    pos, spans = len(head), []
    for i, t in enumerate(document_chunks(doc)):
        line = 3 + 2 * i  # a heading line, a blank line, then a paragraph (one line) and a blank line each
        spans.append(ChunkSpan(index=i, start=pos, end=pos + len(t), line_start=line, line_end=line, page=None,
                               page_end=None, text=t))
        pos += len(t) + 2
    return spans


def load_store(engine, cache: EmbeddingCache, docs: int, real_docs: int, folder: Path, backend: str,
               batch_docs: int = 200) -> dict:
    """Documents 0 .. ``docs - 1`` (their chunks, with cached vectors) into collection ``default`` via
    store.semantic, ``batch_docs`` documents a transaction. Document d gets the vectors of document
    ``d % real_docs`` (its own when d < real_docs; past the cached prefix, those of a document of the same topic,
    since ``real_docs`` is a multiple of the topic count). Returns seconds and counts."""
    from sqlalchemy import text

    from bench.semantic_corpus import BLOCK, TOPIC_NAMES
    from flows.documents.model import Extracted, Page
    from flows.semantic.model import DEFAULT_MODEL, EmbedParams, entry_work_key
    from store import documents as store_documents
    from store import semantic as store_semantic

    assert real_docs % len(TOPIC_NAMES) == 0 or real_docs == docs, real_docs
    collection = store_semantic.ensure_collection(engine, "default", model=DEFAULT_MODEL, backend=backend, dim=DIM,
                                                  chunk_size=1000, overlap=200)
    params = EmbedParams(backend=backend)
    with engine.connect() as conn:
        ids = {r[0]: r[1] for r in conn.execute(text("SELECT path, id FROM entries WHERE kind = 'file'"))}
    started = time.perf_counter()
    items: list = []
    texts: list = []
    loaded = 0
    block_no, block = -1, None
    for doc in range(docs):
        first = (doc % real_docs) * CHUNKS_PER_DOC  # 0-based chunk offset of the document whose vectors it gets
        if first // BLOCK != block_no:
            block_no = first // BLOCK
            block = np.load(cache.block_path(block_no))
        k = first - block_no * BLOCK
        path = folder / f"d{doc // 500:03d}" / f"{doc:05d}.md"
        st = path.stat()
        items.append(store_semantic.EntryChunks(
            entry_id=ids[str(path)], work_key=entry_work_key(st.st_size, st.st_mtime, params), status="ok",
            error=None, chunks=chunk_spans(doc), vectors=block[k:k + CHUNKS_PER_DOC]))
        # the document's extracted text, as the documents capability stores it before chunking (the text engine
        # indexes it, and hybrid search's keyword side reads the chunks' lines there)
        texts.append(store_documents.DocumentWrite(
            ids[str(path)], st.st_size, st.st_mtime, "bench", Extracted(
                path=str(path), format="markdown", pages=[Page(1, path.read_text())], total_pages=1)))
        if len(items) >= batch_docs:
            store_documents.write_extracted_many(engine, texts)
            store_semantic.replace_entries(engine, collection["id"], items)
            loaded += len(items)
            items, texts = [], []
    if items:
        store_documents.write_extracted_many(engine, texts)
        store_semantic.replace_entries(engine, collection["id"], items)
        loaded += len(items)
    return {"seconds": time.perf_counter() - started, "docs": loaded, "collection": collection}


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def index_section(fig: dict, scratch: Path, work: Path, docs: int, n_queries: int, backend: str, *,
                  cache_docs: int, real_docs: int) -> Path:
    """Load ``docs`` documents with the cached vectors of the first ``real_docs`` (of a cache of ``cache_docs``) into
    a fresh store, build the index, measure recall; returns the data dir."""
    from flows.semantic import vectors as semantic_vectors
    from flows.semantic.paths import vector_dir

    cache = EmbeddingCache(work, docs=cache_docs, model=model_path(), backend=backend)
    encode, _ = raw_encoder(backend)
    if any(b * BLOCK < real_docs * CHUNKS_PER_DOC for b in cache.missing()):
        log.info("embedding cache %s: %d blocks to encode first (python -m bench.semantic_corpus does it ahead)",
                 cache.dir, len(cache.missing()))
        fig["cache_fill"] = cache.fill(encode)
    folder = work / f"search-docs-{docs}"
    write_documents(folder, docs)
    engine, service, data = fresh_store(scratch, "search", [folder], [folder], use_prefect=False)
    service.shutdown()
    fig["search"] = {"docs": docs, "chunks": docs * CHUNKS_PER_DOC, "real_docs": real_docs, "backend": backend,
                     "cache": str(cache.dir)}
    fig["search"]["load"] = {k: v for k, v in load_store(engine, cache, docs, real_docs, folder, backend).items()
                             if k != "collection"}
    log.info("store loaded: %d documents in %.1f s", fig["search"]["load"]["docs"], fig["search"]["load"]["seconds"])
    from store import semantic as store_semantic

    collection = store_semantic.require_collection(engine, "default")
    vdir = vector_dir(engine)
    started = time.perf_counter()
    index = semantic_vectors.index_for(engine, collection)
    index.load()  # no file yet: built from the stored vectors, in batches, and saved
    fig["search"]["build_seconds"] = time.perf_counter() - started
    fig["search"]["index_count"] = index.count
    fig["search"]["index_bytes"] = dir_bytes(vdir)
    db = data / "assay.db"
    fig["search"]["db_bytes"] = db.stat().st_size + sum(p.stat().st_size for p in data.glob("assay.db-*")
                                                        if p.is_file())
    log.info("index built: %d vectors in %.1f s, %d bytes", index.count, fig["search"]["build_seconds"],
             fig["search"]["index_bytes"])

    qs = queries(n_queries)
    qv = encode([q.text for q in qs], 32)
    # brute force over the very vectors the store holds (its chunk ids), streamed
    exact, exact_scores = brute_force(qv, store_semantic.iter_vectors(engine, collection["id"]))
    found, times = [], []
    for v in qv:
        started = time.perf_counter()
        found.append(index.search(v, TOPK))
        times.append(time.perf_counter() - started)
    fig["search"]["recall"] = recall_at_k(found, exact, exact_scores)
    fig["search"]["ann_p50"] = percentile(times, 50)
    paths = {cid: row["path"] for cid, row in store_semantic.chunk_rows(engine, exact.ravel().tolist()).items()}
    fig["search"]["exact_topic"] = float(np.mean([
        np.mean([_doc_topic(paths.get(int(c), "")) == q.topic for c in row]) for q, row in zip(qs, exact)]))
    log.info("recall@10 %.3f; ANN query p50 %.2f ms", fig["search"]["recall"], fig["search"]["ann_p50"] * 1000)
    semantic_vectors.clear_cache()  # the server loads the saved file itself; this process lets its copy go
    del index
    from flows.documents.text_index import close_text_indexes, text_index

    started = time.perf_counter()
    text_index(engine).sync(None)  # the documents' text indexed (a server would do it in the background)
    fig["search"]["text_index_seconds"] = time.perf_counter() - started
    close_text_indexes()
    engine.dispose()
    return data


def _hits(payload: dict) -> list[dict]:
    for key in ("results", "hits", "matches"):
        if isinstance(payload.get(key), list):
            return payload[key]
    return []


def _hit_path(hit: dict) -> str:
    for key in ("filePath", "path", "file"):
        if isinstance(hit.get(key), str):
            return hit[key]
    meta = hit.get("metadata") or {}
    return meta.get("filePath") or meta.get("path") or ""


TOOLS = {
    "search_documents": lambda q: ("search_documents", {"query": q, "options": {"limit": TOPK, "minScore": 0.0}}),
    "search": lambda q: ("search", {"query": q, "mode": "hybrid", "limit": TOPK}),
}


async def _mcp_session(params, qs) -> dict:
    from mcp import Client

    out: dict = {"first_call": 0.0}
    async with Client(params) as client:
        started = time.perf_counter()  # the first call loads the model and the index: one-time, reported apart
        payload(await client.call_tool(*TOOLS["search_documents"]("warm up")))
        out["first_call"] = time.perf_counter() - started
        for _ in range(3):
            payload(await client.call_tool(*TOOLS["search"]("warm up")))
        for key, make in TOOLS.items():
            samples, on_topic, returned = [], [], []
            for q in qs:
                started = time.perf_counter()
                answer = payload(await client.call_tool(*make(q.text)))
                samples.append(time.perf_counter() - started)
                hits = _hits(answer)
                returned.append(len(hits))
                on_topic += [_doc_topic(_hit_path(h)) == q.topic for h in hits]
            out[key] = {"samples": samples, "on_topic": float(np.mean(on_topic)) if on_topic else 0.0,
                        "returned": float(np.mean(returned))}
            log.info("%s: p50 %.1f ms, on topic %.2f", key, percentile(samples, 50) * 1000, out[key]["on_topic"])
        out["server_kb"] = hwm_kb(server_pid())
    return out


def _doc_topic(path: str) -> str | None:
    stem = Path(path).stem
    return topic_of(int(stem)) if stem.isdigit() else None


def mcp_section(fig: dict, scratch: Path, data: Path, folder: Path, n_queries: int) -> None:
    import anyio
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server.cli", "serve", "--root", str(folder), "--data-dir", str(data), "--no-prefect",
              "--log-level", "WARNING"],
        env=server_env(scratch, ASSAY_DATA_DIR=str(data), HF_HUB_OFFLINE="1"), cwd=str(REPO))
    fig["mcp"] = anyio.run(_mcp_session, params, queries(n_queries))
