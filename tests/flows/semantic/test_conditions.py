"""The ``label`` and ``similarity`` condition fields: label = / != / in decided in SQL exactly as in Python;
similarity thresholds over the best chunk (an entry without vectors, or with vectors of another model only, has no
value); SQL narrows similarity to entries with vectors and split + Python agrees with Python alone; plan-explain's
notes; plan-preview's dependency notes and counts; a plan that embeds then selects on similarity. On both store
backends for the store-level checks; the fake encoder stands in for the model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select

from dsl.conditions import Compare, Group, Not
from dsl.model import Plan
from dsl.sql import Superset, split
from flows.core.conditions import EvalStore, SqlStore
from flows.plans.service import PlanService
from flows.core.roots import Roots
import flows.semantic.conditions  # noqa: F401  (registers the fields)
from flows.semantic.model import ChunkSpan
from store import semantic as store_sem
from store.entries import T
from store.models import Entry, EntryLabel, ResourceSet, SetMember
from tests.conftest import BACKENDS, backend_engine
from tests.flows.semantic.fakes import FakeEncoder

ENTRIES, EL = Entry.__table__, EntryLabel.__table__
SETS, MEMBERS = ResourceSet.__table__, SetMember.__table__
NOW = 1_718_452_800.0
MODEL = "all-MiniLM-L6-v2"  # the configured model (settings default), which similarity reads


def C(field: str, op: str, value: Any, arg: str | None = None) -> Compare:
    return Compare(field=field, op=op, value=value, arg=arg)


def _entry(name: str, size: int) -> dict[str, Any]:
    return {"path": f"/data/{name}", "parent": "/data", "name": name, "extension": "." + name.rsplit(".", 1)[1],
            "kind": "file", "size": size, "mtime": NOW - 100, "ctime": NOW - 100, "depth": 2,
            "media_type": "text", "mime": None, "hash": None, "indexed_at": NOW}


# name -> (size, labels (name, score, assigned, threshold), chunks in the configured model's collection, other model)
CORPUS = {
    "inv.txt": (100, [("invoice", 0.6, True), ("receipt", 0.2, False)],
                ["invoice amount due", "payment terms friday"], []),
    "rec.md": (200, [("recipe", 0.5, True), ("invoice", 0.31, True)], ["recipe flour oven"], []),
    "none.txt": (300, [], [], []),
    "other.txt": (400, [("invoice", 0.1, False)], [], ["invoice amount due"]),
}


def _spans(texts: list[str]) -> list[ChunkSpan]:
    return [ChunkSpan(index=i, start=0, end=len(t), line_start=i + 1, line_end=i + 1, page=None, page_end=None,
                      text=t) for i, t in enumerate(texts)]


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    fake = FakeEncoder(model=MODEL)
    with backend_engine(request, tmp_path_factory, "semcond") as engine:
        with engine.begin() as conn:
            conn.execute(insert(ENTRIES), [_entry(n, size) for n, (size, *_rest) in CORPUS.items()])
            ids = dict(conn.execute(select(T.c.name, T.c.id)).all())
            conn.execute(insert(EL), [{"entry_id": ids[n], "name": label, "score": score, "assigned": assigned,
                                       "threshold": 0.3, "model": MODEL, "work_key": "k", "updated_at": NOW}
                                      for n, (_, labels, _c, _o) in CORPUS.items()
                                      for label, score, assigned in labels])
        main = store_sem.ensure_collection(engine, "main", model=MODEL, backend="torch", dim=fake.dim)
        other = store_sem.ensure_collection(engine, "other", model="other-model", backend="torch", dim=fake.dim)
        for coll, pick in ((main, 2), (other, 3)):
            items = [store_sem.EntryChunks(ids[n], "k", chunks=_spans(spec[pick]), vectors=fake.encode(spec[pick]))
                     for n, spec in CORPUS.items() if spec[pick]]
            store_sem.replace_entries(engine, coll["id"], items)
        yield engine, ids


def _sql_names(engine, cond) -> set[str]:
    clause = SqlStore(engine, now=NOW).clause(cond)
    with engine.connect() as conn:
        return set(conn.execute(select(T.c.name).where(clause)).scalars())


def _python_names(engine, cond) -> set[str]:
    ev = EvalStore(engine, now=NOW)
    with engine.connect() as conn:
        rows = conn.execute(select(T)).mappings().all()
    return {r["name"] for r in rows if ev.evaluate(cond, r)}


def _split_names(engine, cond) -> set[str]:
    """What the plan engine selects: the SQL part (exact or a superset), then the residual in Python."""
    pushed, residual = split(cond)
    ev = EvalStore(engine, now=NOW)
    clause = SqlStore(engine, now=NOW).clause(pushed)
    with engine.connect() as conn:
        rows = conn.execute(select(T).where(clause)).mappings().all()
    return {r["name"] for r in rows if ev.evaluate(residual, r)}


LABEL_CASES = [
    (C("label", "=", "invoice"), {"inv.txt", "rec.md"}),  # other.txt scored invoice below its threshold
    (C("label", "!=", "invoice"), {"none.txt", "other.txt"}),  # never labelled included
    (C("label", "in", ["recipe", "receipt"]), {"rec.md"}),
    (C("label", "=", "receipt"), set()),
    (Not(condition=C("label", "=", "recipe")), {"inv.txt", "none.txt", "other.txt"}),
    (Group(type="all", conditions=[C("label", "=", "invoice"), C("size", ">", 150)]), {"rec.md"}),
    (Group(type="any", conditions=[C("label", "=", "recipe"), C("name", "=", "none.txt")]), {"rec.md", "none.txt"}),
]


@pytest.mark.parametrize("cond, expected", LABEL_CASES)
def test_label_conditions_give_the_same_entries_in_sql_and_in_python(store, cond, expected):
    engine, _ = store
    assert split(cond) == (cond, None)  # wholly pushed down
    assert _sql_names(engine, cond) == expected
    assert _python_names(engine, cond) == expected


SIMILAR = "invoice amount"  # fake cosine with "invoice amount due" 0.82; with the other chunks 0


@pytest.mark.parametrize("cond, expected", [
    (C("similarity", ">", 0.5, arg=SIMILAR), {"inv.txt"}),
    (C("similarity", ">=", 0.9, arg=SIMILAR), set()),
    (C("similarity", "<", 0.5, arg=SIMILAR), {"rec.md"}),  # entries without vectors have no value
    (C("similarity", "between", [0.8, 0.85], arg=SIMILAR), {"inv.txt"}),
    (Not(condition=C("similarity", ">", 0.5, arg=SIMILAR)), {"rec.md", "none.txt", "other.txt"}),
    (Group(type="all", conditions=[C("similarity", ">", 0.5, arg=SIMILAR), C("label", "=", "invoice")]),
     {"inv.txt"}),
    (Group(type="any", conditions=[C("similarity", ">", 0.5, arg=SIMILAR), C("label", "=", "recipe")]),
     {"inv.txt", "rec.md"}),
])
def test_similarity_thresholds_over_the_best_chunk_agree_through_split(store, fake_encoder, cond, expected):
    engine, _ = store
    assert _python_names(engine, cond) == expected
    assert _split_names(engine, cond) == expected


def test_sql_narrows_similarity_to_entries_with_vectors_of_the_configured_model(store, fake_encoder):
    engine, _ = store
    cond = C("similarity", "<", 0.99, arg=SIMILAR)
    pushed, residual = split(cond)
    assert pushed == Superset(cond) and residual == cond
    assert _sql_names(engine, pushed) == {"inv.txt", "rec.md"}  # other.txt has vectors of another model only


@pytest.fixture
def queries(fake_encoder, monkeypatch) -> list[str]:
    """Every phrase the fake encoder is asked to encode as a query, in order."""
    asked: list[str] = []
    plain = fake_encoder.encode_query

    def encode_query(text: str):
        asked.append(text)
        return plain(text)

    monkeypatch.setattr(fake_encoder, "encode_query", encode_query)
    return asked


def test_the_phrase_is_encoded_once(store, queries):
    engine, _ = store
    _python_names(engine, C("similarity", ">", 0.1, arg="a phrase seen once"))
    _python_names(engine, C("similarity", "<", 0.1, arg="a phrase seen once"))
    assert queries == ["a phrase seen once"]


def _row(engine, name: str):
    with engine.connect() as conn:
        return conn.execute(select(T).where(T.c.name == name)).mappings().one()


def test_explain_says_why_an_entry_has_a_label_or_not(store):
    engine, _ = store
    ev = EvalStore(engine, now=NOW)
    node = ev.explain(C("label", "=", "invoice"), _row(engine, "rec.md"))
    assert node["passed"] and node["note"] == "recipe 0.50 >= 0.30 assigned; invoice 0.31 >= 0.30 assigned"
    node = ev.explain(C("label", "=", "invoice"), _row(engine, "other.txt"))
    assert not node["passed"] and node["note"] == "invoice 0.10 < 0.30"
    node = ev.explain(C("label", "!=", "invoice"), _row(engine, "none.txt"))
    assert node["passed"] and node["note"].startswith("no labels")


def test_explain_shows_the_best_chunk_its_place_score_and_excerpt(store, queries):
    engine, _ = store
    ev = EvalStore(engine, now=NOW)
    node = ev.explain(C("similarity", ">", 0.5, arg=SIMILAR), _row(engine, "inv.txt"))
    assert node["passed"] and node["arg"] == SIMILAR
    assert node["seen"]["lines"] == [1, 1] and node["seen"]["collection"] == "main"
    assert node["seen"]["score"] == pytest.approx(0.8165, abs=1e-3)
    assert node["note"] == ('best chunk (line 1, collection main): similarity 0.82, which is > 0.5: '
                            '"invoice amount due"')
    queries.clear()
    node = ev.explain(C("similarity", ">", 0.5, arg="a phrase for other.txt"), _row(engine, "other.txt"))
    assert not node["passed"] and node["note"].startswith("no vectors")
    assert queries == []  # an entry without vectors needs no encoding (no model load)


# --- plans: preview notes, counts, embed then select on similarity --------------------------------------------


def test_embed_fills_similarity_and_text_and_label_fills_label_and_text():
    from dsl.fields import field_spec
    from dsl.outcomes import EmbedOutcome, LabelOutcome
    from flows.core.conditions import fills

    embed, label = EmbedOutcome(), LabelOutcome(classes=["a"])
    assert fills(embed, field_spec("similarity")) and fills(embed, field_spec("text"))
    assert not fills(embed, field_spec("label"))
    assert fills(label, field_spec("label")) and fills(label, field_spec("text"))
    assert not fills(label, field_spec("similarity")) and not fills(label, field_spec("width"))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in (("rivers.txt", "Rivers and boats: the river carries boats to the sea."),
                       ("peaks.md", "Mountains and snow on the peaks in winter."),
                       ("blob.bin", "")):
        (root / name).write_text(text)
        os.utime(root / name, (1_700_000_000, 1_700_000_000))
    return root


def test_a_plan_embeds_then_selects_on_similarity_and_labels_then_on_label(engine, folder, fake_encoder):
    plan = Plan.from_object({
        "name": "semantic", "sources": [{"name": "docs", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [
            {"name": "embed", "outcomes": [{"type": "embed", "chunk_size": 200, "overlap": 20},
                                           {"type": "label", "classes": ["rivers", "mountains"], "threshold": 0.3}]},
            {"name": "boats", "when": 'similarity("river boats") > 0.3',
             "outcomes": [{"type": "selection_set", "selectionSetName": "boats"}]},
            {"name": "hills", "when": "label = mountains",
             "outcomes": [{"type": "selection_set", "selectionSetName": "hills"}]},
        ]})
    svc = PlanService(engine, Roots.of([str(folder)]), use_prefect=False)
    try:
        svc.save(plan, create=None, write_file=False)
        preview = svc.preview(plan)
        boats, hills = preview["rules"][1], preview["rules"][2]
        assert "filled by the embed outcome of rule 'embed'" in boats["notes"][0]
        assert "filled by the label outcome of rule 'embed'" in hills["notes"][0]
        assert boats["matched"] == 0 and hills["matched"] == 0  # nothing embedded or labelled yet

        row = svc.execute(plan, wait=True)
        assert row["status"] == "success", row
        with engine.connect() as conn:
            members = {s: set(conn.execute(select(T.c.name).join(MEMBERS, MEMBERS.c.entry_id == T.c.id)
                                           .join(SETS, SETS.c.id == MEMBERS.c.set_id).where(SETS.c.name == s))
                              .scalars()) for s in ("boats", "hills")}
        assert members == {"boats": {"rivers.txt"}, "hills": {"peaks.md"}}

        preview = svc.preview(plan)
        assert preview["rules"][1]["matched"] == 1 and preview["rules"][2]["matched"] == 1
        assert preview["rules"][1]["samples"][0]["name"] == "rivers.txt"
        explained = svc.explain(plan, str(folder / "peaks.md"))
        hills = explained["rules"][2]
        assert hills["matched"] and hills["condition"]["note"].startswith("mountains ")
        assert "assigned" in hills["condition"]["note"]
    finally:
        svc.shutdown()
