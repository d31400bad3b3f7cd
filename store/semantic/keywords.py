"""Keyword search over a collection's chunks.

Chunks are ranked by BM25 over SQLite's FTS5 table ``chunk_fts`` (``score = -bm25``) or by ``ts_rank_cd`` over
PostgreSQL's ``chunks.tsv``; a natural-language query becomes the OR of its words, each quoted, so no query syntax
from the caller reaches the full-text engine.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Sequence

from sqlalchemy import Integer, bindparam
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Engine

MAX_QUERY_WORDS = 64  # distinct words of a keyword query at most (a 10,000-character query stays one small MATCH)
_WORD = re.compile(r"[^\W_]+")  # unicode letters and digits


# English function words: in an OR query each matches most chunks, so BM25 must score nearly all of them (0.6-0.9 s
# at 100,000 chunks for a question holding "the") while adding almost nothing to the ranking. PostgreSQL's
# to_tsquery('english', ...) drops the same kind of words itself.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves
""".split())


def query_words(query: str, limit: int = MAX_QUERY_WORDS) -> list[str]:
    """The distinct words (unicode letters and digits, lower-cased) of ``query`` in order, at most ``limit``, without
    English function words (``STOPWORDS``) unless the query holds nothing else ("to be or not to be")."""
    seen: dict[str, None] = {}
    common: dict[str, None] = {}
    for m in _WORD.finditer(query or ""):
        word = m.group(0).lower()
        (common if word in STOPWORDS else seen).setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen) or list(common)[:limit]


def fts_match(words: Sequence[str]) -> str:
    """An FTS5 MATCH string: the OR of the words, each double-quoted (a word holds no quote: only letters/digits)."""
    return " OR ".join(f'"{w}"' for w in words)


def keyword_search(engine: Engine, collection_id: int, query: str, *, limit: int,
                   entry_ids: Iterable[int] | None = None) -> list[tuple[int, float]]:
    """The collection's chunks best matching ``query``'s words (any of them; a query with no words finds nothing),
    best first, at most ``limit``: ``(chunk id, score)`` with higher = better (SQLite: -BM25 over chunk_fts;
    PostgreSQL: ts_rank_cd of the chunk's tsvector). ``entry_ids`` restricts the hits to those entries."""
    words = query_words(query)
    if not words or limit <= 0:
        return []
    ids = None if entry_ids is None else list(entry_ids)
    if ids is not None and not ids:
        return []
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            tsq = " | ".join(words)  # letters and digits only: no tsquery operator can get through
            q = sql_text(
                "SELECT c.id, ts_rank_cd(c.tsv, q) AS score FROM chunks c, to_tsquery('english', :tsq) q "
                "WHERE c.collection_id = :cid AND c.tsv @@ q"
                + (" AND c.entry_id = ANY(:entry_ids)" if ids is not None else "")
                + " ORDER BY score DESC, c.id LIMIT :limit")
            params: dict[str, Any] = {"tsq": tsq, "cid": collection_id, "limit": int(limit)}
            if ids is not None:
                q = q.bindparams(bindparam("entry_ids", type_=ARRAY(Integer)))
                params["entry_ids"] = [int(e) for e in ids]
        else:
            q = sql_text(
                "SELECT c.id, -bm25(chunk_fts) AS score FROM chunk_fts JOIN chunks c ON c.id = chunk_fts.rowid "
                "WHERE chunk_fts MATCH :m AND c.collection_id = :cid"
                + (" AND c.entry_id IN (SELECT value FROM json_each(:entry_ids))" if ids is not None else "")
                + " ORDER BY bm25(chunk_fts), c.id LIMIT :limit")
            params = {"m": fts_match(words), "cid": collection_id, "limit": int(limit)}
            if ids is not None:
                params["entry_ids"] = json.dumps([int(e) for e in ids])
        return [(int(cid), float(score)) for cid, score in conn.execute(q, params)]
