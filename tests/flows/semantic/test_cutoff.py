"""The cut-off of a semantic search whose caller names none (flows/semantic/cutoff.py): the rule on synthetic score
lists, then end to end through the real model on real manuals among real copyright texts, as a new user would ask:
three questions in words must each bring back the right manual first without minScore, a question about nothing in
the folder must bring back nothing, and a minScore given must be applied exactly.

The end-to-end collection is made of files Debian packages install under /usr/share/doc on machines of this kind:
the libtasn1 manual (libtasn1-doc), the shared-mime-info specification (shared-mime-info), the bzip2 manual (bzip2)
and 50 ``copyright`` files of other packages (1-20 KB each, spread over the alphabet). Without them the test fails
saying which package to install: a skip would hide that the default was never tried on real text."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from flows.core.roots import Roots
from flows.plans.service import PlanService
from flows.semantic import cutoff, service, vectors
from flows.semantic.cutoff import NOISE_FLOORS, fitted_min_score, measured_floor
from flows.semantic.model import DEFAULT_MODEL
from flows.semantic.search import search, semantic_search
from store import semantic as store_semantic
from store.engine import make_engine

FLOOR = 0.2

# --- the rule ----------------------------------------------------------------------------------------------------


def _kept(scores: list[float], floor: float = FLOOR) -> list[float]:
    bound = fitted_min_score(scores, floor)
    return [s for s in scores if s >= bound]


def test_a_clear_gap_below_the_best_answers_cuts_there():
    scores = [0.72, 0.70, 0.69, 0.31, 0.30, 0.29]
    assert fitted_min_score(scores, FLOOR) == pytest.approx(0.46)
    assert _kept(scores) == [0.72, 0.70, 0.69]


def test_without_a_gap_every_answer_near_the_best_is_kept():
    scores = [0.60, 0.58, 0.56, 0.54, 0.52, 0.50, 0.48, 0.46, 0.44, 0.42]
    assert _kept(scores) == scores  # the cut-off (0.40) is under them all


def test_a_gap_between_strong_answers_does_not_cut():
    """Relevance is judged by the margin over unrelated text, not by the gaps: 0.65 is a strong answer however far
    below 0.85 it is."""
    assert _kept([0.90, 0.85, 0.65, 0.60]) == [0.90, 0.85, 0.65, 0.60]


def test_when_every_score_is_under_the_floor_nothing_is_kept():
    scores = [0.19, 0.15, 0.12, 0.05, -0.03]
    assert fitted_min_score(scores, FLOOR) == FLOOR
    assert _kept(scores) == []


def test_one_result_is_kept_when_it_clears_the_floor():
    assert _kept([0.35]) == [0.35]
    assert _kept([0.20]) == [0.20]  # the floor itself is reached
    assert _kept([0.10]) == []


def test_no_scores_give_the_floor_and_order_does_not_matter():
    assert fitted_min_score([], FLOOR) == FLOOR
    assert fitted_min_score([0.3, 0.8, 0.5], FLOOR) == pytest.approx(0.5)


def test_the_floor_scales_with_the_model():
    """A model whose unrelated pairs score 0.6 (an anisotropic one) cuts at its own scale."""
    assert _kept([0.92, 0.90, 0.70, 0.62], floor=0.6) == [0.92, 0.90]
    assert _kept([0.58, 0.55], floor=0.6) == []


def test_the_measured_floor_is_the_median_of_the_probes_best_scores():
    assert measured_floor([0.1, 0.3, 0.2]) == pytest.approx(0.2)
    assert measured_floor([0.1, 0.2, 0.3, 0.9]) == pytest.approx(0.25)  # one probe on topic moves it little
    assert measured_floor([]) == 0.0


def test_the_packaged_model_has_a_recorded_floor():
    assert NOISE_FLOORS[DEFAULT_MODEL] == FLOOR


# --- end to end, with the real model on real text -----------------------------------------------------------------

DOC = Path("/usr/share/doc")
MANUALS = {  # the file copied -> the Debian package installing it
    DOC / "libtasn1-doc" / "libtasn1.pdf": "libtasn1-doc",
    DOC / "shared-mime-info" / "shared-mime-info-spec.pdf": "shared-mime-info",
    DOC / "bzip2" / "manual.html": "bzip2",
}
QUESTIONS = {  # a question in words -> the manual answering it (its name in the folder)
    "how do I decode a DER encoded ASN.1 structure": "libtasn1.pdf",
    "how does the desktop detect the MIME type of a file from its contents": "shared-mime-info-spec.pdf",
    "how do I recover data from a damaged compressed file": "bzip2-manual.html",
}
COPYRIGHTS = 50


def _copyright_files() -> list[Path]:
    """50 copyright files of packages other than the manuals' (1-20 KB: the huge ones, such as boost's 2 MB, would
    only slow the test), evenly spread over the alphabet."""
    skip = set(MANUALS.values())
    found = sorted(p for p in DOC.glob("*/copyright")
                   if p.parent.name not in skip and 1_000 <= p.stat().st_size <= 20_000)
    step = max(1, len(found) // COPYRIGHTS)
    return found[::step][:COPYRIGHTS]


@pytest.fixture(scope="module")
def manuals(tmp_path_factory, real_encoder):
    """The manuals and copyright files, copied into a folder and indexed by index_files with the real model (loaded
    once per session by real_encoder) into collection ``default``."""
    missing = [f"{path} (apt-get install {package})" for path, package in MANUALS.items() if not path.is_file()]
    if missing:
        pytest.fail("the semantic search's default cut-off is tested on real manuals that are not installed here: "
                    + "; ".join(missing))
    copyrights = _copyright_files()
    if len(copyrights) < COPYRIGHTS:
        pytest.fail(f"only {len(copyrights)} copyright files of 1-20 KB under {DOC}/*/copyright; the test needs "
                    f"{COPYRIGHTS} (a Debian system with its usual packages)")
    base = tmp_path_factory.mktemp("cutoff")
    root = base / "docs"
    (root / "manuals").mkdir(parents=True)
    (root / "copyright").mkdir()
    for path in MANUALS:
        name = "bzip2-manual.html" if path.parent.name == "bzip2" else path.name
        shutil.copyfile(path, root / "manuals" / name)
    for path in copyrights:
        shutil.copyfile(path, root / "copyright" / f"{path.parent.name}.txt")
    engine = make_engine(f"sqlite:///{base / 'assay.db'}")
    plans = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
    try:
        out = service.index_files(plans, str(root))
    finally:
        plans.shutdown()
    assert out["status"] == "success" and out["files_indexed"] == len(MANUALS) + COPYRIGHTS, out
    yield engine
    engine.dispose()


def _name(result: dict) -> str:
    return os.path.basename(result["filePath"])


@pytest.mark.parametrize("question, manual", QUESTIONS.items())
def test_a_question_in_words_finds_its_manual_without_min_score(manuals, question, manual):
    answer = semantic_search(manuals, question)
    results = answer["results"]
    assert results, answer
    assert _name(results[0]) == manual, [(_name(r), r["score"]) for r in results]
    # the cut-off was fitted: above the floor, under the best score, and it kept no other file
    assert answer["minScoreFitted"] is True
    assert FLOOR < answer["minScore"] <= results[0]["score"]
    assert {_name(r) for r in results} == {manual}, [(_name(r), r["score"]) for r in results]
    # the same through the search tool's semantic mode
    hits = search(manuals, question, mode="semantic")["hits"]
    assert os.path.basename(hits[0].path) == manual


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_min_score_given_is_applied_exactly(manuals, question):
    strict = semantic_search(manuals, question, min_score=0.99)
    assert strict["results"] == [] and strict["minScore"] == 0.99 and strict["minScoreFitted"] is False
    assert "min_score 0.99" in strict["note"]
    fitted = semantic_search(manuals, question, limit=100)["results"]
    everything = semantic_search(manuals, question, min_score=0.0, limit=100)["results"]
    assert len(everything) == 100 > len(fitted)  # every chunk of a non-negative cosine, other files' too
    assert len({_name(r) for r in everything}) > 1 == len({_name(r) for r in fitted})


def test_a_question_the_folder_cannot_answer_gets_nothing(manuals):
    answer = semantic_search(manuals, "what is the weather like on Mars")
    assert answer["results"] == [] and answer["minScoreFitted"] is True
    assert "unrelated text" in answer["note"] and "minScore" in answer["note"]
    nearest = semantic_search(manuals, "what is the weather like on Mars", min_score=0.0)
    assert nearest["results"] and nearest["results"][0]["score"] < FLOOR


def test_the_recorded_floor_is_what_the_probes_measure_on_real_text(manuals, real_encoder):
    """Another model's floor is measured on its collection with the probe questions; for the packaged model that
    measure agrees with the recorded floor (measured on a larger collection: six times the chunks, so its noise
    reaches a little higher)."""
    coll = store_semantic.get_collection(manuals, "default")
    index = vectors.index_for(manuals, coll)
    cutoff.clear_cache()
    measured = cutoff.noise_floor({**coll, "model": "a-model-without-a-recorded-floor"}, index, real_encoder)
    assert 0.1 <= measured <= NOISE_FLOORS[DEFAULT_MODEL] + 0.05, measured
