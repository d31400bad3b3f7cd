"""One hnswlib index per collection, beside the database, kept in step with the store's vectors.

The store (``store.semantic``) holds every chunk's vector and is the truth; the hnswlib file is a cache of it that
answers nearest-neighbour queries fast. The file and its metadata, where they live and how they are written
atomically, are ``flows.semantic.vector_files``.

Keeping up: every search first reads ``collections.version`` (one indexed read) and, when the store moved on (the
CLI or another server wrote, an entry was deleted and its chunks went by cascade), diffs the index's live labels
with the store's chunk ids (one query) and adds the missing vectors (read in batches) / marks the gone ones deleted.
A missing, unreadable or inconsistent file is rebuilt from all stored vectors (batches: memory is the index plus one
batch). Writers in this process call ``apply(replaced)`` after each store write, so no diff is needed then.

Concurrency: a readers/writer lock: searches share it, adding / deleting / resizing / swapping the index hold it
alone, briefly (adds go in sub-batches). Every mutation (apply, catch-up, compaction, rebuild, save) also holds one
mutex, so they run one at a time, and the store is only queried outside the readers/writer lock.

While the index is being rebuilt (the file was missing or corrupt), searches are answered exactly from the store's
vectors (a streamed scan keeping the top k: always correct, slower); the first search that finds the file unusable
starts the rebuild in a background thread and is answered that way itself (an index of at most SYNC_REBUILD_LIMIT
vectors is rebuilt by that search at once: a fraction of a second). A compaction (more than ~30% of the
index's elements deleted, done at a save) builds the new index beside the old one, which answers meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import hnswlib
import numpy as np
from sqlalchemy.engine import Engine

from flows.semantic import settings as semantic_settings
from flows.semantic.bitmap import LabelBitmap
from flows.semantic.paths import vector_dir
from flows.semantic.rwlock import RWLock
from flows.semantic.vector_files import EF_CONSTRUCTION, M, SPACE, VectorFiles
from store.semantic.collections import collection_version
from store.semantic.entries import Replaced
from store.semantic.vectors import chunk_ids, iter_vectors, vector_count

log = logging.getLogger(__name__)

SYNC_REBUILD_LIMIT = 5_000  # a search rebuilds an index of at most this many vectors itself (well under a second)
EXACT_LIMIT = 20_000  # a filter allowing at most this many chunks is answered exactly (cosine against each)
COMPACT_FRACTION = 0.30  # rebuild without the deleted elements at the next save beyond this fraction
ADD_BATCH = 512  # vectors added per hold of the write lock (a search waits for one such batch at most)
READ_BATCH = 8192  # vectors read from the store per query
GROWTH = 1.5
MIN_CAPACITY = 1024


def _top(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if len(scores) > k:
        part = np.argpartition(-scores, k - 1)[:k]
        ids, scores = ids[part], scores[part]
    order = np.lexsort((ids, -scores))
    return ids[order], scores[order]


class VectorIndex:
    """The hnswlib index of one collection in this process (get it with :func:`index_for`)."""

    def __init__(self, engine: Engine, collection: dict, directory: Path) -> None:
        self.engine = engine
        self.collection_id = int(collection["id"])
        self.name = collection["name"]
        self.dim = int(collection["dim"])
        self.model = collection["model"]
        self.backend = collection["backend"]
        self.created_at = float(collection.get("created_at") or 0.0)
        self.directory = directory
        self._files = VectorFiles(directory, self.collection_id)
        self._rw = RWLock()
        self._mutex = threading.RLock()
        self._index: hnswlib.Index | None = None
        self._present = LabelBitmap()  # labels in the index (deleted or not)
        self._live = LabelBitmap()  # labels in the index and not deleted
        self._live_count = 0
        self._elements = 0
        self._version = -1  # the collection version the in-memory index holds
        self._dirty = False
        self._building: threading.Thread | None = None

    # --- files ---------------------------------------------------------------------------------------------------

    @property
    def hnsw_path(self) -> Path:
        return self._files.hnsw_path

    @property
    def meta_path(self) -> Path:
        return self._files.meta_path

    @property
    def count(self) -> int:
        """Live vectors in the index (deleted ones excluded)."""
        return self._live_count

    @property
    def version(self) -> int:
        return self._version

    @property
    def ready(self) -> bool:
        return self._index is not None

    def live_ids(self) -> np.ndarray:
        """The chunk ids the index holds and has not marked deleted (sorted): once it is current, the collection's
        stored chunk ids."""
        return np.sort(self._live.ids())

    def _loaded(self) -> hnswlib.Index:
        """The index in memory: what adds, removals and searches use once a load or build has made it."""
        if self._index is None:
            raise RuntimeError(f"the vector index of collection {self.name!r} is not loaded")
        return self._index

    def _new_index(self, capacity: float) -> hnswlib.Index:
        index = hnswlib.Index(space=SPACE, dim=self.dim)
        index.init_index(max_elements=max(MIN_CAPACITY, int(capacity)), ef_construction=EF_CONSTRUCTION, M=M)
        return index

    def _read_file(self) -> tuple[hnswlib.Index, dict, np.ndarray, np.ndarray] | None:
        """The saved index, its metadata, its labels and deleted labels; None (logged) when the files are missing,
        unreadable, of another model or dimension, or not the pair written together."""
        return self._files.read(name=self.name, dim=self.dim, model=self.model, backend=self.backend,
                                created_at=self.created_at)

    def save(self) -> None:
        """Write the index and its metadata atomically (temporary names, then renames, the json last), compacting
        first when more than ~30% of its elements are deleted. Nothing to do when nothing changed since the last
        save or load."""
        building = self._building
        if building is not None and building is not threading.current_thread():
            building.join()  # a rebuild in progress saves its result itself; then there may be more to write
        with self._mutex:
            self._save()

    def _save(self) -> None:
        with self._mutex:
            if self._index is None or not self._dirty:
                return
            if self._elements and (self._elements - self._live_count) > COMPACT_FRACTION * self._elements:
                self._compact()
            deleted = self._deleted_labels()
            self._files.write(self._index, {
                "version": self._version, "count": self._live_count, "elements": self._elements,
                "deleted": [int(x) for x in deleted], "dim": self.dim, "model": self.model, "backend": self.backend,
                "created_at": self.created_at, "M": M, "ef_construction": EF_CONSTRUCTION})
            self._dirty = False
            log.debug("vector index of collection %r saved: %d vectors, version %d", self.name,
                      self._live_count, self._version)

    # --- loading, catching up, rebuilding -------------------------------------------------------------------------

    def _install(self, index: hnswlib.Index, labels: np.ndarray, deleted: np.ndarray, version: int) -> None:
        present, live = LabelBitmap(), LabelBitmap()
        present.set(labels, True)
        live.set(labels, True)
        live.set(deleted, False)
        with self._rw.write():
            self._index, self._present, self._live = index, present, live
            self._elements = len(labels)
            self._live_count = len(labels) - len(deleted)
            self._version = version

    def load(self) -> None:
        """Make the index ready in this thread: load the file and catch up with the store, or rebuild it from the
        stored vectors when the file is missing or unusable."""
        with self._mutex:
            if self._index is None and not self._try_load():
                self._rebuild()

    def _try_load(self) -> bool:
        found = self._read_file()
        if found is None:
            return False
        index, meta, labels, deleted = found
        self._install(index, labels, deleted, int(meta.get("version", -1)))
        self._dirty = False
        self._catch_up()
        self._save()
        log.info("vector index of collection %r loaded: %d vectors", self.name, self._live_count)
        return True

    def _rebuild(self) -> None:
        """Build the index from every stored vector of the collection (batches), then save it."""
        started = time.monotonic()
        version = collection_version(self.engine, self.collection_id)
        if version is None:
            log.info("collection %r was dropped; no index to build", self.name)
            return
        total = len(chunk_ids(self.engine, self.collection_id))
        index = self._new_index(total * GROWTH)
        labels: list[np.ndarray] = []
        for ids, vectors in iter_vectors(self.engine, self.collection_id, batch=READ_BATCH):
            if index.element_count + len(ids) > index.get_max_elements():
                index.resize_index(int((index.element_count + len(ids)) * GROWTH))
            index.add_items(vectors, ids)
            labels.append(ids)
        all_ids = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
        self._install(index, all_ids, np.zeros(0, dtype=np.int64), int(version))
        self._dirty = True
        self._catch_up()  # writes that landed during the scan
        self._save()
        log.info("vector index of collection %r rebuilt from the store: %d vectors in %.1f s", self.name,
                 self._live_count, time.monotonic() - started)

    def _rebuild_in_background(self) -> None:
        def run() -> None:
            try:
                with self._mutex:
                    if self._index is None:
                        self._rebuild()
            except Exception:
                log.exception("rebuilding the vector index of collection %r failed", self.name)
            finally:
                self._building = None

        if self._building is None:
            self._building = threading.Thread(target=run, name=f"vectors-rebuild-{self.collection_id}", daemon=True)
            self._building.start()

    def _catch_up(self) -> bool:
        """Bring the index to the store's current state if its version differs: the store's chunk ids (one query)
        against the live labels; missing vectors read in batches and added, gone labels marked deleted. Returns
        whether anything was done. The caller holds the mutex."""
        version = collection_version(self.engine, self.collection_id)
        if version is None or version == self._version:
            return False
        stored = chunk_ids(self.engine, self.collection_id)
        live = self._live.ids()
        missing = np.setdiff1d(stored, live, assume_unique=True)
        gone = np.setdiff1d(live, stored, assume_unique=True)
        self._remove(gone)
        for ids, vectors in iter_vectors(self.engine, self.collection_id, batch=READ_BATCH, ids=missing):
            self._add(ids, vectors)
        self._version = int(version)
        self._dirty = True
        if len(missing) or len(gone):
            log.info("vector index of collection %r caught up with the store: +%d -%d", self.name, len(missing),
                     len(gone))
        return True

    def _add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim) if len(ids) else vectors
        for i in range(0, len(ids), ADD_BATCH):
            part, vec = ids[i:i + ADD_BATCH], vectors[i:i + ADD_BATCH]
            if i:
                time.sleep(0.001)  # let the searches that queued behind the last batch run before the next one
            with self._rw.write():
                index = self._loaded()
                fresh = int((~self._present.has(part)).sum())
                need = index.element_count + fresh
                if need > index.get_max_elements():
                    index.resize_index(max(need, int(index.get_max_elements() * GROWTH)))
                was_live = int(self._live.has(part).sum())
                index.add_items(vec, part, num_threads=1 if len(part) < 64 else -1)
                self._present.set(part, True)
                self._live.set(part, True)
                self._elements += fresh
                self._live_count += len(part) - was_live

    def _deleted_labels(self) -> np.ndarray:
        """Labels in the index marked deleted (kept in the json: hnswlib's file does not say which)."""
        present = self._present.ids()
        return present[~self._live.has(present)]

    def _remove(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[self._live.has(ids)] if len(ids) else ids
        if not len(ids):
            return
        with self._rw.write():
            for label in ids:
                self._loaded().mark_deleted(int(label))
            self._live.set(ids, False)
            self._live_count -= len(ids)

    def _compact(self) -> None:
        """A new index of the live vectors only (read from the old one in batches while it keeps answering), then
        swapped in. The caller holds the mutex."""
        live = self._live.ids()
        index = self._new_index(len(live) * GROWTH)
        for i in range(0, len(live), READ_BATCH):
            part = live[i:i + READ_BATCH]
            with self._rw.read():
                vectors = self._loaded().get_items(part, return_type="numpy")
            index.add_items(vectors, part)
        self._install(index, live, np.zeros(0, dtype=np.int64), self._version)
        self._dirty = True
        log.info("vector index of collection %r compacted: %d vectors", self.name, len(live))

    def apply(self, replaced: Replaced) -> None:
        """Reflect a store write of this process: removed chunk ids marked deleted, added ones inserted (an index
        not loaded yet is loaded first: its file caught up with the store, this write included, or a rebuild). The
        held version follows the write's only when nothing else was written in between (else the next search
        diffs)."""
        with self._mutex:
            if self._index is None:
                self.load()  # the file (caught up with the store, this write included) or a rebuild
                if self._index is None:
                    return
            self._remove(replaced.removed_ids)
            if len(replaced.added_ids):
                self._add(replaced.added_ids, replaced.vectors)
            self._dirty = True
            if replaced.version is not None and replaced.previous == self._version:
                self._version = int(replaced.version)

    def refresh(self, *, wait: bool = False) -> bool:
        """Make sure the index is loaded and current with the store. With ``wait`` False (searches), never block on
        another thread's mutation: a busy index is used as it is, a missing file is rebuilt in the background.
        Returns whether the index is ready."""
        if wait:
            with self._mutex:
                if self._index is None:
                    self.load()
                else:
                    self._catch_up()
            return self._index is not None
        if not self._mutex.acquire(blocking=False):
            return self._index is not None
        try:
            if self._index is None:
                if self._building is None and not self._try_load():
                    if vector_count(self.engine, self.collection_id) <= SYNC_REBUILD_LIMIT:
                        self._rebuild()
                    else:
                        self._rebuild_in_background()
            else:
                self._catch_up()
        finally:
            self._mutex.release()
        return self._index is not None

    # --- search ---------------------------------------------------------------------------------------------------

    def search(self, query: np.ndarray, k: int, *, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The chunks nearest ``query`` (a normalised vector): ``(chunk id, cosine similarity)``, best first, at most
        ``k``; with ``allowed``, only among those chunk ids (a small set is scored exactly). Catches up with the
        store first; while the index is being rebuilt, answers exactly from the stored vectors."""
        if k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query vector of dimension {q.shape[0]}; collection {self.name!r} has {self.dim}")
        allowed_ids = None if allowed is None else np.unique(np.asarray(allowed, dtype=np.int64))
        if allowed_ids is not None and not len(allowed_ids):
            return []
        if not self.refresh():
            return self._scan_store(q, k, allowed_ids)
        ef = max(k, semantic_settings.current().search_ef)
        with self._rw.read():
            if allowed_ids is not None:
                allowed_ids = allowed_ids[self._live.has(allowed_ids)]
                if len(allowed_ids) <= EXACT_LIMIT:
                    return self._exact(q, k, allowed_ids)
                permitted = LabelBitmap()
                permitted.set(allowed_ids, True)
                bits, size = permitted.bits, len(permitted.bits)
                found = self._knn(q, min(k, len(allowed_ids)), ef * 4,
                                  lambda label: label < size and bool(bits[label]))
                return found if found is not None else self._exact(q, k, allowed_ids)
            found = self._knn(q, min(k, self._live_count), ef, None)
            return found if found is not None else self._exact(q, k, self._live.ids())

    def _knn(self, q: np.ndarray, k: int, ef: int, keep) -> list[tuple[int, float]] | None:
        if k <= 0:
            return []
        index = self._loaded()
        index.set_ef(max(ef, k))
        try:
            labels, distances = index.knn_query(q, k=k, num_threads=1, filter=keep)
        except RuntimeError:  # fewer than k reachable (a strict filter, many deleted): the caller scores exactly
            return None
        return [(int(label), float(1.0 - d)) for label, d in zip(labels[0], distances[0])]

    def _exact(self, q: np.ndarray, k: int, ids: np.ndarray) -> list[tuple[int, float]]:
        best_ids, best = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        for i in range(0, len(ids), EXACT_LIMIT):
            part = ids[i:i + EXACT_LIMIT]
            scores = self._loaded().get_items(part, return_type="numpy").astype(np.float32) @ q
            best_ids, best = _top(np.concatenate([best_ids, part]), np.concatenate([best, scores]), k)
        return [(int(i), float(s)) for i, s in zip(best_ids, best)]

    def _scan_store(self, q: np.ndarray, k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        """Exact cosine against the stored vectors, streamed (the index is not ready yet)."""
        best_ids, best = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        for ids, vectors in iter_vectors(self.engine, self.collection_id, batch=READ_BATCH, ids=allowed):
            best_ids, best = _top(np.concatenate([best_ids, ids]), np.concatenate([best, vectors @ q]), k)
        return [(int(i), float(s)) for i, s in zip(best_ids, best)]


# --- the process-wide cache ---------------------------------------------------------------------------------------

_cache: dict[tuple[str, int], VectorIndex] = {}
_cache_lock = threading.Lock()


def index_for(engine: Engine, collection: dict) -> VectorIndex:
    """The process's index of ``collection`` (a row from store.semantic), created on first use; it loads its file
    (or rebuilds it) and catches up with the store lazily, on the first search or write. A collection dropped and
    created again under the same id gets a fresh index."""
    directory = vector_dir(engine)
    key = (str(directory), int(collection["id"]))
    with _cache_lock:
        found = _cache.get(key)
        if (found is None or found.created_at != float(collection.get("created_at") or 0.0)
                or found.model != collection["model"] or found.backend != collection["backend"]
                or found.dim != int(collection["dim"])):
            found = _cache[key] = VectorIndex(engine, collection, directory)
        else:
            found.engine = engine
        return found


def drop_index(engine: Engine, collection_id: int) -> None:
    """Forget the collection's index in this process and delete its files."""
    directory = vector_dir(engine)
    with _cache_lock:
        _cache.pop((str(directory), int(collection_id)), None)
    VectorFiles(directory, int(collection_id)).remove()


def clear_cache() -> None:
    """Forget every index of this process (tests; a server shutting down). Files stay."""
    with _cache_lock:
        _cache.clear()
