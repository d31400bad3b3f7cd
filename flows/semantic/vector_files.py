"""The files of a collection's hnswlib index, beside the database: reading them back checked, writing them atomically.

Files, in ``flows.semantic.paths.vector_dir(engine)``:

- ``<collection id>.hnsw``: the index (space "ip" over L2-normalised vectors, so cosine = 1 - distance; labels are
  chunk ids);
- ``<collection id>.json``: ``{version, count, elements, deleted, dim, model, backend, created_at, M,
  ef_construction, hnsw_size, saved_at}``: the collection version the file holds, the labels marked deleted (hnswlib
  keeps them in the graph until a compaction) and the size of the .hnsw written with it.

:meth:`VectorFiles.write` writes both under temporary names and renames them into place, the json last, holding an
exclusive file lock (``<id>.lock``) so two processes never interleave their pairs; a reader takes the lock shared. A
crash between the renames leaves a .hnsw whose size differs from the json's: treated as unusable; the temporary files
of a writer killed mid-write are removed by the next write.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import hnswlib
import numpy as np

try:  # POSIX file locks between processes; elsewhere the atomic renames alone
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

SPACE = "ip"  # inner product over L2-normalised vectors: distance = 1 - cosine
M = 16
EF_CONSTRUCTION = 200
SUFFIXES = (".json", ".hnsw", ".lock")


@contextlib.contextmanager
def _file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class VectorFiles:
    """The index files of collection ``collection_id`` in ``directory``."""

    directory: Path
    collection_id: int

    @property
    def hnsw_path(self) -> Path:
        return self.directory / f"{self.collection_id}.hnsw"

    @property
    def meta_path(self) -> Path:
        return self.directory / f"{self.collection_id}.json"

    @property
    def lock_path(self) -> Path:
        return self.directory / f"{self.collection_id}.lock"

    def read(self, *, name: str, dim: int, model: str, backend: str,
             created_at: float) -> tuple[hnswlib.Index, dict, np.ndarray, np.ndarray] | None:
        """The saved index, its metadata, its labels and deleted labels; None (logged) when the files are missing,
        unreadable, of another model or dimension (or of an earlier collection of the same id: ``created_at``), or
        not the pair written together. ``name`` is the collection's, for the log."""
        if not self.hnsw_path.exists() or not self.meta_path.exists():
            return None
        try:
            with _file_lock(self.lock_path, exclusive=False):
                meta = json.loads(self.meta_path.read_text())
                if (meta.get("dim") != dim or meta.get("model") != model
                        or meta.get("backend") != backend
                        or float(meta.get("created_at") or 0.0) != created_at):
                    log.warning("vector file of collection %r is of another collection or model; rebuilding", name)
                    return None
                if self.hnsw_path.stat().st_size != meta.get("hnsw_size"):
                    log.warning("vector file of collection %r does not match its metadata (an interrupted save?); "
                                "rebuilding", name)
                    return None
                index = hnswlib.Index(space=SPACE, dim=dim)
                index.load_index(str(self.hnsw_path), max_elements=0)
            labels = np.asarray(index.get_ids_list(), dtype=np.int64)
            deleted = np.asarray(meta.get("deleted") or [], dtype=np.int64)
            if (index.dim != dim or len(labels) != int(meta.get("elements", -1))
                    or len(labels) - len(deleted) != int(meta.get("count", -1))
                    or not np.isin(deleted, labels).all()):
                log.warning("vector file of collection %r is inconsistent; rebuilding", name)
                return None
            return index, meta, labels, deleted
        except Exception as exc:  # hnswlib raises RuntimeError on a truncated or foreign file
            log.warning("vector file of collection %r is unreadable (%s); rebuilding", name, exc)
            return None

    def write(self, index: hnswlib.Index, meta: dict[str, Any]) -> None:
        """Write ``index`` and ``meta`` (to which the .hnsw's size and the time are added) under temporary names,
        then rename them into place, the json last, holding the exclusive file lock."""
        token = f"{os.getpid()}.{threading.get_ident()}"
        tmp_hnsw = self.directory / f"{self.collection_id}.hnsw.{token}.tmp"
        tmp_meta = self.directory / f"{self.collection_id}.json.{token}.tmp"
        try:
            with _file_lock(self.lock_path, exclusive=True):
                self._remove_leftovers()
                index.save_index(str(tmp_hnsw))
                meta = {**meta, "hnsw_size": tmp_hnsw.stat().st_size, "saved_at": time.time()}
                tmp_meta.write_text(json.dumps(meta))
                os.replace(tmp_hnsw, self.hnsw_path)
                os.replace(tmp_meta, self.meta_path)
        finally:
            for tmp in (tmp_hnsw, tmp_meta):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()

    def _remove_leftovers(self) -> None:
        """Temporary files of a writer that died mid-write (a writer holds the exclusive lock while its own exist,
        so any found under the lock are left over)."""
        for pattern in (f"{self.collection_id}.hnsw.*.tmp", f"{self.collection_id}.json.*.tmp"):
            for left in self.directory.glob(pattern):
                log.info("removing %s, left by a save that did not finish", left.name)
                with contextlib.suppress(FileNotFoundError):
                    left.unlink()

    def remove(self) -> None:
        """Delete the files (those that exist)."""
        for suffix in SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{self.collection_id}{suffix}").unlink()
