"""db-diagnose and session-info: where the store is, how big, what it holds, and whether it is sound.

Every count is an SQL aggregate. Checks that only SQLite has (``PRAGMA integrity_check``, journal mode) are skipped on
other backends, and the result says so.

The store keeps a few counters beside the rows they count (a folder's size, the sum of its children's; a
collection entry's chunk count; a document's line count, the sum of its segments'); :func:`counter_mismatches` checks
each against its rows, so an interrupted write that left one behind is reported. Segments of a document whose
documents row was never written (a large extraction spans several transactions, the row last) are counted apart:
they are an extraction in progress, or one a crash interrupted, which extracting the entry again replaces.
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
from typing import Any

from sqlalchemy import Table, and_, exists, func, inspect, or_, select, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from store.engine import database_file, is_sqlite
from store.entries import T, subtree_clause
from store.models import (Chunk, CollectionEntry, Document, DocumentSegment, Embedding, Job, Plan, ResourceSet,
                          SavedQuery, Source)

log = logging.getLogger(__name__)

STALE_AFTER_SECONDS = 7 * 24 * 3600  # an entry no index scan has seen for this long is reported as stale
_INTEGRITY_LINES = 10
_BATCH = 500


def database_location(engine: Engine) -> str:
    """The SQLite file, or the URL of any other store with its password masked."""
    path = database_file(engine)
    if path is not None:
        return str(path)
    if is_sqlite(engine):
        return ":memory:"
    return masked_url(engine)


def masked_url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def database_size(engine: Engine) -> int | None:
    """Bytes on disk: the SQLite file plus its WAL, or PostgreSQL's pg_database_size; None if unknown."""
    path = database_file(engine)
    if path is not None:
        return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.exists(p))
    with engine.connect() as conn:
        if is_sqlite(engine):  # in memory
            pages = conn.execute(text("PRAGMA page_count")).scalar_one()
            return int(pages * conn.execute(text("PRAGMA page_size")).scalar_one())
        if conn.dialect.name == "postgresql":
            return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    return None


def _count(conn: Connection, table: Table) -> int:
    return conn.execute(select(func.count()).select_from(table)).scalar_one()


def store_counts(engine: Engine) -> dict[str, int]:
    """The counts session-info and db-diagnose report."""
    with engine.connect() as conn:
        return {
            "entry_count": _count(conn, T),
            "resource_set_count": _count(conn, ResourceSet.__table__),
            "source_count": _count(conn, Source.__table__),
            "plan_count": _count(conn, Plan.__table__),
            "saved_query_count": _count(conn, SavedQuery.__table__),
        }


def entry_kinds(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {kind: n for kind, n in conn.execute(select(T.c.kind, func.count()).group_by(T.c.kind))}


def integrity_check(engine: Engine) -> str:
    """``ok``, the first problems SQLite reports, or why the check was skipped."""
    if not is_sqlite(engine):
        return (f"skipped: PRAGMA integrity_check is SQLite-only ({engine.dialect.name} checks its own pages; "
                "use its tools, e.g. PostgreSQL's amcheck, for a deep check)")
    with engine.connect() as conn:
        lines = [r[0] for r in conn.execute(text(f"PRAGMA integrity_check({_INTEGRITY_LINES})"))]
    return "ok" if lines == ["ok"] else "; ".join(lines)


def journal_mode(engine: Engine) -> str | None:
    if not is_sqlite(engine):
        return None
    with engine.connect() as conn:
        mode: str = conn.execute(text("PRAGMA journal_mode")).scalar_one()
        return mode


def orphaned_entries(engine: Engine) -> int:
    """Entries whose parent directory is missing from the store while a directory above them is indexed: holes in an
    indexed tree. (The top entry of each indexed tree has no stored parent by design and is not counted.)"""
    parent = T.alias("p")
    missing_parent = and_(T.c.parent.is_not(None), ~exists().where(parent.c.path == T.c.parent))
    count = 0
    with engine.connect() as conn, engine.connect() as probe:
        result = conn.execution_options(yield_per=_BATCH).execute(select(T.c.path).where(missing_parent))
        for rows in result.partitions(_BATCH):
            for (path,) in rows:
                above = _ancestors(posixpath.dirname(posixpath.dirname(path)))
                if above and probe.execute(
                    select(T.c.id).where(T.c.path.in_(above), T.c.kind == "directory").limit(1)
                ).first():
                    count += 1
    return count


def _ancestors(path: str) -> list[str]:
    out = []
    while path and path != "/":
        out.append(path)
        path = posixpath.dirname(path)
    return out + (["/"] if path == "/" else [])


def orphaned_records(engine: Engine) -> dict[str, int]:
    """Rows whose foreign key points at nothing, per ``table.column`` (only non-zero counts). The schema's
    ON DELETE CASCADE prevents these unless foreign keys were off when rows were deleted."""
    found: dict[str, int] = {}
    with engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            for fk in table.foreign_keys:
                target = fk.column
                dangling = select(func.count()).select_from(table).where(
                    fk.parent.is_not(None), ~exists().where(target == fk.parent))
                n = conn.execute(dangling).scalar_one()
                if n:
                    found[f"{table.name}.{fk.parent.name}"] = n
    return found


def counter_mismatches(engine: Engine) -> dict[str, int]:
    """Rows whose stored counter differs from the rows it counts, per ``table.column`` (only non-zero counts):
    ``entries.size`` (folders: the sum of their children's sizes), ``collection_entries.chunk_count`` (its chunks),
    ``chunks.embedding`` (chunks without their vector), ``documents.lines`` (the sum of its segments' lines)."""
    child, K, CE, V = T.alias("child"), Chunk.__table__, CollectionEntry.__table__, Embedding.__table__
    D, S = Document.__table__, DocumentSegment.__table__
    children = select(func.coalesce(func.sum(child.c.size), 0)).where(child.c.parent == T.c.path).scalar_subquery()
    chunks = select(func.count()).select_from(K).where(
        K.c.collection_id == CE.c.collection_id, K.c.entry_id == CE.c.entry_id).scalar_subquery()
    lines = select(func.coalesce(func.sum(S.c.line_count), 0)).where(S.c.entry_id == D.c.entry_id).scalar_subquery()
    checks = {
        "entries.size": select(func.count()).select_from(T).where(T.c.kind == "directory", T.c.size != children),
        "collection_entries.chunk_count": select(func.count()).select_from(CE).where(CE.c.chunk_count != chunks),
        "chunks.embedding": select(func.count()).select_from(K).where(~exists().where(V.c.chunk_id == K.c.id)),
        "documents.lines": select(func.count()).select_from(D).where(D.c.lines != lines),
    }
    found: dict[str, int] = {}
    with engine.connect() as conn:
        for name, stmt in checks.items():
            n = conn.execute(stmt).scalar_one()
            if n:
                found[name] = n
    return found


def unfinished_documents(engine: Engine) -> int:
    """Entries holding text segments but no documents row: an extraction in progress, or one a crash interrupted
    (extracting the entry again replaces its segments)."""
    D, S = Document.__table__, DocumentSegment.__table__
    with engine.connect() as conn:
        return conn.execute(select(func.count(func.distinct(S.c.entry_id))).where(
            ~exists().where(D.c.entry_id == S.c.entry_id))).scalar_one()


_COUNTER_ADVICE = {
    "entries.size": "folder(s) whose size is not the sum of their children's; re-index them",
    "collection_entries.chunk_count": "collection entries whose chunk count differs from their chunks; "
                                      "update_index re-embeds them",
    "chunks.embedding": "chunk(s) without their vector; update_index re-embeds their entries",
    "documents.lines": "document(s) whose line count differs from their text segments; extract them again",
}


def stale_entries(engine: Engine, *, older_than: float = STALE_AFTER_SECONDS, now: float | None = None) -> int:
    """Entries no index scan has seen for ``older_than`` seconds (re-index their folders to refresh them).

    A re-scan does not rewrite an unchanged entry, so its ``indexed_at`` stays old: an entry counts as seen when an
    index job of it or of a folder above it completed within the window."""
    cutoff = (time.time() if now is None else now) - older_than
    jobs = Job.__table__
    with engine.connect() as conn:
        recent = sorted(set(conn.scalars(select(jobs.c.root).where(
            jobs.c.kind == "index", jobs.c.status == "completed", jobs.c.completed_at >= cutoff))))
        tops: list[str] = []  # the recent roots not under another recent root
        for root in recent:
            if not any(root == t or root.startswith(t.rstrip("/") + "/") for t in tops):
                tops.append(root)
        where = [T.c.indexed_at < cutoff]
        if len(tops) > _BATCH:
            return 0  # too many recent scans to express in one statement: say nothing rather than overcount
        if tops:
            where.append(~or_(*(subtree_clause(t) for t in tops)))
        return conn.execute(select(func.count()).select_from(T).where(*where)).scalar_one()


def schema_problems(engine: Engine) -> list[str]:
    """Tables or columns the code expects that the database lacks (an old store, or one made by another version)."""
    insp = inspect(engine)
    present = set(insp.get_table_names())
    problems = []
    for table in SQLModel.metadata.sorted_tables:
        if table.name not in present:
            problems.append(f"missing table {table.name}")
            continue
        have = {c["name"] for c in insp.get_columns(table.name)}
        problems.extend(f"missing column {table.name}.{c.name}" for c in table.columns if c.name not in have)
    return problems


def artifact_cache_report(*, orphan_files: int, orphan_bytes: int, missing_files: int,
                          orphan_samples: list[str], missing_samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The artifact cache's part of db-diagnose, as the caller measured it (the store does not walk the cache:
    ``flows.classify.sweep`` does, and the tool passes the figures in)."""
    return {"orphan_files": orphan_files, "orphan_bytes": orphan_bytes, "missing_files": missing_files,
            "orphan_samples": orphan_samples[:20], "missing_samples": missing_samples[:20]}


def diagnose(engine: Engine, *, artifact_cache: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything db-diagnose reports: reference 000's fields first, then the checks behind them. ``artifact_cache``
    (from :func:`artifact_cache_report`) adds the classifier cache's orphan files and artifact rows whose file is
    missing."""
    counts = store_counts(engine)
    integrity = integrity_check(engine)
    orphans = orphaned_entries(engine)
    records = orphaned_records(engine)
    counters = counter_mismatches(engine)
    stale = stale_entries(engine)
    schema = schema_problems(engine)
    warnings = []
    if integrity != "ok" and not integrity.startswith("skipped"):
        warnings.append(f"integrity check failed: {integrity}")
    if orphans:
        warnings.append(f"{orphans} entries have no stored parent inside an indexed tree; re-index their folders")
    if records:
        warnings.append("rows point at deleted rows: " + ", ".join(f"{k} ({n})" for k, n in records.items()))
    warnings.extend(f"{n} {_COUNTER_ADVICE[name]}" for name, n in counters.items())
    if schema:
        warnings.append("schema differs from this version's: " + "; ".join(schema))
    if artifact_cache is not None and artifact_cache["orphan_files"]:
        warnings.append(f"{artifact_cache['orphan_files']} file(s) in the artifact cache belong to no artifact "
                        f"({artifact_cache['orphan_bytes']} bytes); the cache sweep removes them")
    if artifact_cache is not None and artifact_cache["missing_files"]:
        warnings.append(f"{artifact_cache['missing_files']} artifact row(s) point at a cache file that is gone; "
                        "rerun-classifier on their entries makes them again")
    skipped = [] if is_sqlite(engine) else ["integrity_check", "journal_mode"]
    result = {
        "database_path": database_location(engine),
        "database_size": database_size(engine),
        "integrity_check": integrity,
        **{k: counts[k] for k in ("entry_count", "resource_set_count")},
        "orphaned_entries": orphans,
        "stale_entries": stale,
        "stale_after_seconds": STALE_AFTER_SECONDS,
        "backend": engine.dialect.name,
        "journal_mode": journal_mode(engine),
        "entries_by_kind": entry_kinds(engine),
        **{k: counts[k] for k in ("source_count", "plan_count", "saved_query_count")},
        "orphaned_records": records,
        "counter_mismatches": counters,
        "unfinished_documents": unfinished_documents(engine),
        "schema_check": "ok" if not schema else "; ".join(schema),
        "skipped_checks": skipped,
        **({"artifact_cache": artifact_cache} if artifact_cache is not None else {}),
        "healthy": not warnings,
        "warnings": warnings,
    }
    log.info("db-diagnose: %s", {k: result[k] for k in ("entry_count", "orphaned_entries", "healthy")})
    return result
