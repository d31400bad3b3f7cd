"""The ``label`` and ``similarity`` condition fields of plans, declared by the semantic capability
(``flows.semantic.capability``) for the core's field registries (``flows.core.conditions.RegisteredField``).

``label`` (``label = invoice``, ``label != invoice``, ``label in [invoice, receipt]``):

- True when the entry has that label *assigned* in ``entry_labels`` (a ``label`` outcome scored the class at or
  above its threshold: ``flows.semantic.labels``); ``in`` when it has any of them; ``!=`` is ``not =`` (an entry
  never labelled included).
- SQL decides it exactly: an EXISTS over the entry's assigned labels (the ``ix_entry_labels_name`` index), so a rule
  on labels reads only the matching entries.
- plan-explain shows the entry's scores, best first: ``invoice 0.41 >= 0.30 assigned; receipt 0.22 < 0.30``.

``similarity("a phrase") > 0.4`` (``<``, ``<=``, ``>``, ``>=``, ``between``):

- The value is the best cosine similarity between the phrase's vector and the entry's chunk vectors, over every
  collection whose model is the configured one (``flows.semantic.settings.current().model``): "does some passage
  of this file talk about that". The phrase is encoded once (cached for the process, per encoder).
- An entry without vectors (not embedded, or only in collections of another model) has no value: the leaf is false
  whatever the operator, and ``not`` of it true, as for any missing value.
- SQL only narrows it (``dsl.sql.Superset``): to the entries with chunks in such a collection; Python decides,
  reading the entry's vectors a batch at a time.
- plan-explain shows the best chunk: its place (page / lines), collection, score and a short excerpt.

Plan-preview's dependency notes: an ``embed`` outcome fills ``similarity`` and a ``label`` outcome fills ``label``,
and both fill ``text`` (they extract documents not extracted yet) (``FILLS``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Mapping

import numpy as np
from sqlalchemy import exists, select, true
from sqlalchemy.engine import Connection

from dsl.evaluate import value_match
from flows.core.conditions import Filler, RegisteredField
from flows.semantic import encoder as enc
from flows.semantic import settings as sem_settings
from flows.semantic.labels import labels_of
from store.entries import T
from store.models import Chunk, Collection, Embedding, EntryLabel

EL = EntryLabel.__table__
C = Collection.__table__
K = Chunk.__table__
V = Embedding.__table__

READ_BATCH = 256  # chunk vectors read per query
EXCERPT = 200  # characters of the best chunk plan-explain shows
_PHRASES = 256  # phrase vectors kept


# --- label ------------------------------------------------------------------------------------------------------


def _names(op: str, value: Any) -> list[str]:
    return [str(v) for v in value] if op == "in" else [str(value)]


def label_clause(op: str, value: Any, arg: str | None, dialect: str):
    """``label = x`` / ``label in [x, y]`` exactly: the entry has one of the labels assigned (``!=`` is negated by
    dsl.sql)."""
    return exists().where(EL.c.entry_id == T.c.id, EL.c.assigned == true(), EL.c.name.in_(_names(op, value)))


def label_note(labels: list[dict[str, Any]]) -> str:
    """What plan-explain says of an entry's labels: each score against its threshold, best first."""
    if not labels:
        return "no labels: no label outcome has scored this entry (or it has no text)"
    parts = []
    for row in labels:
        if row["assigned"]:
            parts.append(f"{row['name']} {row['score']:.2f} >= {row['threshold']:.2f} assigned")
        else:
            parts.append(f"{row['name']} {row['score']:.2f} < {row['threshold']:.2f}")
    return "; ".join(parts)


def label_match(conn: Connection, entry: Mapping[str, Any], op: str, value: Any,
                arg: str | None) -> tuple[bool, Any]:
    """(whether the entry has one of the labels assigned, {assigned: [...], scores: {name: score}, note})."""
    labels = labels_of(conn, entry["id"])
    assigned = [row["name"] for row in labels if row["assigned"]]
    wanted = set(_names(op, value))
    seen = {"assigned": assigned, "scores": {row["name"]: round(row["score"], 4) for row in labels},
            "note": label_note(labels)}
    return any(name in wanted for name in assigned), seen


# --- similarity -------------------------------------------------------------------------------------------------


def _collections_of_model():
    return select(C.c.id).where(C.c.model == sem_settings.current().model)


def similarity_clause(op: str, value: Any, arg: str | None, dialect: str):
    """A superset of ``similarity("...") op value``: the entry has chunks in a collection of the configured model
    (an entry without vectors has no value, so it never matches)."""
    return exists().where(K.c.entry_id == T.c.id, K.c.collection_id.in_(_collections_of_model()))


_phrase_cache: OrderedDict[tuple[int, str], tuple[Any, np.ndarray]] = OrderedDict()
_phrase_lock = threading.Lock()


def phrase_vector(phrase: str) -> np.ndarray:
    """The phrase's vector by the configured model's encoder, encoded once (kept for the process, per encoder)."""
    encoder = enc.get_encoder(sem_settings.current().model)
    key = (id(encoder), phrase)
    with _phrase_lock:
        found = _phrase_cache.get(key)
        if found is not None and found[0] is encoder:
            _phrase_cache.move_to_end(key)
            return found[1]
    vector = np.asarray(encoder.encode_query(phrase), dtype=np.float32)
    with _phrase_lock:
        _phrase_cache[key] = (encoder, vector)  # the encoder is kept with its key, so its id is not reused
        while len(_phrase_cache) > _PHRASES:
            _phrase_cache.popitem(last=False)
    return vector


def best_chunk(conn: Connection, entry_id: int, query: np.ndarray) -> dict[str, Any] | None:
    """The entry's chunk most similar to ``query`` over the collections of the configured model: {chunk_id,
    collection, score}; None when the entry has no vectors there. Vectors are read :data:`READ_BATCH` at a time."""
    best: dict[str, Any] | None = None
    collections = conn.execute(select(C.c.id, C.c.name, C.c.dim).where(C.c.model == sem_settings.current().model)
                               .order_by(C.c.id)).all()
    for coll in collections:
        if coll.dim != query.shape[0]:
            continue
        after = -1
        while True:
            rows = conn.execute(select(K.c.id, K.c.chunk_index, V.c.vector).join(V, V.c.chunk_id == K.c.id)
                                .where(K.c.collection_id == coll.id, K.c.entry_id == entry_id,
                                       K.c.chunk_index > after)
                                .order_by(K.c.chunk_index).limit(READ_BATCH)).all()
            if not rows:
                break
            vectors = np.stack([np.frombuffer(bytes(r.vector), dtype="<f4") for r in rows])
            scores = vectors @ query
            i = int(np.argmax(scores))
            if best is None or float(scores[i]) > best["score"]:
                best = {"chunk_id": rows[i].id, "collection": coll.name, "score": float(scores[i])}
            if len(rows) < READ_BATCH:
                break
            after = rows[-1].chunk_index
    return best


def _has_vectors(conn: Connection, entry_id: int) -> bool:
    return conn.execute(select(K.c.id).where(K.c.entry_id == entry_id,
                                              K.c.collection_id.in_(_collections_of_model())).limit(1)).first() \
        is not None


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[:EXCERPT].rstrip() + "..."


def _place(chunk: Any) -> str:
    lines = f"lines {chunk.line_start}-{chunk.line_end}" if chunk.line_end != chunk.line_start \
        else f"line {chunk.line_start}"
    if chunk.page is None:
        return lines
    pages = f"page {chunk.page}" if (chunk.page_end or chunk.page) == chunk.page \
        else f"pages {chunk.page}-{chunk.page_end}"
    return f"{pages}, {lines}"


def similarity_match(conn: Connection, entry: Mapping[str, Any], op: str, value: Any,
                     arg: str | None) -> tuple[bool, Any]:
    """(whether the best chunk's similarity to the phrase satisfies ``op value``, what was seen: {score, collection,
    chunk, page, lines, text, note}); an entry without vectors: (False, {note})."""
    model = sem_settings.current().model
    if not _has_vectors(conn, entry["id"]):  # no phrase encoding (no model load) for entries without vectors
        return False, {"note": f"no vectors: the entry has no chunks in a collection of model {model} (an embed "
                               "outcome or index_files makes them)"}
    best = best_chunk(conn, entry["id"], phrase_vector(arg or ""))
    if best is None:
        return False, {"note": f"no vectors of model {model}'s dimension for this entry"}
    chunk = conn.execute(select(K.c.chunk_index, K.c.page, K.c.page_end, K.c.line_start, K.c.line_end, K.c.text)
                         .where(K.c.id == best["chunk_id"])).first()
    if chunk is None:  # re-indexed between the two reads: its chunks were replaced
        return False, {"note": "the entry's chunks changed while it was compared; compare it again"}
    score = best["score"]
    passed = value_match(op, value, score, "number")
    bound = f"between {value[0]} and {value[1]}" if op == "between" else f"{op} {value}"
    verdict = f"{score:.2f}, {'which is' if passed else 'not'} {bound}"
    place = _place(chunk)
    seen = {"score": round(score, 4), "collection": best["collection"], "chunk": chunk.chunk_index,
            "page": chunk.page, "lines": [chunk.line_start, chunk.line_end], "text": _excerpt(chunk.text),
            "note": f"best chunk ({place}, collection {best['collection']}): similarity {verdict}: "
                    f"\"{_excerpt(chunk.text)}\""}
    return passed, seen


# --- declared by the capability (flows.semantic.capability) ----------------------------------------------------

LABEL = RegisteredField(name="label", clause=label_clause, match=label_match)
SIMILARITY = RegisteredField(name="similarity", clause=similarity_clause, match=similarity_match)


def _fills(*producers: str):
    def fills(outcome, spec) -> bool:
        return spec.producer in producers

    return fills


# both extract the text of documents not extracted yet, so they fill ``text`` too
FILLS = (Filler("embed", _fills("embeddings", "text")), Filler("label", _fills("labels", "text")))
