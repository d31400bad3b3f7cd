"""The text index (store.textindex, one per store: flows.documents.text_index) as the operator tools see it: what
it holds, whether it agrees with the store, and rebuilding it.

The store is the truth and the engine rebuilds itself from it when its manifest is missing or unreadable (a writer
notices at its next catch-up that the manifest it wrote is gone; a reader counts everything pending until then). So
a rebuild removes the manifest and lets the engine do the rest: the segments it named are retired by the engine
(deleted a minute later, since a search in flight may still open them), the documents are queued and indexed again
from the store, by the server's background thread or, here, by one started for it. Only the index's own files are
touched.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy.engine import Engine

from flows.core.disk_usage import dir_usage
from flows.documents.text_index import text_index
from store.textindex import Snapshot
from store.textindex.index import MANIFEST
from store.textindex.segment import CorruptSegment, Segment
from store.textindex.source import entry_paths, searchable_entries

log = logging.getLogger(__name__)

SAMPLES = 20


def _live_entries(snap: Snapshot) -> set[int]:
    """The entries whose text the snapshot's segments hold, tombstoned versions left out."""
    live: set[int] = set()
    for seg in snap.segments:
        gone = snap.deleted.get(seg.name, frozenset())
        live.update(doc.entry_id for k, doc in enumerate(seg.docs) if k not in gone)
    return live


def text_index_status(engine: Engine) -> dict[str, Any]:
    """Where the index is, its files and bytes, the documents it holds and those pending (changed in the store, not
    indexed yet), and whether this process writes it. Catches up with the store's log first (indexes nothing)."""
    index = text_index(engine)
    snap = index.snapshot(0)
    return {"directory": str(index.dir), **dir_usage(index.dir).as_dict(), "segments": len(snap.segments),
            "documents": len(_live_entries(snap)), "pending": len(snap.queued), "writer": index.writer}


def check_text_index(engine: Engine) -> dict[str, Any]:
    """The index against the store: searchable documents it neither holds nor has queued (``missing``), documents
    it holds that the store no longer has searchable (``stale``), and segments whose files fail their checksums now
    (``corrupt_segments``); ``matches`` when there is none of these. Pending documents are not a mismatch: the engine
    is catching up."""
    index = text_index(engine)
    snap = index.snapshot(0)
    live = _live_entries(snap)
    searchable = set(searchable_entries(engine))
    missing = sorted(searchable - live - snap.queued)
    stale = sorted(live - searchable - snap.queued)
    corrupt = []
    for seg in snap.segments:
        try:
            Segment(seg.path).close()  # maps and checks the file as it is on disk now
        except CorruptSegment as exc:
            corrupt.append({"segment": seg.name, "problem": str(exc)})
    paths = entry_paths(engine, [*missing[:SAMPLES], *stale[:SAMPLES]])
    return {"directory": str(index.dir), "documents": len(live), "searchable": len(searchable),
            "pending": len(snap.queued), "missing": len(missing), "stale": len(stale),
            "missing_samples": [paths.get(e, f"entry {e}") for e in missing[:SAMPLES]],
            "stale_samples": [paths.get(e, f"entry {e}") for e in stale[:SAMPLES]],
            "corrupt_segments": corrupt, "matches": not (missing or stale or corrupt)}


def rebuild_text_index(engine: Engine, *, background: bool = True) -> dict[str, Any]:
    """Rebuild the index from the store: its manifest removed, the engine rebuilds (every searchable document
    queued again), and the documents are indexed in a daemon thread (``background``) or before this returns.
    Returns the segments retired (``files``, ``bytes``: deleted by the engine within a minute) and the documents
    queued (``pending``; get_memory_stats follows it down to 0)."""
    index = text_index(engine)
    before = {seg.name: seg.size() for seg in index.snapshot(0).segments}
    (index.dir / MANIFEST).unlink(missing_ok=True)
    snap = index.snapshot(0)
    if any(seg.name in before for seg in snap.segments):  # a flush rewrote the manifest meanwhile: once more
        (index.dir / MANIFEST).unlink(missing_ok=True)
        snap = index.snapshot(0)
    log.info("text index %s: rebuilding from the store (%d documents)", index.dir, len(snap.queued))
    if background:
        threading.Thread(target=_index_all, args=(engine,), name="textindex-rebuild", daemon=True).start()
    else:
        _index_all(engine)
    return {"directory": str(index.dir), "files": len(before), "bytes": sum(before.values()),
            "pending": len(snap.queued), "writer": index.writer}


def _index_all(engine: Engine) -> None:
    try:
        text_index(engine).sync(budget=None)
    except Exception:  # the store or the disk failed: the background thread (or the next search) goes on
        log.exception("text index: indexing after a rebuild failed")
