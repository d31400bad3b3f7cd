"""A resource as its file is now, and what a changed file does to its map (staleness).

Every call of the citation service looks at the file first (:func:`look`): unchanged when its size and mtime are the
recorded ones (no reading at all: the hot path of a virtual resolve is two indexed queries and two ``stat`` calls);
else its content hash decides. A file whose bytes did not change only gets its new mtime recorded. A file that
changed: a built map is rebuilt (the strategy it was built with) when a map is needed; an agent-supplied map is
marked stale (getStructure says so in ``metadata``; getNode and resolve refuse it with SOURCE_CHANGED unless
``allow_stale``, until it is supplied again); outputs resolved from the old version lose their artifact rows (the
cache sweep removes their files). Heavy work (hashing, probing, building) runs with no transaction open; the writes
that follow are short.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from flows.citations.maps import (BUILT, build_source, facts_of, hash_of, iso, metadata_of, probe_source, save_built,
                                  window_of)
from flows.citations.model import SourceFacts
from flows.documents.paths import DocumentPaths
from store import citations as store
from store.errors import CitationError, DocumentError

log = logging.getLogger(__name__)


@dataclass
class Source:
    """A resource as looked at now: its row (``store.citations.resource``), its file, facts and content hash."""

    row: dict[str, Any]
    path: str
    size: int
    mtime: float
    source_hash: str | None = None
    facts: SourceFacts | None = None

    @property
    def resource_id(self) -> str:
        return self.row["resource_id"]

    @property
    def modality(self) -> str:
        return self.row["kind"]

    @property
    def stale(self) -> bool:
        """An agent map whose file changed since it was supplied (a built one is rebuilt instead)."""
        return bool(self.row["stale"]) and self.row["origin"] == "agent"

    @property
    def origin(self) -> str:
        return self.row["origin"]

    @property
    def content_hash(self) -> str:
        """The file's content hash: :func:`look` always knows it (None only while it makes the Source)."""
        if self.source_hash is None:
            raise RuntimeError(f"{self.resource_id}: the content hash of its file is not known yet")
        return self.source_hash

    @property
    def needed_facts(self) -> SourceFacts:
        """The file's facts, which :func:`look` fills when asked for them (``need_facts``)."""
        if self.facts is None:
            raise RuntimeError(f"{self.resource_id}: its facts were used but not asked for (look's need_facts)")
        return self.facts


def look(engine: Engine, paths: DocumentPaths, row: dict[str, Any], resource_id: str, *, need_map: bool,
         need_facts: bool = False, fresh: bool = False) -> Source:
    """The resource of ``row`` (named ``resource_id`` by the caller) as its file is now (see the module docstring):
    staleness noticed and acted upon; a map built (auto) when ``need_map`` and it has none (or rebuilt when marked
    for it); facts filled when asked for; the content hash always known. ``fresh``: the caller replaces the map, so
    a changed file is only recorded."""
    path = row["path"]
    try:
        confined = paths.resolve(path, field="resource_id")
    except DocumentError:
        raise CitationError("INVALID_PATH", f"resource {resource_id!r}: its file {path} is outside the roots "
                            "this server may read", field="resource_id") from None
    try:
        st = os.stat(confined)
    except OSError:
        raise CitationError("RESOURCE_NOT_FOUND", f"resource {resource_id!r}: its file {path} is gone",
                            field="resource_id") from None
    if not stat.S_ISREG(st.st_mode):
        raise CitationError("INVALID_PATH", f"resource {resource_id!r}: {path} is not a file anymore",
                            field="resource_id")
    source = Source(row=row, path=confined, size=st.st_size, mtime=st.st_mtime, source_hash=row["source_hash"],
                    facts=facts_of(row["kind"], row["metadata_json"]))
    unchanged = (row["source_size"] == st.st_size and row["source_mtime"] == st.st_mtime
                 and row["source_hash"] is not None)
    if not unchanged:
        _changed(engine, source, need_map=need_map, fresh=fresh)
    if need_map and (source.origin == "none" or (source.origin in BUILT and source.row["stale"])):
        build(engine, source, strategy=source.row["strategy"] or "auto", window=window_of(row["metadata_json"]),
              rebuild=source.origin != "none")
    if need_facts and source.facts is None:
        source.facts = probe_source(engine, row["entry_id"], source.path, source.modality, source.size,
                                    source.mtime)
        with engine.begin() as conn:
            store.update_source(conn, row["id"], size=source.size, mtime=source.mtime,
                                metadata={**json.loads(row["metadata_json"] or "{}"),
                                          **metadata_of(source.facts)})
    return source


def _changed(engine: Engine, source: Source, *, need_map: bool, fresh: bool) -> None:
    """The file's size or mtime is not the recorded one (or nothing is recorded): its content hash decides. A
    built map whose file changed is rebuilt now when a map is needed, else marked for a rebuild on its next use
    (``stale`` on a built map); an agent map is marked stale."""
    row = source.row
    digest = hash_of(source.path)
    if digest == row["source_hash"]:  # touched, same bytes: only the new state is recorded
        with engine.begin() as conn:
            store.update_source(conn, row["id"], size=source.size, mtime=source.mtime)
        source.row = {**row, "source_size": source.size, "source_mtime": source.mtime}
        return
    source.source_hash = digest
    origin = row["origin"]
    if origin in BUILT and need_map and not fresh:
        log.info("%s changed since its map was built: rebuilding it", row["resource_id"])
        build(engine, source, strategy=row["strategy"] or "auto", window=window_of(row["metadata_json"]),
              rebuild=True)
        return
    source.facts = probe_source(engine, row["entry_id"], source.path, source.modality, source.size, source.mtime)
    stale = origin != "none" and not fresh
    with engine.begin() as conn:
        store.update_source(conn, row["id"], size=source.size, mtime=source.mtime, source_hash=digest,
                            metadata=metadata_of(source.facts, window_of(row["metadata_json"])),
                            stale=stale if not fresh else None)
        if row["entry_id"] is not None:
            store.drop_old_extracts(conn, row["entry_id"], digest)
    if stale and origin == "agent":
        log.info("%s changed since its map was supplied: the map is stale until supplied again",
                 row["resource_id"])
    source.row = {**row, "source_size": source.size, "source_mtime": source.mtime, "source_hash": digest,
                  "stale": 1 if stale else row["stale"]}


def build(engine: Engine, source: Source, *, strategy: str, window: float | None, rebuild: bool = False) -> None:
    """Build the map and store it. A ``rebuild`` (the file changed) whose strategy no longer applies (the new
    version has no outline) falls back to auto."""
    row = source.row
    if source.source_hash is None:
        source.source_hash = hash_of(source.path)
    try:
        built = build_source(engine, row["entry_id"], source.path, source.modality, source.size, source.mtime,
                             strategy=strategy, window=window)
    except CitationError as exc:
        if not rebuild or strategy == "auto" or exc.code != "UNSUPPORTED_FORMAT":
            raise
        log.info("%s: rebuilding with %s failed (%s); built with auto instead", row["resource_id"], strategy,
                 exc.message)
        strategy = "auto"
        built = build_source(engine, row["entry_id"], source.path, source.modality, source.size, source.mtime,
                             strategy=strategy, window=window)
    created = save_built(engine, row["id"], built, strategy=strategy, window=window, size=source.size,
                         mtime=source.mtime, source_hash=source.source_hash, entry_id=row["entry_id"])
    log.info("map of %s built (%s): %d top-level nodes", row["resource_id"], built.origin, len(built.nodes))
    source.facts = built.facts
    source.row = {**row, "origin": built.origin, "title": built.title, "strategy": strategy, "stale": 0,
                  "source_size": source.size, "source_mtime": source.mtime,
                  "source_hash": source.source_hash, "created_at": created, "updated_at": created,
                  "metadata_json": json.dumps(metadata_of(built.facts, window), default=str)}


def refuse_stale(source: Source, paths: DocumentPaths, allow_stale: bool) -> None:
    """CitationError SOURCE_CHANGED for an agent map whose file changed since it was supplied, unless
    ``allow_stale``."""
    if source.stale and not allow_stale:
        raise CitationError("SOURCE_CHANGED", f"{source.resource_id} ({paths.display(source.path)}) "
                            f"changed since its map was supplied at {iso(source.row['created_at'])}; supply "
                            "it again with map-put, or pass allow_stale to resolve (getStructure shows the "
                            "stale map)", field="resource_id",
                            details={"resource_id": source.resource_id, "source_hash": source.source_hash})
