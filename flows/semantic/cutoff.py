"""The cosine cut-off of a semantic search whose caller names none (``minScore`` / ``min_score`` left out).

A cosine similarity means nothing by itself: each model has its own scale. Reference 002's example ``minScore`` 0.7
was meant for another model; with the packaged all-MiniLM-L6-v2 the right manual's best passage for a question in
words scores 0.69-0.75 and good answers to paraphrased questions 0.4-0.7: 0.7 kept 0-2 chunks of five such
questions' top 20 (all of the right manual) and nothing for paraphrases. The default is therefore fitted to the
model, in two parts:

1. **The noise floor**: the score a chunk unrelated to the question reaches with this model. Nothing below it is
   kept, so a question the collection cannot answer comes back empty (with a note), not with the nearest noise.
   For the packaged model it is recorded in :data:`NOISE_FLOORS`, measured once (2026-11-27) on real text: 18
   everyday questions (the weather on Mars, boiling an egg, castling in chess, ...) against the 10,973 chunks of 304
   Debian files (the libtasn1, shared-mime-info, bzip2 and ninja manuals and 300 ``copyright`` files). Each question's
   best chunk scored 0.14-0.29, median 0.20 (over all 197,514 pairs: mean 0.00, sd 0.055, 99.9th percentile 0.18):
   the floor is that median, 0.20. For another model (a directory named by ``ASSAY_EMBED_MODEL``) the same statistic
   is computed from the collection's own vectors: the median, over :data:`PROBES`, of the best score each reaches in
   the collection's vector index (cached per collection version). The median holds while fewer than half the probes
   are on the collection's topics.
2. **Relative to the best**: a hit is kept when its margin above the floor is at least :data:`RELATIVE` (half) of the
   best hit's, i.e. ``score >= floor + 0.5 * (best - floor)``. The best hit always passes when it clears the floor,
   so a question with good answers never comes back empty. Measured on the same collection, five questions in words
   ranked the right manual first at 0.69-0.75; the best chunk of another file reached 0.35-0.42, at most 0.44 of the
   best's margin: half kept 16-20 of each question's top 20, all of the right manual, and no chunk of another file.

Why not mcp-local-rag's gap rule (cut at the first gap between consecutive scores above mean + 1.5 standard
deviations of the gaps; an opt-in mode there, ``RAG_GROUPING``, off by default): on these questions the scores of the
right manual's chunks fall smoothly, and the largest gap of a best-first list is usually its first one (the best chunk
stands out of any ranked list), so of each question's top 20 (all of the right manual) the rule kept 1-3, and for the
weather on Mars it still kept 3 chunks of noise. A gap between two strong answers says nothing about relevance; a
margin over what unrelated text reaches does.

What neither can do: a question the model answers with noise above the floor ("how do I rebuild only what changed",
which the ninja manual answers, brought back chunks of boost's copyright at 0.38) keeps that noise, with its low
scores; a right answer under the floor (a paraphrase sharing no word, 0.18) is left out: ``minScore`` 0 shows both.
On the end-to-end test's smaller collection (tests/flows/semantic/test_cutoff.py: 53 files, 684 chunks) the three
questions' best chunks scored 0.747, 0.716 and 0.688, the cut-offs were 0.47, 0.46 and 0.44, and each answer was ten
chunks of the right manual; the weather on Mars (best 0.106) got nothing.

A caller who names a cut-off gets exactly that one (see flows.semantic.search).
"""

from __future__ import annotations

import logging
import statistics
import threading
from typing import Any, Iterable

import numpy as np

from flows.semantic.model import DEFAULT_MODEL

log = logging.getLogger(__name__)

# model name (as collections record it) -> its noise floor, measured as the module docstring says
NOISE_FLOORS: dict[str, float] = {DEFAULT_MODEL: 0.20}
RELATIVE = 0.5

# everyday questions for measuring another model's noise floor on a collection (few collections answer them)
PROBES = (
    "What is the weather like on Mars?", "How do I bake sourdough bread?", "Who won the football world cup in 1998?",
    "How long should I boil an egg?", "What do elephants eat?", "How do I train for a marathon?",
    "When did the Roman empire fall?", "How do volcanoes erupt?", "What is the best way to learn the violin?",
    "How do I plant tomatoes in my garden?", "Why is the sky blue?", "How do bees make honey?",
    "What are the rules of castling in chess?", "How do I knit a scarf?", "What causes the tides?",
    "How do vaccines work?", "What is a good recipe for pancakes?", "How far is the moon from the earth?",
)

_lock = threading.Lock()
_probe_vectors: dict[tuple[str, str | None], np.ndarray] = {}
_measured: dict[tuple[int, int], float] = {}  # (collection id, index version) -> the floor measured


def fitted_min_score(scores: Iterable[float], floor: float) -> float:
    """The cut-off for a question whose hits scored ``scores`` (cosines, any order) over a model whose unrelated text
    reaches ``floor``: a hit is kept when its score is at least the result. That is ``floor + RELATIVE * (best -
    floor)`` when the best score reaches the floor (so the best is always kept), else the floor itself (above every
    score: nothing is kept). No scores: the floor."""
    best = max(scores, default=None)
    if best is None or best < floor:
        return floor
    return floor + RELATIVE * (best - floor)


def measured_floor(best_scores: Iterable[float]) -> float:
    """The noise floor from the best score of each probe question in a collection: their median."""
    values = sorted(float(s) for s in best_scores)
    return statistics.median(values) if values else 0.0


def _probes(encoder: Any) -> np.ndarray:
    key = (str(encoder.model), getattr(encoder, "backend", None))
    with _lock:
        found = _probe_vectors.get(key)
    if found is None:
        # one batch: the same vectors as encode_query gives one by one (it encodes a batch of one)
        found = np.asarray(encoder.encode(list(PROBES)), dtype=np.float32)
        with _lock:
            _probe_vectors[key] = found
    return found


def noise_floor(collection: dict, index: Any, encoder: Any) -> float:
    """The noise floor of ``collection``'s model: recorded (:data:`NOISE_FLOORS`), else measured on the collection's
    vector ``index`` (flows.semantic.vectors.VectorIndex) with the probe questions embedded by ``encoder`` (the
    collection's own), once per index version."""
    recorded = NOISE_FLOORS.get(str(collection.get("model")))
    if recorded is not None:
        return recorded
    key = (int(collection["id"]), int(index.version))
    with _lock:
        found = _measured.get(key)
    if found is not None:
        return found
    best = [hits[0][1] for hits in (index.search(v, 1) for v in _probes(encoder)) if hits]
    floor = measured_floor(best)
    log.info("noise floor of collection %r (model %s) measured on %d probes: %.3f", collection.get("name"),
             collection.get("model"), len(best), floor)
    with _lock:
        _measured[key] = floor
    return floor


def clear_cache() -> None:
    """Forget the probe vectors and measured floors (tests)."""
    with _lock:
        _probe_vectors.clear()
        _measured.clear()
