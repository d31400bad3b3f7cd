"""The SQL that selects a plan's entries: each source as a condition over the entries table, the candidates of all
sources as one condition (a union without duplicates), and the work key that makes a re-run on unchanged files do no
repeated work."""

from __future__ import annotations

import hashlib
import json
import os

from sqlalchemy import and_, false, func, not_, or_, select, true
from sqlalchemy.engine import Connection

from dsl.model import PARTIAL_NAMES, Plan, Source
from dsl.outcomes import OutcomeBase
from flows.plans.checks import resolved_paths
from flows.core.roots import Roots
from store import sets as store_sets
from store.entries import T, path_depth, subtree_clause
from store.errors import NotFound
from store.filters import EntryFilter
from store.patterns import match_clause
from store.queries import Q


def source_clause(conn: Connection, source: Source, *, roots: Roots | None, base_dir: str | None = None,
                  watched: bool = False):
    """SQL condition over the entries table for the entries ``source`` yields; a watched source never yields
    partial-download names (``*.part``, ...), whether the watcher or its catch-up scan indexed them."""
    cfg = source.config
    if source.type.startswith("filesystem."):
        dialect = conn.dialect.name
        parts = []
        for root in resolved_paths(source, roots, base_dir):
            is_dir = os.path.isdir(root)
            if not is_dir:  # a single file
                part = T.c.path == root
            elif cfg.recursive:
                # the range alone when the folder itself is not wanted: one index range, in path order, which the
                # batches page through (an OR with path = root would make SQLite sort instead)
                part = subtree_clause(root, include_root=cfg.include_directories)
            else:
                part = T.c.parent == root
            if cfg.max_depth is not None:
                part = and_(part, T.c.depth <= path_depth(root) + cfg.max_depth)
            if not cfg.include_hidden:
                part = and_(part, ~func.substr(T.c.path, len(root) + 1).contains("/.", autoescape=True))
            parts.append(part)
        clause = or_(*parts)
        for pattern in (*cfg.exclude, *(PARTIAL_NAMES if watched else ())):
            clause = and_(clause, not_(or_(
                match_clause(T.c.name, pattern=pattern, mode="glob", case_sensitive=True, dialect=dialect),
                match_clause(T.c.path, pattern=pattern, mode="glob", case_sensitive=True, dialect=dialect))))
    elif source.type == "selection_set":
        found = store_sets.get_set(conn, name=cfg.set or "")  # the model requires it for this type
        if found is None:
            raise NotFound(f"source {source.name!r}: resource set {cfg.set!r} does not exist; resource-set-list "
                           "shows the sets", field="sources")
        ids = store_sets.descendant_ids(conn, set_id=found["id"])
        clause = T.c.id.in_(store_sets.entry_ids_in(ids))
    else:  # query
        row = conn.execute(select(Q.c.query_json).where(Q.c.name == cfg.query)).first()
        if row is None:
            raise NotFound(f"source {source.name!r}: saved query {cfg.query!r} does not exist; query-list shows "
                           "the saved queries", field="sources")
        clause = and_(true(), *EntryFilter.parse(json.loads(row[0]), where=f"query {cfg.query}").clauses())
    if not cfg.include_directories:
        clause = and_(clause, T.c.kind != "directory")
    return clause


def candidates_clause(conn: Connection, plan: Plan, *, roots: Roots | None, restrict_ids=None):
    clause = or_(*(source_clause(conn, s, roots=roots, base_dir=plan.base_dir, watched=is_watched(plan, s))
                   for s in plan.sources)) if plan.sources else false()
    if restrict_ids is not None:
        clause = and_(clause, T.c.id.in_(list(restrict_ids)))
    return clause


def is_watched(plan: Plan, source: Source) -> bool:
    """Whether a continuous plan (or a filesystem.watch source) keeps watching ``source``."""
    return source.type == "filesystem.watch" or (plan.mode == "continuous" and source.type == "filesystem.index")


def work_key(row, rule: str, outcome: OutcomeBase, *, by_path: bool = True) -> str:
    """What identifies one entry's work for one rule's outcome: the entry, its state and the outcome's parameters.
    ``by_path=False`` leaves the path out, for outcomes that change it (a file a rule moved is the same work done,
    so a watched folder the file lands in does not move it again)."""
    params = json.dumps(outcome.params(), sort_keys=True)
    where = row["path"] if by_path else ""
    text = f"{row['id']}|{where}|{row['size']}|{row['mtime']}|{rule}|{params}"
    return hashlib.sha256(text.encode()).hexdigest()
