"""The text engine's index: a directory of immutable segments and a manifest, kept in step with the store.

Files in the directory the caller names (one per store; flows.documents.paths.text_index_dir):

- ``seg-<n>-<random>.tx``: segments (store.textindex.segment), each written whole and renamed into place;
- ``manifest.json``: the live segments, the documents deleted from each (tombstones), the last change of the
  store's log applied (``applied``), the numbers skipped below it whose changes may still commit (``holes``:
  PostgreSQL's writers commit out of order, store.textindex.changes) and the entries changed but not indexed yet
  (``queued``); written atomically;
- ``writer.lock``: held (flock) by the one process that writes the index. Any other process reads it: it reloads
  the manifest when it changes and treats entries changed in the store after ``applied`` as not searchable yet.

The store is the source of truth. Catching up (``sync``) reads the change log after ``applied``: each changed entry
leaves the index at once (its document is tombstoned) and is queued; queued entries are read back from the store and
indexed, a few thousand documents per segment. A search calls ``sync`` with a small budget, so a document written a
moment ago is found; what is still queued is reported as pending by the caller. A manifest or segment that cannot
be read, or a store whose log went back (a restored backup), makes the index rebuild itself from the store.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from store.textindex import changes, source
from store.textindex.segment import CorruptSegment, DocIn, Segment, SegmentBuilder, write_atomically

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS: one process per index
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
LOCK = "writer.lock"
FORMAT = 1
FLUSH_BYTES = 48_000_000  # text per segment written by a catch-up
SEARCH_BUDGET = 50  # queued documents a search indexes itself before it answers (the background thread the rest)
MAX_SEGMENTS = 16  # more than this, and the smallest are merged ...
MERGE_CAP = 256 * 1024 * 1024  # ... into one of at most this many bytes of text: a merge is built in memory, and
# uncapped merges of ever larger segments held gigabytes at 100,000 documents (beyond the cap, segments add up)
POLL_SECONDS = 0.5
RETIRE_SECONDS = 60.0  # a replaced segment file stays this long for the searches that still name it
HOLD_SECONDS = 10.0  # the background thread writes what it has read at least this often
WAIT_SECONDS = 5.0  # a search waits this long at most for the background thread to finish the last few documents


@dataclass(frozen=True)
class Snapshot:
    """What a search reads: the live segments, each one's tombstoned documents, and the entries not searchable yet
    (changed in the store, not indexed again)."""

    segments: tuple[Segment, ...] = ()
    deleted: dict[str, frozenset[int]] = field(default_factory=dict)
    queued: frozenset[int] = frozenset()
    generation: int = 0


class TextIndex:
    """One store's text index in ``directory``. ``writer`` None: write when this process can take the lock."""

    def __init__(self, directory: Path, engine: Engine) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        self._lock = threading.RLock()  # the manifest, the open segments, the snapshot: held briefly
        self._indexing = threading.Lock()  # one thread indexes queued documents at a time
        self._lock_fd: int | None = None
        self._segments: dict[str, Segment] = {}
        self._manifest: dict[str, Any] = {}
        self._manifest_stamp: tuple[int, int] | None = None
        self._where: dict[int, tuple[str, int]] = {}  # entry id -> (segment, document index) of its live version
        self._snapshot = Snapshot()
        self._generation = 0
        self._retired: dict[str, float] = {}  # segment files out of the manifest -> since when
        # the background thread's builder between rounds: (builder, entry -> change read for, since when)
        self._held: tuple[SegmentBuilder, dict[int, int], float] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._load()

    # --- state ----------------------------------------------------------------------------------------------

    @property
    def writer(self) -> bool:
        if self._lock_fd is not None:
            return True
        if fcntl is None:
            return True
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        self._load()  # the last writer may have left more than this process saw
        return True

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.dir / MANIFEST)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def _load(self) -> None:
        """Read the manifest and open its segments; an unreadable one (or none, in a writer) means a rebuild."""
        with self._lock:
            stamp = self._stamp()
            manifest: dict[str, Any] | None = None
            segments: dict[str, Segment] = {}
            if stamp is not None:
                try:
                    manifest = json.loads((self.dir / MANIFEST).read_text())
                    if manifest.get("format") != FORMAT:
                        raise ValueError(f"format {manifest.get('format')}")
                    for item in manifest["segments"]:
                        name = item["name"]
                        segments[name] = self._segments.get(name) or Segment(self.dir / name)
                except (OSError, ValueError, KeyError, TypeError, CorruptSegment) as exc:
                    log.warning("the text index in %s cannot be read (%s): it is rebuilt from the store", self.dir,
                                exc)
                    manifest = None
            if manifest is None:
                manifest = {"format": FORMAT, "applied": 0, "queued": [], "segments": [], "next": 1,
                            "rebuild": True}
                segments = {}
            self._manifest, self._segments, self._manifest_stamp = manifest, segments, stamp
            self._where = {}
            for item in manifest["segments"]:
                seg = segments[item["name"]]
                gone = set(item.get("deleted", ()))
                for k, doc in enumerate(seg.docs):
                    if k not in gone:
                        self._where[doc.entry_id] = (item["name"], k)
            self._publish(frozenset(self._queued()))

    def _publish(self, queued: frozenset[int]) -> None:
        self._generation += 1
        names = [item["name"] for item in self._manifest["segments"]]
        self._snapshot = Snapshot(
            segments=tuple(self._segments[n] for n in names),
            deleted={item["name"]: frozenset(item.get("deleted", ())) for item in self._manifest["segments"]},
            queued=queued, generation=self._generation)

    def _save(self) -> None:
        """Write the manifest atomically (a full disk: NoSpace naming the folder; the last manifest stays)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self._manifest, separators=(",", ":")).encode()
        write_atomically(self.dir / MANIFEST, lambda f: f.write(data), sync=False)
        self._manifest_stamp = self._stamp()

    # --- catching up ----------------------------------------------------------------------------------------

    def snapshot(self, budget: int | None = SEARCH_BUDGET) -> Snapshot:
        """The index as a search should read it now: caught up with the store's log, with at most ``budget``
        queued documents indexed first (None: all of them). While another thread is indexing, the queued ones
        are left to it (they stay in ``queued``)."""
        return self.sync(budget, wait=False)

    def sync(self, budget: int | None = None, *, wait: bool = True, hold: bool = False) -> Snapshot:
        """Apply the store's changes since the last sync, then index up to ``budget`` queued documents (None: all;
        ``wait`` False: not when another thread is indexing already; ``hold``: the background thread's batching,
        see :meth:`_index_queued`)."""
        with self._lock:
            if not self.writer:
                return self._follow()
            if self._stamp() != self._manifest_stamp:  # the files were removed or replaced under us: read again
                self._load()
            if self._manifest.get("rebuild") or source.last_change(self.engine) < self._manifest["applied"]:
                self._rebuild()
            self._apply_changes()
        queued = len(self._manifest["queued"])
        # a search waits for the background thread (up to a few seconds) when what is left fits its own budget: the
        # writers are done and the thread is finishing, so the text written a moment ago is found; during a bulk
        # extraction (more queued) it does not wait, and the rest counts as pending
        short = budget is not None and 0 < queued <= budget
        if budget != 0 and (queued or self._held) and (
                self._indexing.acquire() if wait else self._indexing.acquire(timeout=WAIT_SECONDS) if short
                else self._indexing.acquire(blocking=False)):
            try:
                self._index_queued(budget, hold=hold)
            finally:
                self._indexing.release()
        return self._snapshot

    def _segment_name(self) -> str:
        """A new segment's file name: numbered, and never a name an earlier index in this directory used (a
        reader may still hold a file of that name open)."""
        return f"seg-{self._manifest['next']:06d}-{secrets.token_hex(4)}.tx"

    def _queued(self) -> dict[int, int]:
        """Entry id -> the change number that queued it."""
        return {int(e): int(v) for e, v in self._manifest["queued"]}

    def _follow(self) -> Snapshot:
        """A reader: the writer's manifest, and what changed in the store after it, as not searchable yet."""
        if self._stamp() != self._manifest_stamp:
            self._load()
        if self._manifest.get("rebuild"):  # no index written yet: everything searchable is pending
            queued = set(source.searchable_entries(self.engine))
        else:
            queued = set(self._queued())
        holes = sorted(changes.holes_of(self._manifest))
        changed = {e for _, e in source.changes_after(self.engine, self._manifest["applied"])}
        changed |= {e for _, e in changes.changes_at(self.engine, holes)} if holes else set()
        queued |= changed
        if queued != set(self._snapshot.queued):
            # what changed after the writer's last sync is not searchable here until it has indexed it again: its
            # old version is left out as the writer would have tombstoned it
            deleted = {item["name"]: set(item.get("deleted", ())) for item in self._manifest["segments"]}
            for entry in changed:
                where = self._where.get(entry)
                if where is not None:
                    deleted[where[0]].add(where[1])
            self._generation += 1
            self._snapshot = Snapshot(self._snapshot.segments, {n: frozenset(d) for n, d in deleted.items()},
                                      frozenset(queued), self._generation)
        return self._snapshot

    def _rebuild(self) -> None:
        applied = source.last_change(self.engine)  # read first: a write after it is in the log as well
        queued = source.searchable_entries(self.engine)
        log.info("text index: rebuilding %s from the store (%d documents)", self.dir, len(queued))
        old = set(self._segments)
        self._manifest = {"format": FORMAT, "applied": applied, "queued": [[e, applied] for e in queued],
                          "segments": [], "next": self._manifest.get("next", 1),
                          "holes": changes.as_manifest(changes.holes_below(self.engine, applied, time.time()))}
        self._segments, self._where = {}, {}
        self._save()
        self._remove_files(old)
        self._publish(frozenset(queued))

    def _apply_changes(self) -> None:
        """Tombstone and queue the entries of the changes after the last applied, and of changes that committed
        late into a hole below it (store.textindex.changes): those are queued under the version ``-seq``, which no
        read made before they committed has, so the entry is read again even if it was just read for a later one."""
        caught = changes.catch_up(self.engine, self._manifest["applied"], changes.holes_of(self._manifest),
                                  time.time())
        if not caught.moved:
            return
        queued = self._queued()
        by_name = {item["name"]: item for item in self._manifest["segments"]}
        for version, entry_id in [(-seq, e) for seq, e in caught.late] + caught.changes:
            where = self._where.pop(entry_id, None)
            if where is not None:
                item = by_name[where[0]]
                item["deleted"] = sorted(set(item.get("deleted", ())) | {where[1]})
            queued[entry_id] = version
        self._manifest["applied"] = caught.applied
        self._manifest["holes"] = changes.as_manifest(caught.holes)
        self._manifest["queued"] = sorted([e, v] for e, v in queued.items())
        self._save()
        self._publish(frozenset(queued))

    def _index_queued(self, budget: int | None, *, hold: bool = False) -> None:
        """Read queued documents from the store and write them as segments (no lock held while reading and
        tokenising: searches go on; the manifest changes under the lock at each flush).

        ``hold`` (the background thread): what is read is kept in one builder across rounds and written when it
        reaches FLUSH_BYTES, when a round finds nothing new to read (the writers have paused), or after
        HOLD_SECONDS, so a bulk extraction makes a few large segments rather than one per round; documents held are
        still queued (searches count them pending) and a search does not index them again."""
        if not hold and self._held is not None:  # a search or a full sync: what the background holds is written now
            held, self._held = self._held, None
            self._flush(held[0], held[1])
        with self._lock:
            take = [(e, v) for e, v in sorted(self._queued().items())
                    if self._held is None or self._held[1].get(e) != v]
        if budget is not None:
            take = take[:budget]
        if hold and self._held is not None:
            builder, done, since = self._held
        else:
            builder, done, since = SegmentBuilder(), {}, time.monotonic()
        for i in range(0, len(take), source.CHUNK):
            part = dict(take[i:i + source.CHUNK])
            for doc in source.read_documents(self.engine, part, 0):
                doc.version = part[doc.entry_id]
                builder.add(doc)
            done.update(part)
            if builder.text_bytes >= FLUSH_BYTES:
                self._flush(builder, done)
                builder, done, since = SegmentBuilder(), {}, time.monotonic()
            if self._stop.is_set():
                break
        if hold and take and builder.text_bytes < FLUSH_BYTES and time.monotonic() - since < HOLD_SECONDS:
            self._held = (builder, done, since)
            return
        self._held = None if hold else self._held
        self._flush(builder, done)

    def _flush(self, builder: SegmentBuilder, done: dict[int, int]) -> None:
        """Write what ``builder`` holds as a segment and take the entries of ``done`` (entry -> the change it was
        read for) off the queue, in one manifest write. An entry changed again since it was read stays queued,
        and the version just written is tombstoned at once.

        A builder the background thread held across rounds may hold an entry twice, or once in a version that is
        no longer its current one: read for an earlier change, then read again for a later change (its new text,
        or nothing when its document was deleted). Only the document read for the change in ``done`` is live;
        any other is tombstoned with the rest."""
        if not done and not len(builder):
            return
        name = self._segment_name()
        if len(builder):
            builder.write(self.dir / name)
        with self._lock:
            queued = self._queued()
            finished = {e for e, v in done.items() if queued.get(e) == v}
            if len(builder):
                self._manifest["next"] += 1
                seg = Segment(self.dir / name)
                self._segments[name] = seg
                live = {doc.entry_id: k for k, doc in enumerate(seg.docs)
                        if doc.entry_id in finished and doc.version == done[doc.entry_id]}
                stale = [k for k, doc in enumerate(seg.docs) if live.get(doc.entry_id) != k]
                self._manifest["segments"].append({"name": name, "deleted": stale})
                for entry_id, k in live.items():
                    self._where[entry_id] = (name, k)
            for e in finished:
                queued.pop(e, None)
            self._manifest["queued"] = sorted([e, v] for e, v in queued.items())
            self._save()
            self._publish(frozenset(queued))

    # --- merging --------------------------------------------------------------------------------------------

    def _smallest(self, items: list[dict[str, Any]], want: int, *, exclude: set[str]) -> list[str]:
        """Up to ``want`` of the smallest segments whose text together stays within MERGE_CAP; none unless two."""
        chosen: list[str] = []
        total = 0
        for it in sorted(items, key=lambda it: self._segments[it["name"]].text_bytes):
            size = self._segments[it["name"]].text_bytes
            if len(chosen) >= want or total + size > MERGE_CAP:
                break
            if it["name"] not in exclude:
                chosen.append(it["name"])
                total += size
        return chosen if len(chosen) >= 2 else []

    def merge(self, max_segments: int = MAX_SEGMENTS) -> bool:
        """Merge the smallest segments into one when there are more than ``max_segments``, and rewrite a segment
        more than half of whose lines are deleted; returns whether anything changed. Writer only; searches go on
        reading the old segments until the new one replaces them."""
        if not self.writer:
            return False
        with self._indexing:
            with self._lock:
                items = self._manifest["segments"]
                pick = [it["name"] for it in items
                        if 2 * sum(self._segments[it["name"]].docs[k].count for k in it.get("deleted", ()))
                        > max(1, self._segments[it["name"]].lines)]
                if len(items) > max_segments:
                    pick += self._smallest(items, len(items) - max_segments + 1, exclude=set(pick))
                if not pick:
                    return False
                sources = [(n, self._segments[n], set(next(it for it in items if it["name"] == n)["deleted"]))
                           for n in pick]
                name = self._segment_name()
                self._manifest["next"] += 1
            builder = SegmentBuilder()
            origin: list[tuple[str, int]] = []
            for seg_name, seg, gone in sources:
                for k, doc in enumerate(seg.docs):
                    if k not in gone:
                        builder.add(DocIn(doc.entry_id, doc.version, doc.path, doc.format, runs=seg.runs_of(k),
                                          text=seg.doc_text(k)))
                        origin.append((seg_name, k))
                seg.release()
            if len(builder):
                builder.write(self.dir / name)
            with self._lock:
                picked = set(pick)
                self._manifest["segments"] = [it for it in self._manifest["segments"] if it["name"] not in picked]
                if len(builder):
                    merged = Segment(self.dir / name)
                    self._segments[name] = merged
                    live = [self._where.get(doc.entry_id) == origin[k] for k, doc in enumerate(merged.docs)]
                    self._manifest["segments"].append(
                        {"name": name, "deleted": [k for k, ok in enumerate(live) if not ok]})
                    for k, doc in enumerate(merged.docs):
                        if live[k]:
                            self._where[doc.entry_id] = (name, k)
                for n in picked:
                    self._segments.pop(n, None)
                self._save()
                self._publish(frozenset(self._queued()))
                self._remove_files(picked)
            return True

    def _remove_files(self, names: set[str]) -> None:
        """Retire the files of segments no longer in the manifest: deleted a while later (RETIRE_SECONDS), since a
        search that took a snapshot before may still open them by name (search_multiple's workers do); segment
        files a crash left out of the manifest go the same way."""
        now = time.monotonic()
        for name in names:
            self._retired.setdefault(name, now)
        for path in self.dir.glob("seg-*.tx*"):
            if path.name not in self._segments:
                self._retired.setdefault(path.name, now)
        for name, since in list(self._retired.items()):
            if name in self._segments:
                del self._retired[name]
            elif now - since >= RETIRE_SECONDS:
                (self.dir / name).unlink(missing_ok=True)
                del self._retired[name]

    # --- in the background ----------------------------------------------------------------------------------

    def start(self, interval: float = POLL_SECONDS) -> None:
        """Keep the index caught up from a daemon thread (a server does; a one-off search syncs itself)."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.sync(budget=None, hold=True)
                    if not self.merge() and self._retired and self.writer:
                        with self._lock:
                            self._remove_files(set())
                except Exception:  # the store or the disk failed this round: logged, tried again
                    log.exception("text index: catching up failed")

        self._thread = threading.Thread(target=loop, name="textindex", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._held is not None and self.writer:
            with self._indexing:
                held, self._held = self._held, None
                if held is not None:
                    self._flush(held[0], held[1])
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def live_entries(self) -> set[int]:
        """The entries whose current version the index holds (searchable): once it has caught up, the store's
        searchable entries (``source.searchable_entries``)."""
        with self._lock:
            return set(self._where)

    def files_size(self) -> int:
        """Bytes of the index's files."""
        return sum(p.stat().st_size for p in self.dir.iterdir() if p.is_file())
