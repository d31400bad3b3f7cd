"""The semantic index's files as the operator tools see them: each collection's hnswlib file against the store's
vectors, rebuilding or deleting those files, and the model exports (ONNX / OpenVINO) and in-process caches.

The store holds every vector and is the truth; a collection's file (flows.semantic.vector_files) is a cache of it
that the engine (flows.semantic.vectors) rebuilds from the store when it is missing or unusable and catches up when
it is behind. A rebuild here forgets the process's index of the collection and deletes its files
(``vectors.drop_index``), then loads it again in a daemon thread: a missing file means a rebuild from every stored
vector, saved when done; searches meanwhile are answered exactly from the store. Only the index's own files and
the export cache are touched.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from typing import Any

from sqlalchemy.engine import Engine

from flows.core.disk_usage import Usage, dir_usage, file_usage
from flows.semantic import cutoff, vectors
from flows.semantic.paths import model_cache_dir, vector_dir
from flows.semantic.vector_files import SUFFIXES, VectorFiles
from store.semantic import list_collections, vector_count

log = logging.getLogger(__name__)

PROBLEMS = ("missing", "unusable", "mismatch")  # check statuses a rebuild repairs; ok, empty and behind are not


def _files_usage(files: VectorFiles) -> Usage:
    total = Usage()
    for suffix in SUFFIXES:
        total += file_usage(files.directory / f"{files.collection_id}{suffix}")
    return total


def vector_index_status(engine: Engine) -> dict[str, Any]:
    """The index directory, its files and bytes, and per collection: vectors in the store, the file's bytes,
    whether this process has the index loaded (``ready``) and how many vectors it holds then."""
    directory = vector_dir(engine)
    out = []
    for collection in list_collections(engine):
        index = vectors.index_for(engine, collection)
        out.append({"name": collection["name"], "vectors": vector_count(engine, int(collection["id"])),
                    "file_bytes": _files_usage(VectorFiles(directory, int(collection["id"]))).bytes,
                    "ready": index.ready, "indexed": index.count if index.ready else None})
    return {"directory": str(directory), **dir_usage(directory).as_dict(), "collections": out}


def _file_state(collection: dict[str, Any], files: VectorFiles, stored: int) -> tuple[str, str]:
    """(status, detail) of one collection's file against the store, read from its metadata (the .hnsw is not
    loaded): ok, empty (no vectors, no file), behind (the engine catches up at the next search), missing, unusable
    or mismatch (the file holds as many vectors as the store's version it names, and it does not)."""
    if not files.hnsw_path.exists() or not files.meta_path.exists():
        if not stored:
            return "empty", "no vectors and no file"
        return "missing", "no index file: the next search rebuilds it from the store"
    try:
        meta = json.loads(files.meta_path.read_text())
        size = files.hnsw_path.stat().st_size
    except (OSError, ValueError) as exc:
        return "unusable", f"metadata unreadable: {exc}"
    if not isinstance(meta, dict):
        return "unusable", "metadata is not an object"
    wanted = {"dim": int(collection["dim"]), "model": collection["model"], "backend": collection["backend"]}
    other = {k: meta.get(k) for k, v in wanted.items() if meta.get(k) != v}
    if other or float(meta.get("created_at") or 0.0) != float(collection.get("created_at") or 0.0):
        return "unusable", f"the file is of another collection or model ({other or 'created_at'})"
    if size != meta.get("hnsw_size"):
        return "unusable", f"the .hnsw has {size} bytes, its metadata says {meta.get('hnsw_size')} (a save cut short?)"
    if meta.get("version") != collection.get("version"):
        return "behind", f"holds version {meta.get('version')} of {collection.get('version')}: caught up at the " \
                         "next search"
    if meta.get("count") != stored:
        return "mismatch", f"holds {meta.get('count')} vectors at the store's version, the store has {stored}"
    return "ok", f"{stored} vectors"


def check_vector_index(engine: Engine) -> list[dict[str, Any]]:
    """Each collection's file against the store's vectors (see ``_file_state``)."""
    directory = vector_dir(engine)
    out = []
    for collection in list_collections(engine):
        stored = vector_count(engine, int(collection["id"]))
        status, detail = _file_state(collection, VectorFiles(directory, int(collection["id"])), stored)
        out.append({"name": collection["name"], "status": status, "detail": detail, "vectors": stored})
    return out


def rebuild_vector_indexes(engine: Engine, *, names: set[str] | None = None,
                           background: bool = True) -> list[dict[str, Any]]:
    """Rebuild the files of the collections named (None: all) from the store: each forgotten and its files
    deleted, then loaded again (a rebuild from every stored vector, saved) in a daemon thread or, without
    ``background``, before this returns. Returns per collection its name, the vectors to index and the files and
    bytes deleted."""
    started = []
    for collection in list_collections(engine):
        if names is not None and collection["name"] not in names:
            continue
        cid = int(collection["id"])
        freed = _files_usage(VectorFiles(vector_dir(engine), cid))
        vectors.drop_index(engine, cid)
        index = vectors.index_for(engine, collection)
        if background:
            threading.Thread(target=_load, args=(index,), name=f"vectors-reload-{cid}", daemon=True).start()
        else:
            _load(index)
        started.append({"name": collection["name"], "vectors": vector_count(engine, cid), **freed.as_dict()})
    return started


def _load(index: vectors.VectorIndex) -> None:
    try:
        index.load()
    except Exception:  # the next search tries again (and answers from the store meanwhile)
        log.exception("rebuilding the vector index of collection %r failed", index.name)


def clear_vector_index(engine: Engine) -> Usage:
    """Forget every collection's index in this process and delete its files (the next search rebuilds it from the
    store); what was deleted."""
    freed = Usage()
    for collection in list_collections(engine):
        cid = int(collection["id"])
        freed += _files_usage(VectorFiles(vector_dir(engine), cid))
        vectors.drop_index(engine, cid)
    return freed


def model_exports_usage() -> Usage:
    """Files and bytes of the model exports (``semantic.model_cache``, else ``<data dir>/models``)."""
    return dir_usage(model_cache_dir())


def clear_model_exports() -> Usage:
    """Delete every export in the model cache (rebuilt from the model the next time a backend needs it; an encoder
    loaded in this process keeps running on what it loaded); what was deleted."""
    root = model_cache_dir()
    freed = Usage()
    for child in root.iterdir():
        used = dir_usage(child) if child.is_dir() and not child.is_symlink() else file_usage(child)
        try:
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        except OSError as exc:
            log.warning("clearing the model cache could not remove %s: %s", child, exc)
            continue
        freed += used
    return freed


def clear_memory() -> list[str]:
    """Forget the semantic index's in-process caches: the loaded hnswlib indexes (loaded again from their files at
    the next search) and the measured noise floors; the names of what was cleared."""
    vectors.clear_cache()
    cutoff.clear_cache()
    return ["vector indexes", "noise floors"]
