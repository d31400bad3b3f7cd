"""Collections: named semantic indexes, each bound to the model, backend and dimension of its vectors.

Asking for a collection with another model is refused (MODEL_MISMATCH), so vectors of two models never mix.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sqlalchemy import Integer, delete, func, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from store.errors import DocumentError, InvalidInput
from store.models import Chunk, Collection, CollectionEntry, Embedding

log = logging.getLogger(__name__)

C = Collection.__table__
CE = CollectionEntry.__table__
K = Chunk.__table__
V = Embedding.__table__


def _collection_dict(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["folders"] = json.loads(d.pop("folders_json", None) or "[]")
    return d


def get_collection(engine: Engine, name: str) -> dict[str, Any] | None:
    """The collection named ``name`` (its row, ``folders`` parsed), or None."""
    with engine.connect() as conn:
        row = conn.execute(select(C).where(C.c.name == name)).first()
    return _collection_dict(row) if row is not None else None


def collection_by_id(engine: Engine, collection_id: int) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(C).where(C.c.id == collection_id)).first()
    return _collection_dict(row) if row is not None else None


def collection_version(engine: Engine, collection_id: int) -> int | None:
    """The collection's version (one indexed read: every search asks it), None if the collection is gone."""
    with engine.connect() as conn:
        return conn.execute(select(C.c.version).where(C.c.id == collection_id)).scalar()


def collection_names(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(C.c.name).order_by(C.c.name)).scalars())


def ensure_collection(engine: Engine, name: str, *, model: str, backend: str, dim: int, chunk_size: int = 1000,
                      overlap: int = 200) -> dict[str, Any]:
    """The collection ``name``, created with this model, backend and chunking if it does not exist. Two callers
    creating it at once both get the one row (the unique name decides, the loser reads the winner's row). An
    existing collection made with another model, backend or dimension is refused with MODEL_MISMATCH naming both:
    its vectors could not be compared with new ones. A different chunking is recorded (entries re-chunk by their
    work keys)."""
    if not name or not isinstance(name, str):
        raise InvalidInput(f"a collection name must be a non-empty string, got {name!r}", field="collection")
    existing = get_collection(engine, name)
    if existing is None:
        at = time.time()
        try:
            with engine.begin() as conn:
                conn.execute(insert(C).values(name=name, model=model, backend=backend, dim=int(dim),
                                              chunk_size=int(chunk_size), overlap=int(overlap), version=0,
                                              folders_json="[]", created_at=at, updated_at=at))
            log.info("collection %r created (model %s, backend %s, dim %d)", name, model, backend, dim)
        except IntegrityError:  # created by another job meanwhile
            log.debug("collection %r was created concurrently", name)
        existing = get_collection(engine, name)
        if existing is None:  # created and dropped again meanwhile: one more try settles it
            return ensure_collection(engine, name, model=model, backend=backend, dim=dim, chunk_size=chunk_size,
                                     overlap=overlap)
    if existing["model"] != model or existing["backend"] != backend or int(existing["dim"]) != int(dim):
        raise DocumentError(
            "MODEL_MISMATCH",
            f"collection {name!r} holds vectors of model {existing['model']} (backend {existing['backend']}, "
            f"dimension {existing['dim']}); this request asked for {model} (backend {backend}, dimension {dim}); "
            f"use another collection, or ask for {existing['model']} with backend {existing['backend']}",
            field="collection", details={"collection": name, "model": existing["model"],
                                         "backend": existing["backend"], "requested_model": model,
                                         "requested_backend": backend})
    if (existing["chunk_size"], existing["overlap"]) != (int(chunk_size), int(overlap)):
        with engine.begin() as conn:
            conn.execute(update(C).where(C.c.id == existing["id"])
                         .values(chunk_size=int(chunk_size), overlap=int(overlap), updated_at=time.time()))
        existing.update(chunk_size=int(chunk_size), overlap=int(overlap))
    return existing


def require_collection(engine: Engine, name: str) -> dict[str, Any]:
    """The collection ``name``, else INDEX_NOT_FOUND naming the collections that exist (or saying there is none yet
    and that index_files builds one)."""
    found = get_collection(engine, name)
    if found is not None:
        return found
    names = collection_names(engine)
    if names:
        hint = f"the collections are: {', '.join(names)}"
    else:
        hint = "no collection exists yet; index_files (or a plan with an embed outcome) builds one"
    raise DocumentError("INDEX_NOT_FOUND", f"there is no semantic index (collection) {name!r}; {hint}",
                        field="collection", details={"collection": name, "collections": names})


def list_collections(engine: Engine) -> list[dict[str, Any]]:
    """Every collection with its counts: ``documents`` (entries with chunks), ``entries`` (every entry it tried,
    empty and failed ones included), ``errors`` and ``chunks``."""
    ent = (select(CE.c.collection_id, func.count().label("entries"),
                  func.sum(func.coalesce((CE.c.status == "ok").cast(Integer), 0)).label("documents"),
                  func.sum(func.coalesce((CE.c.status == "error").cast(Integer), 0)).label("errors"),
                  func.sum(CE.c.chunk_count).label("chunks"))
           .group_by(CE.c.collection_id).subquery())
    q = (select(C, ent.c.entries, ent.c.documents, ent.c.errors, ent.c.chunks)
         .outerjoin(ent, ent.c.collection_id == C.c.id).order_by(C.c.name))
    with engine.connect() as conn:
        out = []
        for row in conn.execute(q):
            d = _collection_dict(row)
            for k in ("entries", "documents", "errors", "chunks"):
                d[k] = int(d.get(k) or 0)
            out.append(d)
    return out


def add_folder(engine: Engine, collection_id: int, folder: str) -> None:
    """Record ``folder`` among the collection's indexed roots (``folders``), once."""
    with engine.begin() as conn:
        raw = conn.execute(select(C.c.folders_json).where(C.c.id == collection_id)).scalar()
        if raw is None:
            return
        folders = json.loads(raw or "[]")
        if folder not in folders:
            folders.append(folder)
            conn.execute(update(C).where(C.c.id == collection_id)
                         .values(folders_json=json.dumps(folders), updated_at=time.time()))


def drop_collection(engine: Engine, collection_id: int) -> None:
    """Delete a collection with its entries' rows, chunks and vectors (by cascade; explicit for the chunks so the
    keyword index's triggers run). The hnswlib file is the caller's (flows.semantic.vectors.drop_index)."""
    with engine.begin() as conn:
        conn.execute(delete(V).where(V.c.collection_id == collection_id))
        conn.execute(delete(K).where(K.c.collection_id == collection_id))
        conn.execute(delete(CE).where(CE.c.collection_id == collection_id))
        conn.execute(delete(C).where(C.c.id == collection_id))
