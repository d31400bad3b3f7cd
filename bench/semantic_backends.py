"""The embedding backends measured side by side: torch, onnx, onnx-int8 and openvino (flows.semantic.encoder), for
speed on 1,000-character chunks and for retrieval quality on a small labelled set.

    nice .venv/bin/python -m bench.semantic_backends [--chunks 256] [--batch-sizes 8,16,32,64] [--data-dir DIR]
                                                     [--backends torch,onnx,onnx-int8,openvino] [--rounds 2]
                                                     [--out FILE]

- Speed: ``Encoder.encode`` over ``--chunks`` generated chunks of ~1,000 characters (one warm-up batch first), at
  each batch size, in ``--rounds`` rounds that take every backend and batch size in turn (a shared machine's load
  then weighs on all alike); the best rate of the best batch size is the backend's figure, with its ratio to
  torch's.
- Quality: 8 topics x 10 generated documents (~1,000 characters: half the topic's sentences, a quarter sentences any
  topic could hold, a quarter other topics' sentences) and 24 questions worded apart from the documents, each with its
  topic. A document is relevant to a question of its topic; recall@10 = relevant documents in the top 10 / 10, MRR = 1
  / rank of the first relevant one, both averaged over the questions (exact cosine ranking, no ANN). ``cos vs torch``
  is the mean cosine between each backend's vector of a document or question and torch's.
- load/export: the first ``get_encoder`` of the backend, which builds its export when it is not cached yet (the
  "built" column says so); exports are cached under the data dir's ``models/``.
- A backend that cannot run here is printed as ``unavailable: <why>``.

The encoder's DEFAULT_BACKEND is the fastest backend whose recall@10 and MRR are within 1% of torch's (the issue's
rule); ``pick_default`` applies the rule to the rows, and the run prints its choice.
Progress goes to stderr; stdout gets the table only.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass

import numpy as np

TOPICS: dict[str, list[str]] = {
    "astronomy": [
        "The telescope recorded the faint light of a distant galaxy.",
        "Astronomers measured the orbit of the comet around the sun.",
        "A supernova briefly outshone every other star in its galaxy.",
        "The rover sent back images of dusty craters on Mars.",
        "Jupiter's moons were tracked night after night from the observatory.",
        "Black holes bend the light of the stars that lie behind them.",
        "The eclipse darkened the sky for almost three minutes.",
        "Planets around other stars are found by the dimming they cause.",
        "The nebula is a cloud of gas where new stars are born.",
        "Spectra of the star revealed hydrogen and helium in its atmosphere.",
        "The space probe slowed down to enter orbit around Saturn.",
        "Meteor showers peak when Earth crosses the debris of a comet.",
    ],
    "cooking": [
        "Simmer the tomato sauce with garlic and basil for twenty minutes.",
        "Knead the bread dough until it is smooth and elastic.",
        "Sear the steak in a hot cast iron pan before roasting it.",
        "Whisk the eggs with sugar until the mixture turns pale.",
        "The risotto needs warm stock added one ladle at a time.",
        "Fold the whipped cream gently into the chocolate mousse.",
        "Marinate the chicken in yogurt, lemon and spices overnight.",
        "Bake the pastry blind so the tart base stays crisp.",
        "Season the soup with salt and a little black pepper at the end.",
        "Caramelise the onions slowly over a low flame.",
        "The recipe calls for fresh herbs chopped just before serving.",
        "Let the roast rest before carving so the juices settle.",
    ],
    "finance": [
        "The central bank raised interest rates to curb inflation.",
        "Shareholders received a larger dividend after a profitable quarter.",
        "The bond yield rose as investors sold government debt.",
        "Diversifying a portfolio reduces exposure to a single stock.",
        "The company reported revenue growth but lower operating margins.",
        "Mortgage payments climbed when the variable rate reset.",
        "Analysts cut their earnings forecast for the retailer.",
        "The stock market fell sharply after the employment report.",
        "Venture capital funds invested in early stage startups.",
        "Currency traders bet on a weaker dollar against the euro.",
        "The pension fund shifted assets from equities into bonds.",
        "Audited accounts showed the firm's debt had doubled.",
    ],
    "medicine": [
        "The patient was prescribed antibiotics for a bacterial infection.",
        "Vaccination trains the immune system to recognise the virus.",
        "The surgeon repaired the torn ligament in the knee.",
        "High blood pressure raises the risk of heart disease and stroke.",
        "The clinical trial compared the new drug with a placebo.",
        "Insulin injections help control blood sugar in diabetes.",
        "The nurse checked the patient's temperature and pulse every hour.",
        "An MRI scan showed inflammation around the spinal cord.",
        "Chemotherapy targets rapidly dividing cancer cells.",
        "The doctor advised rest and fluids for the flu symptoms.",
        "Physiotherapy restored movement after the shoulder operation.",
        "Allergic reactions can cause swelling and difficulty breathing.",
    ],
    "football": [
        "The striker scored a header in the final minute of the match.",
        "The goalkeeper saved a penalty to keep the clean sheet.",
        "The referee showed a red card after a reckless tackle.",
        "The team won the league title on the last day of the season.",
        "The coach changed the formation at half time.",
        "Fans filled the stadium for the derby against their rivals.",
        "The midfielder passed the ball forward into space for the winger.",
        "Extra time ended level, so the cup final went to penalties.",
        "The club signed a young defender during the transfer window.",
        "An offside flag ruled out the equalising goal.",
        "The captain lifted the trophy in front of the supporters.",
        "Injuries forced the manager to field a weakened side.",
    ],
    "gardening": [
        "Plant the tulip bulbs in autumn before the ground freezes.",
        "Prune the roses in early spring to encourage new growth.",
        "Compost adds nutrients and improves the structure of the soil.",
        "Water the tomato plants at the base in the early morning.",
        "Aphids on the leaves can be washed off with soapy water.",
        "Mulch keeps weeds down and holds moisture in the flower beds.",
        "Seedlings need hardening off before they go outdoors.",
        "The lawn was mown short and fed with fertiliser.",
        "Climbing beans need tall canes to grow up.",
        "Dig out the weeds with their roots so they do not return.",
        "The greenhouse protects tender plants from frost.",
        "Divide crowded perennials to give them room to flower.",
    ],
    "programming": [
        "The function returns a list sorted by the key argument.",
        "A unit test failed after the refactoring of the parser.",
        "The compiler reported a type error on line forty two.",
        "Use a hash map for constant time lookups by key.",
        "The web server handles each request in a separate thread.",
        "A memory leak grew the process until it crashed.",
        "Version control lets developers merge their branches.",
        "The query was slow until an index was added to the table.",
        "Recursion needs a base case or the stack overflows.",
        "The API returns JSON with an error code for invalid input.",
        "Continuous integration runs the test suite on every commit.",
        "The debugger stopped at the breakpoint inside the loop.",
    ],
    "law": [
        "The court ruled that the contract was void.",
        "The defendant pleaded not guilty to the charges.",
        "A judge granted an injunction to stop the construction.",
        "The jury reached a unanimous verdict after two days.",
        "The tenant sued the landlord for failing to make repairs.",
        "Under the statute the claim must be filed within three years.",
        "The appeal was dismissed by the supreme court.",
        "The lawyer cross-examined the witness about the timeline.",
        "Copyright protects the expression of an idea, not the idea itself.",
        "The settlement required the company to pay damages.",
        "Evidence obtained without a warrant was excluded at trial.",
        "The will was contested by the deceased's children.",
    ],
}

FILLER = [
    "This note was written after the meeting on Tuesday.",
    "More details will follow in the next update.",
    "Several people asked about it during the week.",
    "The figures were checked twice before publication.",
    "It is worth reading the whole summary first.",
    "Some of these points were discussed last year as well.",
    "The document was shared with the whole group.",
    "Nobody expected it to take quite this long.",
]

QUERIES: list[tuple[str, str]] = [
    ("how do scientists find planets orbiting other suns", "astronomy"),
    ("what happens when a massive star explodes", "astronomy"),
    ("pictures from a robot exploring the red planet", "astronomy"),
    ("how long should I cook pasta sauce", "cooking"),
    ("tips for making a crunchy pie crust", "cooking"),
    ("preparing meat so it stays juicy", "cooking"),
    ("why did borrowing costs go up", "finance"),
    ("company profits and payouts to investors", "finance"),
    ("spreading investments to lower risk", "finance"),
    ("treatment for an infection caused by bacteria", "medicine"),
    ("how do vaccines protect people", "medicine"),
    ("managing diabetes with injections", "medicine"),
    ("who scored the winning goal late in the game", "football"),
    ("penalty shootout in the cup final", "football"),
    ("player sent off for a dangerous challenge", "football"),
    ("when to put flower bulbs in the ground", "gardening"),
    ("getting rid of insects on plant leaves", "gardening"),
    ("improving soil with organic matter", "gardening"),
    ("fixing a failing test after changing code", "programming"),
    ("making a database lookup faster", "programming"),
    ("program crashed because memory kept growing", "programming"),
    ("the jury decided the case", "law"),
    ("renter takes property owner to court over repairs", "law"),
    ("deadline for bringing a legal claim", "law"),
]


@dataclass
class Row:
    backend: str
    batch_size: int | None = None
    chunks_per_s: float | None = None
    ratio: float | None = None
    recall10: float | None = None
    mrr: float | None = None
    cos_vs_torch: float | None = None
    load_s: float | None = None
    built: bool = False
    unavailable: str | None = None


def make_document(topic: str, rng: random.Random, size: int = 1000) -> str:
    """~``size`` characters: the topic's sentences (shuffled) making about half of it, the rest sentences any topic
    could hold and sentences of other topics (distractors), so ranking is not trivial."""
    own = TOPICS[topic][:]
    rng.shuffle(own)
    others = [t for t in TOPICS if t != topic]
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < size:
        roll = rng.random()
        if roll < 0.25:
            parts.append(rng.choice(FILLER))
        elif roll < 0.5:
            parts.append(rng.choice(TOPICS[rng.choice(others)]))
        else:
            parts.append(own.pop() if own else rng.choice(TOPICS[topic]))
    return " ".join(parts)[:size]


def labelled_set(per_topic: int = 10, seed: int = 14) -> tuple[list[str], list[str]]:
    """(documents, their topics): ``per_topic`` documents per topic."""
    rng = random.Random(seed)
    docs, topics = [], []
    for topic in TOPICS:
        for _ in range(per_topic):
            docs.append(make_document(topic, rng))
            topics.append(topic)
    return docs, topics


def speed_chunks(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    names = list(TOPICS)
    return [make_document(names[i % len(names)], rng) for i in range(n)]


def quality(doc_vecs: np.ndarray, doc_topics: list[str], query_vecs: np.ndarray) -> tuple[float, float]:
    """(mean recall@10, MRR) of QUERIES over the documents by exact cosine ranking."""
    recalls, rrs = [], []
    topics = np.array(doc_topics)
    for (_, topic), q in zip(QUERIES, query_vecs):
        order = np.argsort(-(doc_vecs @ q), kind="stable")
        relevant = topics[order] == topic
        recalls.append(relevant[:10].sum() / min(10, int((topics == topic).sum())))
        first = int(np.argmax(relevant))
        rrs.append(1.0 / (first + 1))
    return float(np.mean(recalls)), float(np.mean(rrs))


def measure_rate(encoder, chunks: list[str], batch_size: int) -> float:
    """chunks/s of one ``encode`` over ``chunks`` (after a warm-up batch)."""
    encoder.encode(chunks[:batch_size], batch_size=batch_size)
    started = time.perf_counter()
    encoder.encode(chunks, batch_size=batch_size)
    return len(chunks) / (time.perf_counter() - started)


def pick_default(rows: list[Row], tolerance: float = 0.01) -> str:
    """The fastest available backend whose recall@10 and MRR are within ``tolerance`` (relative) of torch's."""
    torch_row = next(r for r in rows if r.backend == "torch" and r.unavailable is None)
    ok = [r for r in rows if r.unavailable is None and r.chunks_per_s
          and r.recall10 >= torch_row.recall10 * (1 - tolerance) and r.mrr >= torch_row.mrr * (1 - tolerance)]
    return max(ok, key=lambda r: r.chunks_per_s).backend


def run(backends: list[str], n_chunks: int, batch_sizes: list[int], rounds: int = 2) -> list[Row]:
    """Load each backend (timing its load / export), measure its quality, then its speed: ``rounds`` rounds, each
    running every (backend, batch size) once in turn, keeping each one's best rate - so a machine whose load changes
    during the run treats every backend alike."""
    from flows.semantic import encoder as enc
    from flows.semantic.model import DEFAULT_MODEL

    docs, topics = labelled_set()
    queries = [q for q, _ in QUERIES]
    chunks = speed_chunks(n_chunks)  # --chunks 0: quality only
    rows: list[Row] = []
    encoders = {}
    reference: np.ndarray | None = None
    for backend in ["torch"] + [b for b in backends if b != "torch"]:
        row = Row(backend)
        rows.append(row)
        problem = enc.backend_problem(backend)
        if problem:
            row.unavailable = problem
            continue
        built = not (backend == "torch" or (enc.cache_dir_for(DEFAULT_MODEL, backend)
                                            / enc.EXPORT_FILES[backend]).is_file())
        print(f"{backend}: loading{' (building the export)' if built else ''}", file=sys.stderr)
        try:
            started = time.perf_counter()
            encoders[backend] = enc.load(DEFAULT_MODEL, backend, "cpu")
            row.load_s, row.built = time.perf_counter() - started, built
        except Exception as exc:  # an export that fails here
            row.unavailable = f"{type(exc).__name__}: {exc}"
            continue
        doc_vecs, query_vecs = encoders[backend].encode(docs), encoders[backend].encode(queries)
        row.recall10, row.mrr = quality(doc_vecs, topics, query_vecs)
        both = np.vstack([doc_vecs, query_vecs])
        if reference is None:
            reference = both
        row.cos_vs_torch = float(np.mean(np.sum(both * reference, axis=1)))
    best: dict[tuple[str, int], float] = {}
    for r in range(rounds if chunks else 0):
        for backend, encoder in encoders.items():
            for bs in batch_sizes:
                rate = measure_rate(encoder, chunks, bs)
                best[backend, bs] = max(rate, best.get((backend, bs), 0.0))
                print(f"  round {r + 1}: {backend} batch {bs}: {rate:.1f} chunks/s", file=sys.stderr)
    for row in rows:
        if row.backend in encoders and chunks:
            row.batch_size, row.chunks_per_s = max(((bs, best[row.backend, bs]) for bs in batch_sizes),
                                                   key=lambda x: x[1])
    base = rows[0].chunks_per_s
    for row in rows:
        if row.chunks_per_s and base:
            row.ratio = row.chunks_per_s / base
    return rows


def table(rows: list[Row]) -> str:
    head = "| backend | batch | chunks/s | vs torch | recall@10 | MRR | cos vs torch | load/export s |"
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        if r.unavailable:
            lines.append(f"| {r.backend} | unavailable: {r.unavailable} | | | | | | |")
            continue
        speed = (f"{r.batch_size} | {r.chunks_per_s:.1f} | {r.ratio:.2f}x" if r.chunks_per_s else "- | - | -")
        lines.append(f"| {r.backend} | {speed} | {r.recall10:.3f} | "
                     f"{r.mrr:.3f} | {r.cos_vs_torch:.5f} | {r.load_s:.1f}{' (built)' if r.built else ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--batch-sizes", default="8,16,32,64")
    parser.add_argument("--backends", default="torch,onnx,onnx-int8,openvino")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-dir", help="where exports are cached (default: ASSAY_DATA_DIR or ~/.assay)")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.data_dir:
        os.environ["ASSAY_DATA_DIR"] = args.data_dir
    rows = run(args.backends.split(","), args.chunks, [int(b) for b in args.batch_sizes.split(",")], args.rounds)
    text = table(rows)
    try:
        text += f"\n\ndefault by the rule (fastest within 1% of torch's recall@10 and MRR): {pick_default(rows)}"
    except (StopIteration, ValueError):
        pass
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
