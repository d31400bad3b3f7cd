"""The ``label`` outcome: zero-shot labels of matched documents from the embedding model.

For each entry:

1. The document vector: the normalised mean of its chunk vectors. When the outcome names a ``collection`` whose
   model is the label model and the entry has chunks there (an ``embed`` outcome made them), those stored vectors
   are used; otherwise the text is read (extracted first when it is missing or stale, as ``embed`` does), chunked
   (``flows.semantic.chunking.chunk_pages``, reference 002's 1,000 / 200) and the first :data:`MAX_CHUNKS` chunks
   encoded now: the opening of a document says what kind of document it is, and a long book costs no more than a
   letter.
2. The class vectors: each class's description (or its name when it has none), encoded once per outcome and model
   (cached for the process).
3. Scores: the cosine between the document vector and each class vector. Every class's score is kept in
   ``entry_labels`` (name, score, assigned, threshold, model, work key), so ``plan-explain`` can say why a file got
   a label or not; a class is *assigned* when its score reaches ``threshold``.
4. Where assigned labels go (``into``):

   - ``metadata``: ``metadata_values`` rows ``label`` = the best assigned class (text) and ``label.<class>`` = its
     score (a number) for each assigned class, so plan conditions on metadata work (``metadata.label = invoice``,
     ``metadata.label.invoice > 0.4``). A re-run removes the ``label.<class>`` rows of this outcome's classes no
     longer assigned, and ``label`` when it named one of them and none is assigned now (another label outcome's
     ``label`` is left alone).
   - ``sets``: the entry is added to the resource set named after each assigned class (created when missing; class
     names must be set names then, ``dsl.outcomes.LabelOutcome`` checks it) and removed from this outcome's class
     sets it no longer earns.
   - ``both``: both.

   The ``label`` condition field (``flows.semantic.conditions``) reads ``entry_labels`` whatever ``into`` says.

Work keys: the entry's size and mtime, the outcome's parameters (classes, threshold, into, collection) and the model;
an entry whose rows for all the outcome's classes carry the current key is skipped. An entry without text (not a
document, an empty one) gets no labels and counts as unchanged; a document whose extraction failed is an outcome
error (the execution ends ``partial``). Encoding runs with no transaction open; results are written in short
transactions of :data:`WRITE_BATCH` entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection, Engine

from dsl.outcomes import LabelOutcome
from flows.core.outcomes import BatchResult, OutsideTransactionExecutor, RunContext
from flows.documents import executor as doc_exec
from flows.documents.formats import format_of
from flows.documents.model import PAGED_FORMATS
from flows.semantic import encoder as enc
from flows.semantic import settings as sem_settings
from flows.semantic.chunking import chunk_pages
from store import semantic as store_sem
from store import sets as store_sets
from store.documents import read_pages
from store.entries import existing_ids
from store.errors import AssayError
from store.models import EntryLabel, MetadataValue, now

log = logging.getLogger(__name__)

OUTCOME_TYPE = "label"
PRODUCER = "labels"
MAX_CHUNKS = 16  # chunks of a document encoded when no stored vectors can be used
WRITE_BATCH = 32  # entries per write transaction
BEST_KEY = "label"  # metadata key of the best assigned class; label.<class> holds each assigned class's score
EL = EntryLabel.__table__
MV = MetadataValue.__table__


def model_for(outcome: LabelOutcome) -> str:
    """The model that scores: the outcome's, else the server's (ASSAY_EMBED_MODEL)."""
    return outcome.model or sem_settings.current().model


def label_work_key(size: int, mtime: float, outcome: LabelOutcome, model: str) -> str:
    """The key of labelling a file in this state with this outcome and model: equal keys mean nothing to redo."""
    params = {"classes": [c if isinstance(c, str) else c.model_dump() for c in outcome.classes],
              "threshold": outcome.threshold, "into": outcome.into, "collection": outcome.collection,
              "model": model}
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:32]
    return f"{size}:{mtime}:{digest}"


# --- vectors ----------------------------------------------------------------------------------------------------

_class_cache: dict[tuple[int, tuple[str, ...]], tuple[Any, np.ndarray]] = {}
_class_lock = threading.Lock()
_CLASS_CACHE_SIZE = 64


def class_vectors(encoder: Any, texts: Sequence[str]) -> np.ndarray:
    """(n classes, dim) vectors of the class texts, encoded once per (encoder, texts) for the process."""
    key = (id(encoder), tuple(texts))
    with _class_lock:
        found = _class_cache.get(key)
        if found is not None and found[0] is encoder:
            return found[1]
    vectors = np.asarray(encoder.encode(list(texts)), dtype=np.float32)
    with _class_lock:
        if len(_class_cache) >= _CLASS_CACHE_SIZE:
            _class_cache.pop(next(iter(_class_cache)))
        _class_cache[key] = (encoder, vectors)  # the encoder is kept with its key, so its id is not reused
    return vectors


def mean_vector(vectors: np.ndarray) -> np.ndarray | None:
    """The L2-normalised mean of chunk vectors, or None for none (or a zero mean)."""
    if vectors is None or len(vectors) == 0:
        return None
    mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None


def stored_vector(engine: Engine, collection: dict | None, entry_id: int) -> np.ndarray | None:
    """The document vector from the collection's stored chunk vectors of the entry, or None when it has none."""
    if collection is None:
        return None
    return mean_vector(store_sem.entry_vectors(engine, collection["id"], entry_id))


def text_vector(engine: Engine, encoder: Any, entry_id: int, *, paged: bool) -> np.ndarray | None:
    """The document vector from its first :data:`MAX_CHUNKS` chunks of extracted text, encoded now; None when the
    entry has no text."""
    pages = read_pages(engine, entry_id)
    with contextlib.closing(pages):
        spans = chunk_pages(((page if paged else None, text) for page, text, _ocr in pages))
        with contextlib.closing(spans):
            texts = [span.text for span in islice(spans, MAX_CHUNKS)]
    texts = [t for t in texts if t.strip()]
    if not texts:
        return None
    return mean_vector(encoder.encode(texts))


def scores_of(document: np.ndarray, classes: np.ndarray) -> list[float]:
    """Cosine of the (normalised) document vector with each (normalised) class vector."""
    return [float(s) for s in classes @ document]


# --- writing ----------------------------------------------------------------------------------------------------


@dataclass
class Scored:
    entry_id: int
    key: str
    scores: list[float]


def write_labels(engine: Engine, outcome: LabelOutcome, model: str, items: Sequence[Scored]) -> None:
    """Write the scores of ``items`` (one short transaction): entry_labels rows of the outcome's classes replaced,
    then metadata and/or set membership as ``into`` says (see the module docstring). Entries deleted meanwhile are
    dropped."""
    if not items:
        return
    names = outcome.class_names()
    stamp = now()
    with engine.begin() as conn:
        alive = existing_ids(conn, [i.entry_id for i in items])
        items = [i for i in items if i.entry_id in alive]
        if not items:
            return
        ids = [i.entry_id for i in items]
        conn.execute(delete(EL).where(EL.c.entry_id.in_(ids), EL.c.name.in_(names)))
        conn.execute(insert(EL), [
            {"entry_id": i.entry_id, "name": name, "score": score, "assigned": score >= outcome.threshold,
             "threshold": outcome.threshold, "model": model, "work_key": i.key, "updated_at": stamp}
            for i in items for name, score in zip(names, i.scores)])
        assigned = {i.entry_id: [(n, s) for n, s in zip(names, i.scores) if s >= outcome.threshold] for i in items}
        if outcome.into in ("metadata", "both"):
            _write_metadata(conn, names, assigned)
        if outcome.into in ("sets", "both"):
            _write_sets(conn, names, assigned)


def _write_metadata(conn: Connection, names: list[str], assigned: dict[int, list[tuple[str, float]]]) -> None:
    ids = list(assigned)
    conn.execute(delete(MV).where(MV.c.entry_id.in_(ids), MV.c.key.in_([f"{BEST_KEY}.{n}" for n in names])))
    labelled = [e for e, got in assigned.items() if got]
    if labelled:  # the best label of these entries is now this outcome's
        conn.execute(delete(MV).where(MV.c.entry_id.in_(labelled), MV.c.key == BEST_KEY))
    unlabelled = [e for e, got in assigned.items() if not got]
    if unlabelled:  # a best label of this outcome's classes no longer earned goes; another outcome's stays
        conn.execute(delete(MV).where(MV.c.entry_id.in_(unlabelled), MV.c.key == BEST_KEY,
                                      MV.c.text_value.in_(names)))
    rows = []
    for entry_id, got in assigned.items():
        if not got:
            continue
        best = max(got, key=lambda ns: ns[1])[0]
        rows.append({"entry_id": entry_id, "key": BEST_KEY, "num_value": None, "text_value": best})
        rows += [{"entry_id": entry_id, "key": f"{BEST_KEY}.{n}", "num_value": s, "text_value": None} for n, s in got]
    if rows:
        conn.execute(insert(MV), rows)


def _write_sets(conn: Connection, names: list[str], assigned: dict[int, list[tuple[str, float]]]) -> None:
    for name in names:
        earned = [e for e, got in assigned.items() if any(n == name for n, _ in got)]
        lost = [e for e, got in assigned.items() if all(n != name for n, _ in got)]
        if earned:
            target = store_sets.ensure_set(conn, name=name)
            store_sets.add_member_ids(conn, set_id=target["id"], entry_ids=earned)
        if lost:
            found = store_sets.get_set(conn, name=name)
            if found is not None:
                store_sets.remove_member_ids(conn, set_id=found["id"], entry_ids=lost)


def current_keys(engine: Engine, entry_ids: Sequence[int], names: Sequence[str]) -> dict[int, set[tuple[str, str]]]:
    """entry id -> {(class name, work key)} of its entry_labels rows among ``names``."""
    out: dict[int, set[tuple[str, str]]] = {}
    ids = list(entry_ids)
    with engine.connect() as conn:
        for i in range(0, len(ids), 500):
            for entry_id, name, key in conn.execute(
                    select(EL.c.entry_id, EL.c.name, EL.c.work_key)
                    .where(EL.c.entry_id.in_(ids[i:i + 500]), EL.c.name.in_(list(names)))):
                out.setdefault(entry_id, set()).add((name, key))
    return out


# --- one batch --------------------------------------------------------------------------------------------------


def label_rows(engine: Engine, outcome: LabelOutcome, rows: Sequence[Any], *, rule: str = OUTCOME_TYPE,
               execution_id: int | None = None, should_cancel: Callable[[], bool] = lambda: False,
               on_item: Callable[[str], None] | None = None) -> BatchResult:
    """Label the documents among ``rows`` (entry rows) whose labels are not current: see the module docstring.
    Never raises for a bad document."""
    result = BatchResult()
    options = doc_exec.options_for(None)
    model = model_for(outcome)
    names = outcome.class_names()
    wanted: list[tuple[Any, str]] = []
    for row in rows:
        if not doc_exec.applicable(row, options):
            result.unchanged += 1
            continue
        wanted.append((row, label_work_key(int(row["size"]), float(row["mtime"]), outcome, model)))
    if not wanted:
        return result
    done = current_keys(engine, [r["id"] for r, _ in wanted], names)
    todo = [(r, k) for r, k in wanted if done.get(r["id"]) != {(n, k) for n in names}]
    result.skipped += len(wanted) - len(todo)
    if not todo:
        return result

    try:
        encoder = enc.get_encoder(model)
    except AssayError as exc:  # an unknown model, GPU_NOT_AVAILABLE: nothing can be labelled
        log.warning("label with model %r: %s", model, exc)
        for row, _ in todo:
            result.errors.append((row["id"], str(exc)))
            result.failed_ids.add(row["id"])
        return result
    classes = class_vectors(encoder, outcome.class_texts())
    collection = store_sem.get_collection(engine, outcome.collection) if outcome.collection else None
    if collection is not None and collection["model"] != model:
        log.info("label: collection %r holds vectors of %s, not %s; encoding the text instead",
                 outcome.collection, collection["model"], model)
        collection = None

    vectors: dict[int, np.ndarray | None] = {}
    need_text = []
    for row, _ in todo:
        vectors[row["id"]] = stored_vector(engine, collection, row["id"])
        if vectors[row["id"]] is None:
            need_text.append(row)
    _current, failed = doc_exec.ensure_extracted(engine, need_text, options=options, rule=rule,
                                                 execution_id=execution_id, should_cancel=should_cancel)

    pending: list[Scored] = []
    for row, key in todo:
        if should_cancel():
            break
        entry_id = row["id"]
        if entry_id in failed:
            result.errors.append((entry_id, failed[entry_id]))
            result.failed_ids.add(entry_id)
            continue
        vector = vectors[entry_id]
        if vector is None:
            vector = text_vector(engine, encoder, entry_id, paged=format_of(row["name"]) in PAGED_FORMATS)
        if vector is None or vector.shape[0] != classes.shape[1]:
            result.unchanged += 1  # no text: no labels
            continue
        pending.append(Scored(entry_id, key, scores_of(vector, classes)))
        result.applied += 1
        if on_item is not None:
            on_item(row["path"])
        if len(pending) >= WRITE_BATCH:
            write_labels(engine, outcome, model, pending)
            pending = []
    write_labels(engine, outcome, model, pending)
    return result


def labels_of(conn: Connection, entry_id: int) -> list[dict[str, Any]]:
    """The entry's label scores, best first: {name, score, assigned, threshold, model}."""
    rows = conn.execute(select(EL.c.name, EL.c.score, EL.c.assigned, EL.c.threshold, EL.c.model)
                        .where(EL.c.entry_id == entry_id).order_by(EL.c.score.desc(), EL.c.name)).mappings()
    return [dict(r) for r in rows]


class LabelExecutor(OutsideTransactionExecutor):
    """Outcome ``label`` (classes, threshold, into, model, collection). Keeps its own work keys on the entry_labels
    rows (records_work False), so an entry labelled by any plan with the same parameters is not redone."""

    type: ClassVar[str] = OUTCOME_TYPE
    records_work: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = 64

    def work(self, engine: Engine, outcome: LabelOutcome, rows: Sequence[Any],  # type: ignore[override]
             ctx: RunContext) -> BatchResult:  # executor_for() gives it label outcomes only
        return label_rows(engine, outcome, rows, rule=ctx.rule or OUTCOME_TYPE, execution_id=ctx.execution_id,
                          should_cancel=ctx.should_cancel, on_item=ctx.on_item)

