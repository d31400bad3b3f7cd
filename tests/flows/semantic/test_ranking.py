"""Ranking with the real model (loaded once per session): documents of known topics, so a question about a topic
must rank that topic's document first; and a small labelled set on which hybrid search beats either side alone --
paraphrases that share no word with any document (only meaning finds them) and exact identifiers that differ only in
the order of their characters (only the words find them)."""

from __future__ import annotations

import pytest

from flows.semantic.search import search
from tests.flows.semantic.test_search import write_collection

# topic -> its document; each ends with a batch identifier, all of them anagrams of one another, so the model sees
# nearly the same word pieces in every document while the full-text index tells them apart exactly
DOCS = {
    "beekeeping": "Honeybees live in wooden hives. The beekeeper wears a veil and puffs smoke to calm the colony "
                  "before lifting frames of comb. Batch KV7301.",
    "volcanoes": "Magma rises through cracks in the crust and erupts as lava, ash and gas. Geologists monitor tremors "
                 "near the crater. Batch KV7310.",
    "sourdough": "Sourdough bread rises with a starter of wild yeast and lactobacilli, fed with flour and water each "
                 "day. Batch KV3701.",
    "chess": "In chess a knight jumps in an L shape and the bishop slides along diagonals; castling moves the king two "
             "squares. Batch VK7301.",
    "sailing": "The sailor trims the mainsail and tacks into the wind, reading the compass and watching the tide "
               "charts. Batch KV1307.",
    "vaccines": "Vaccines train the immune system with a harmless antigen so antibodies are ready when the real "
                "pathogen arrives. Batch VK3710.",
    "guitar": "Tune the guitar strings, press chords on the frets and strum with a pick; calluses form on the "
              "fingertips. Batch KV0137.",
    "taxes": "File the annual income tax return before the deadline, listing wages, deductions and receipts for the "
             "revenue office. Batch VK1073.",
    "glaciers": "Glaciers carve valleys as compacted snow turns to ice and slowly flows downhill, leaving moraines "
                "behind. Batch KV7013.",
    "compost": "Compost heaps turn kitchen scraps and dry leaves into humus; turn the pile and keep it moist so "
               "microbes work. Batch VK0731.",
    "satellites": "A satellite in geostationary orbit circles Earth once a day, relaying television and weather data "
                  "to dishes. Batch KV3170.",
    "knitting": "Knitting loops yarn with two needles; purl and knit stitches make ribbing for scarves and sweaters. "
                "Batch VK7130.",
}

QUESTIONS = {  # natural questions, in other words than their document's
    "How do I keep bees calm when I open the hive?": "beekeeping",
    "What comes out of a volcano when it erupts?": "volcanoes",
    "Which chess piece moves diagonally across the board?": "chess",
    "How does a vaccine prepare the body's defences against infection?": "vaccines",
    "How can I recycle food waste into soil for the garden?": "compost",
    "What keeps a communications satellite above one spot on the planet?": "satellites",
}

# the labelled set: paraphrases sharing no word (after stemming) with any document, and exact identifiers
LABELLED = {
    "buzzing insects gathering sweet nectar": "beekeeping",
    "mountain spewing molten rock": "volcanoes",
    "fermented loaf": "sourdough",
    "boat propelled by breezes": "sailing",
    "shots protecting people against disease": "vaccines",
    "paying government levies": "taxes",
    "KV7301": "beekeeping",
    "KV3701": "sourdough",
    "KV1307": "sailing",
    "KV0137": "guitar",
    "KV7013": "glaciers",
    "KV3170": "satellites",
}


@pytest.fixture(scope="module")
def topics(tmp_path_factory, real_encoder):
    """One file per topic, indexed, embedded by the real model into collection ``default`` (one chunk each)."""
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store.engine import make_engine

    base = tmp_path_factory.mktemp("semantic-ranking")
    root = base / "topics"
    root.mkdir()
    for topic, text in DOCS.items():
        (root / f"{topic}.txt").write_text(text + "\n")
    engine = make_engine(f"sqlite:///{base / 'assay.db'}")
    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
    write_collection(engine, "default", {f"{t}.txt": [(text, None)] for t, text in DOCS.items()}, root,
                     encoder=real_encoder)
    yield engine
    engine.dispose()


def _topic(hit) -> str:
    return hit.path.rsplit("/", 1)[-1].removesuffix(".txt")


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_question_about_a_topic_ranks_its_document_first(topics, mode):
    wrong = {}
    for question, topic in QUESTIONS.items():
        hits = search(topics, question, mode=mode, limit=3)["hits"]
        if _topic(hits[0]) != topic:
            wrong[question] = [_topic(h) for h in hits]
    assert not wrong, wrong


def _mrr(engine, mode: str) -> float:
    """Mean reciprocal rank of the labelled documents over the labelled queries (0 for a query that misses)."""
    total = 0.0
    for query, topic in LABELLED.items():
        ranked = [_topic(h) for h in search(engine, query, mode=mode, limit=len(DOCS))["hits"]]
        total += 1 / (ranked.index(topic) + 1) if topic in ranked else 0.0
    return total / len(LABELLED)


def test_hybrid_beats_semantic_and_keyword_alone_on_the_labelled_set(topics):
    semantic, keyword, hybrid = (_mrr(topics, mode) for mode in ("semantic", "keyword", "hybrid"))
    assert hybrid > semantic and hybrid > keyword, (semantic, keyword, hybrid)
    # what each side is for: the paraphrases share no word with any document, the identifiers differ in order only
    assert all(not search(topics, q, mode="keyword")["hits"] for q in list(LABELLED)[:6])
    assert hybrid >= 0.9
