"""The ``label`` outcome: every class scored and kept, assigned by threshold, into metadata / sets / both; a re-run
after a change removes a label no longer earned; unchanged entries skipped; descriptions are what gets embedded;
stored chunk vectors of a collection reused; a failed extraction reported. The fake encoder (hashed bag of words)
scores a class by the words it shares with a document; one test uses the real model on documents of known kinds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from dsl.model import Plan
from dsl.outcomes import LabelOutcome
from flows.core.outcomes import installed_executors
from flows.plans.service import PlanService
from flows.core.roots import Roots
from flows.semantic import labels
from store.entries import T
from store.models import EntryLabel, MetadataValue, ResourceSet, SetMember
from tests.conftest import BACKENDS, backend_engine

EL, MV = EntryLabel.__table__, MetadataValue.__table__
SETS, MEMBERS = ResourceSet.__table__, SetMember.__table__

INVOICE = "Invoice number 7. This invoice lists the amount due. Pay the invoice by Friday."
RECIPE = "A recipe for bread. Mix flour and water, bake in the oven. The recipe serves four."
RECEIPT = "Payment received for your purchase. Thank you, payment complete."
NOTES = "Meeting notes: the team talked about the garden and the weather."
# fake scores (threshold 0.35): invoice.txt invoice 0.57; recipe.md recipe 0.43; receipt.txt receipt 0.70; notes 0
CLASSES = ["invoice", "recipe", {"name": "receipt", "description": "payment received purchase"}]


def _write(path: Path, text: str | bytes, at: float) -> None:
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    os.utime(path, (at, at))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in (("invoice.txt", INVOICE), ("recipe.md", RECIPE), ("receipt.txt", RECEIPT),
                       ("notes.txt", NOTES), ("data.bin", b"\x00\x01")):
        _write(root / name, text, 1_700_000_000)
    return root


@pytest.fixture
def plans(engine, folder: Path):
    svc = PlanService(engine, Roots.of([str(folder)]), use_prefect=False)
    yield svc
    svc.shutdown()


def run(plans: PlanService, folder: Path, *outcomes: dict) -> dict:
    plan = Plan.from_object({
        "name": "label-docs", "mode": "oneshot", "status": "active",
        "sources": [{"name": "docs", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [{"name": "label", "outcomes": list(outcomes)}],
    })
    plans.save(plan, create=None, write_file=False)
    return plans.execute(plan, wait=True)


def label(**kw) -> dict:
    return {"type": "label", "classes": CLASSES, "threshold": 0.35, **kw}


def _outcome(row: dict, i: int = 0) -> dict:
    return row["summary"]["rules"]["label"]["outcomes"][i]


def _id(engine, path: Path) -> int:
    with engine.connect() as conn:
        return conn.execute(select(T.c.id).where(T.c.path == str(path))).scalar_one()


def _labels(engine, path: Path) -> dict[str, tuple[float, bool]]:
    with engine.connect() as conn:
        rows = conn.execute(select(EL.c.name, EL.c.score, EL.c.assigned).where(EL.c.entry_id == _id(engine, path)))
        return {r.name: (r.score, bool(r.assigned)) for r in rows}


def _metadata(engine, path: Path) -> dict:
    with engine.connect() as conn:
        rows = conn.execute(select(MV).where(MV.c.entry_id == _id(engine, path), MV.c.key.like("label%")))
        return {r.key: r.num_value if r.num_value is not None else r.text_value for r in rows}


def _members(engine, name: str) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(select(T.c.name).join(MEMBERS, MEMBERS.c.entry_id == T.c.id)
                                .join(SETS, SETS.c.id == MEMBERS.c.set_id).where(SETS.c.name == name)).scalars())


def test_the_executor_is_registered():
    assert isinstance(installed_executors()["label"], labels.LabelExecutor)


def test_classes_are_assigned_by_threshold_and_every_score_is_kept_in_metadata(plans, folder, engine,
                                                                                fake_encoder):
    row = run(plans, folder, label())
    assert row["status"] == "success", row
    out = _outcome(row)
    assert (out["applied"], out["unchanged"], out["errors"]) == (4, 1, 0)  # data.bin is not a document

    invoice = _labels(engine, folder / "invoice.txt")
    assert set(invoice) == {"invoice", "recipe", "receipt"}  # every class scored and kept
    assert invoice["invoice"][1] and invoice["invoice"][0] == pytest.approx(0.567, abs=0.01)
    assert not invoice["recipe"][1] and not invoice["receipt"][1]
    assert _labels(engine, folder / "receipt.txt")["receipt"][1]  # a description is what is scored
    assert not any(assigned for _, assigned in _labels(engine, folder / "notes.txt").values())

    meta = _metadata(engine, folder / "invoice.txt")
    assert meta == {"label": "invoice", "label.invoice": pytest.approx(invoice["invoice"][0])}
    assert _metadata(engine, folder / "notes.txt") == {}
    assert _members(engine, "invoice") == set()  # into=metadata fills no sets
    assert "payment received purchase" in fake_encoder.encoded

    from dsl.expressions import parse_expression
    from flows.core.conditions import SqlStore

    for text, expected in (("metadata.label = invoice", {"invoice.txt"}),
                           ("metadata.label.receipt > 0.5", {"receipt.txt"}),
                           ("label in [invoice, recipe]", {"invoice.txt", "recipe.md"})):
        with engine.connect() as conn:
            got = set(conn.execute(select(T.c.name).where(SqlStore(engine, now=0).clause(parse_expression(text))))
                      .scalars())
        assert got == expected, text


def test_into_sets_adds_members_and_a_rerun_after_a_change_removes_what_is_no_longer_earned(plans, folder, engine,
                                                                                             fake_encoder):
    row = run(plans, folder, label(into="sets"))
    assert row["status"] == "success", row
    assert _members(engine, "invoice") == {"invoice.txt"}
    assert _members(engine, "recipe") == {"recipe.md"}
    assert _members(engine, "receipt") == {"receipt.txt"}
    assert _metadata(engine, folder / "invoice.txt") == {}  # into=sets writes no metadata

    _write(folder / "invoice.txt", RECIPE + " Another recipe.", 1_700_000_500)  # now a recipe, not an invoice
    row = run(plans, folder, label(into="sets"))
    assert row["status"] == "success", row
    assert _outcome(row)["applied"] == 1 and _outcome(row)["skipped_unchanged_entries"] == 3
    assert _members(engine, "invoice") == set()
    assert _members(engine, "recipe") == {"recipe.md", "invoice.txt"}
    assert not _labels(engine, folder / "invoice.txt")["invoice"][1]


def test_into_both_and_unchanged_entries_are_skipped_without_encoding(plans, folder, engine, fake_encoder):
    run(plans, folder, label(into="both"))
    assert _members(engine, "recipe") == {"recipe.md"}
    assert _metadata(engine, folder / "recipe.md")["label"] == "recipe"
    encoded = len(fake_encoder.encoded)

    row = run(plans, folder, label(into="both"))
    out = _outcome(row)
    assert (out["applied"], out["skipped_unchanged_entries"], out["unchanged"]) == (0, 4, 1)
    assert len(fake_encoder.encoded) == encoded  # nothing encoded again

    row = run(plans, folder, label(into="both", threshold=0.5))  # other parameters: labelled again
    assert _outcome(row)["applied"] == 4
    assert _members(engine, "recipe") == set()  # 0.43 < 0.5: the set and the metadata lose it
    assert "label" not in _metadata(engine, folder / "recipe.md")
    assert _metadata(engine, folder / "invoice.txt")["label"] == "invoice"


def test_a_collections_stored_vectors_are_used_when_the_entry_has_them(plans, folder, engine, fake_encoder):
    row = run(plans, folder, {"type": "embed", "chunk_size": 200, "overlap": 20})
    assert row["status"] == "success", row
    fake_encoder.encoded.clear()
    row = run(plans, folder, label(collection="default"))
    assert row["status"] == "success", row
    assert fake_encoder.encoded == ["invoice", "recipe", "payment received purchase"]  # classes only
    assert _labels(engine, folder / "invoice.txt")["invoice"][1]


def test_a_failed_extraction_is_an_outcome_error(plans, folder, engine, fake_encoder):
    _write(folder / "broken.pdf", b"%PDF-1.7 this is not really a pdf", 1_700_000_000)
    row = run(plans, folder, label())
    assert row["status"] == "partial", row
    out = _outcome(row)
    assert out["errors"] == 1 and out["applied"] == 4
    assert _labels(engine, folder / "broken.pdf") == {}


def test_the_real_model_labels_documents_of_known_kinds(tmp_path, engine, real_encoder):
    root = tmp_path / "kinds"
    root.mkdir()
    texts = {
        "a.txt": "INVOICE #2024-117\nBill to: Acme Corp\nConsulting services, 10 hours at $120\nTotal amount due: "
                 "$1,200. Payment is due within 30 days.",
        "b.txt": "Chocolate chip cookies\nIngredients: 2 cups flour, 1 cup butter, 1 cup sugar, 2 eggs, chocolate "
                 "chips.\nPreheat the oven to 180C, mix, and bake for 12 minutes.",
        "c.txt": "Day 1: fly from London to Rome, check in at the hotel near the Colosseum.\nDay 2: train to "
                 "Florence, museum visit.\nDay 3: return flight home in the evening.",
    }
    for name, text in texts.items():
        _write(root / name, text, 1_700_000_000)
    svc = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
    try:
        row = run(svc, root, {"type": "label", "threshold": 0.0, "classes": [
            {"name": "invoice", "description": "an invoice: a bill asking for payment, with amounts due"},
            {"name": "recipe", "description": "a cooking recipe with ingredients and baking steps"},
            {"name": "itinerary", "description": "a travel itinerary with flights, hotels and day plans"}]})
    finally:
        svc.shutdown()
    assert row["status"] == "success", row
    best = {}
    for name in texts:
        scores = _labels(engine, root / name)
        best[name] = max(scores, key=lambda n: scores[n][0])
    assert best == {"a.txt": "invoice", "b.txt": "recipe", "c.txt": "itinerary"}


def test_an_unknown_model_is_an_error_of_every_entry_not_a_crash(plans, folder, engine, monkeypatch):
    from flows.semantic import encoder as enc
    from store.errors import InvalidInput

    def refuse(model=None, backend=None, device=None):
        raise InvalidInput(f"model {model!r} is not known", field="model")

    monkeypatch.setattr(enc, "get_encoder", refuse)
    row = run(plans, folder, label(model="no-such-model"))
    out = _outcome(row)
    assert row["status"] != "success" and out["errors"] == 4 and out["applied"] == 0
    assert _labels(engine, folder / "invoice.txt") == {}


@pytest.fixture(params=BACKENDS)
def any_store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "labels") as engine:
        with engine.begin() as conn:
            conn.execute(insert(T), [{"path": f"/d/{n}", "parent": "/d", "name": n, "extension": ".txt",
                                      "kind": "file", "size": 1, "mtime": 1.0, "ctime": 1.0, "depth": 2,
                                      "indexed_at": 1.0} for n in ("a.txt", "b.txt")])
        yield engine


def test_writing_scores_replaces_rows_metadata_and_memberships_on_both_stores(any_store):
    engine = any_store
    with engine.connect() as conn:
        ids = dict(conn.execute(select(T.c.name, T.c.id)).all())
    outcome = LabelOutcome(classes=["invoice", "recipe"], threshold=0.5, into="both")
    labels.write_labels(engine, outcome, "m", [labels.Scored(ids["a.txt"], "k1", [0.9, 0.6]),
                                               labels.Scored(ids["b.txt"], "k1", [0.1, 0.2])])
    assert _labels(engine, Path("/d/a.txt")) == {"invoice": (pytest.approx(0.9), True),
                                                 "recipe": (pytest.approx(0.6), True)}
    assert _metadata(engine, Path("/d/a.txt")) == {"label": "invoice", "label.invoice": pytest.approx(0.9),
                                                   "label.recipe": pytest.approx(0.6)}
    assert _metadata(engine, Path("/d/b.txt")) == {}
    assert _members(engine, "invoice") == {"a.txt"} and _members(engine, "recipe") == {"a.txt"}

    labels.write_labels(engine, outcome, "m", [labels.Scored(ids["a.txt"], "k2", [0.2, 0.7]),
                                               labels.Scored(ids["b.txt"], "k2", [0.8, 0.1])])
    assert _metadata(engine, Path("/d/a.txt")) == {"label": "recipe", "label.recipe": pytest.approx(0.7)}
    assert _metadata(engine, Path("/d/b.txt")) == {"label": "invoice", "label.invoice": pytest.approx(0.8)}
    assert _members(engine, "invoice") == {"b.txt"} and _members(engine, "recipe") == {"a.txt"}
    assert labels.current_keys(engine, [ids["a.txt"]], ["invoice", "recipe"]) == \
        {ids["a.txt"]: {("invoice", "k2"), ("recipe", "k2")}}
