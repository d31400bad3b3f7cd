"""The ``embed`` outcome: documents chunked, encoded and written to a collection with their places; unchanged files
never encoded again; changed ones replaced; deleted ones gone; another model refused; failed extractions reported;
a cancel keeps what was written. The fake encoder stands in for the model; extraction is the real one on small
text files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from dsl.model import Plan
from flows.core.outcomes import installed_executors
from flows.plans.service import PlanService
from flows.core.roots import Roots
from flows.semantic import executor as ex
from flows.semantic.model import EmbedParams
from store import plans as store_plans
from store import semantic as store_sem
from store.entries import T
from store.models import Chunk, CollectionEntry, Embedding

K, CE, V = Chunk.__table__, CollectionEntry.__table__, Embedding.__table__

ALPHA = "\n".join(f"Line {i} of the alpha notes talks about rivers and boats." for i in range(1, 13))
BETA = "# Beta\n\nThe beta page is about mountains.\nSnow falls on the peaks in winter.\n"


def _touch(path: Path, text: str | bytes, *, at: float | None = None) -> None:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    if at is not None:
        os.utime(path, (at, at))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    _touch(root / "alpha.txt", ALPHA, at=1_700_000_000)
    _touch(root / "beta.md", BETA, at=1_700_000_000)
    _touch(root / "data.bin", b"\x00\x01\x02", at=1_700_000_000)
    return root


@pytest.fixture
def plans(engine, folder: Path):
    svc = PlanService(engine, Roots.of([str(folder)]), use_prefect=False)
    yield svc
    svc.shutdown()


def embed_plan(folder: Path, **outcome) -> Plan:
    return Plan.from_object({
        "name": "embed-docs", "mode": "oneshot", "status": "active",
        "sources": [{"name": "docs", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [{"name": "embed", "outcomes": [{"type": "embed", "chunk_size": 120, "overlap": 30, **outcome}]}],
    })


def run(plans: PlanService, folder: Path, **outcome) -> dict:
    plan = embed_plan(folder, **outcome)
    plans.save(plan, create=None, write_file=False)
    return plans.execute(plan, wait=True)


def _outcome(row: dict) -> dict:
    return row["summary"]["rules"]["embed"]["outcomes"][0]


def _entry_id(engine, path: Path) -> int:
    with engine.connect() as conn:
        return conn.execute(select(T.c.id).where(T.c.path == str(path))).scalar_one()


def _chunks(engine, entry_id: int) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(K).where(K.c.entry_id == entry_id)
                                              .order_by(K.c.chunk_index)).mappings()]


def _count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def test_the_executor_is_registered_with_a_small_batch():
    assert isinstance(installed_executors()["embed"], ex.EmbedExecutor)
    assert ex.EmbedExecutor.batch_size and ex.EmbedExecutor.batch_size <= 256


def test_embedding_writes_each_documents_chunks_with_their_lines_and_vectors(plans, folder, engine, fake_encoder):
    row = run(plans, folder)
    assert row["status"] == "success", row
    out = _outcome(row)
    assert (out["applied"], out["unchanged"], out["errors"]) == (2, 1, 0)  # data.bin is not a document

    alpha = _chunks(engine, _entry_id(engine, folder / "alpha.txt"))
    assert len(alpha) > 3  # 12 lines of ~55 characters in chunks of 120
    for chunk in alpha:
        assert ALPHA[chunk["start"]:chunk["end"]] == chunk["text"]
        assert chunk["page"] is None and chunk["page_end"] is None  # plain text has no pages
        assert chunk["line_start"] == ALPHA.count("\n", 0, chunk["start"]) + 1
        assert chunk["line_end"] == ALPHA.count("\n", 0, chunk["end"] - 1) + 1
    assert [c["chunk_index"] for c in alpha] == list(range(len(alpha)))
    assert alpha[0]["line_start"] == 1 and alpha[-1]["line_end"] == 12

    beta = _chunks(engine, _entry_id(engine, folder / "beta.md"))
    assert [c["text"] for c in beta] and "mountains" in beta[0]["text"]

    coll = store_sem.get_collection(engine, "default")
    assert (coll["model"], coll["dim"], coll["chunk_size"], coll["overlap"]) == \
        (fake_encoder.model, fake_encoder.dim, 120, 30)
    stored = store_sem.entry_vectors(engine, coll["id"], alpha[0]["entry_id"])
    expected = fake_encoder.encode([c["text"] for c in alpha])
    assert np.allclose(stored, expected, atol=1e-6)
    assert _count(engine, V) == _count(engine, K) == len(alpha) + len(beta)
    with engine.connect() as conn:
        states = {r.entry_id: (r.status, r.chunk_count) for r in conn.execute(select(CE))}
    assert sorted(states.values()) == sorted([("ok", len(alpha)), ("ok", len(beta))])

    with engine.connect() as conn:
        records = conn.execute(select(store_plans.R.c.status).where(
            store_plans.R.c.execution_id == row["execution_id"], store_plans.R.c.outcome_type == "embed")).all()
    assert sorted(r.status for r in records) == ["applied", "applied"]


def test_the_live_index_finds_new_chunks_and_is_saved_after_the_run(plans, folder, engine, fake_encoder):
    from flows.semantic import vectors
    from flows.semantic.paths import vector_dir

    run(plans, folder)
    coll = store_sem.get_collection(engine, "default")
    hits = vectors.index_for(engine, coll).search(fake_encoder.encode_query("mountains snow peaks winter"), 1)
    (chunk_id, score), = hits
    assert "mountains" in store_sem.chunk_rows(engine, [chunk_id])[chunk_id]["text"] and score > 0.3
    assert any(p.suffix == ".hnsw" for p in vector_dir(engine).iterdir())


def test_unchanged_files_are_never_encoded_again(plans, folder, engine, fake_encoder):
    run(plans, folder)
    encoded = len(fake_encoder.encoded)
    again = run(plans, folder)
    out = _outcome(again)
    assert (out["applied"], out["skipped_unchanged_entries"]) == (0, 2)
    assert len(fake_encoder.encoded) == encoded


def test_a_changed_file_has_its_chunks_replaced_and_only_it_is_encoded(plans, folder, engine, fake_encoder):
    run(plans, folder)
    beta_id = _entry_id(engine, folder / "beta.md")
    old_ids = {c["id"] for c in _chunks(engine, beta_id)}
    version = store_sem.get_collection(engine, "default")["version"]
    _touch(folder / "beta.md", "# Beta\n\nNow the beta page is about deserts and camels.\n", at=1_700_000_500)
    fake_encoder.encoded.clear()

    out = _outcome(run(plans, folder))
    assert (out["applied"], out["skipped_unchanged_entries"]) == (1, 1)
    new = _chunks(engine, beta_id)
    assert "camels" in new[0]["text"] and not old_ids & {c["id"] for c in new}
    assert all("camels" in t or "Beta" in t for t in fake_encoder.encoded)  # alpha was not encoded again
    assert store_sem.get_collection(engine, "default")["version"] > version
    assert _count(engine, V) == _count(engine, K)


def test_a_deleted_file_leaves_the_collection(plans, folder, engine, fake_encoder):
    run(plans, folder)
    alpha_id = _entry_id(engine, folder / "alpha.txt")
    version = store_sem.get_collection(engine, "default")["version"]
    (folder / "alpha.txt").unlink()
    run(plans, folder)  # the scan removes the entry: its chunks, vectors and state go by cascade
    assert _chunks(engine, alpha_id) == []
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(CE).where(CE.c.entry_id == alpha_id)).scalar_one() == 0
    assert _count(engine, V) == _count(engine, K) > 0
    assert store_sem.get_collection(engine, "default")["version"] > version


def test_another_model_is_refused_for_an_existing_collection_and_nothing_is_written(plans, folder, engine,
                                                                                      fake_encoder):
    run(plans, folder)
    chunks = _count(engine, K)
    _touch(folder / "gamma.txt", "Gamma talks about forests.", at=1_700_000_000)
    row = run(plans, folder, model="another-model")
    assert row["status"] in ("partial", "error")
    text = str(row["summary"]) + str(row.get("error_message"))
    assert "MODEL_MISMATCH" in text and "another-model" in text
    assert _count(engine, K) == chunks
    assert _chunks(engine, _entry_id(engine, folder / "gamma.txt")) == []
    assert store_sem.get_collection(engine, "default")["model"] == fake_encoder.model


def test_a_file_that_cannot_be_extracted_is_an_error_of_a_partial_execution(plans, folder, engine, fake_encoder):
    _touch(folder / "broken.txt", b"not \x00 text \x00 at all", at=1_700_000_000)
    _touch(folder / "empty.md", "   \n", at=1_700_000_000)
    row = run(plans, folder)
    assert row["status"] == "partial"
    out = _outcome(row)
    assert out["errors"] == 1 and "FILTER_FAILED" in out["error_samples"][0]
    broken, empty = _entry_id(engine, folder / "broken.txt"), _entry_id(engine, folder / "empty.md")
    with engine.connect() as conn:
        states = {r.entry_id: (r.status, r.error) for r in conn.execute(select(CE))}
    assert states[broken][0] == "error" and "binary content" in states[broken][1]
    assert states[empty] == ("empty", None)
    # the same bytes fail the same way: not tried again
    fake_encoder.encoded.clear()
    again = _outcome(run(plans, folder))
    assert again["errors"] == 0 and again["skipped_unchanged_entries"] == 4 and fake_encoder.encoded == []


def test_text_not_extracted_yet_is_extracted_for_the_full_text_index_too(plans, folder, engine, fake_encoder):
    from store.documents import document_row

    run(plans, folder)
    doc = document_row(engine, _entry_id(engine, folder / "beta.md"))
    assert doc is not None and doc["status"] == "ok" and not doc["stale"]


def test_a_cancel_between_encode_batches_keeps_what_was_written(engine, folder, fake_encoder, monkeypatch):
    monkeypatch.setenv("ASSAY_EMBED_BATCH", "2")
    for i in range(6):
        _touch(folder / f"note{i}.txt", f"Note {i} says hello.", at=1_700_000_000)
    from flows.index.indexer import index_tree

    index_tree(engine, str(folder), scan_id=1)
    with engine.connect() as conn:
        rows = conn.execute(select(T).where(T.c.name.startswith("note")).order_by(T.c.path)).mappings().all()
    def should_cancel() -> bool:
        return fake_encoder.calls >= 2  # after the second encode batch

    params = EmbedParams(chunk_size=120, overlap=30, model=fake_encoder.model, backend=fake_encoder.backend)
    result = ex.embed_rows(engine, rows, params=params, should_cancel=should_cancel,
                           run=ex.EmbedRun(write_entries=1, write_chunks=1))
    coll = store_sem.get_collection(engine, "default")
    with engine.connect() as conn:
        written = conn.execute(select(func.count()).select_from(CE).where(CE.c.collection_id == coll["id"])
                               ).scalar_one()
    assert 0 < written < 6 and result.applied == written  # one chunk a note, two notes an encode batch
    assert _count(engine, V) == _count(engine, K)
    for entry_id in [r["id"] for r in rows]:  # what was written is whole: every chunk has its vector
        chunks = _chunks(engine, entry_id)
        assert len(store_sem.entry_vectors(engine, coll["id"], entry_id)) == len(chunks)


@pytest.mark.postgres
def test_on_postgresql_a_file_is_embedded_replaced_and_removed_too(pg_database, folder, fake_encoder):
    from store.engine import make_engine

    eng = make_engine(pg_database)
    svc = PlanService(eng, Roots.of([str(folder)]), use_prefect=False)
    try:
        assert run(svc, folder)["status"] == "success"
        beta_id, alpha_id = _entry_id(eng, folder / "beta.md"), _entry_id(eng, folder / "alpha.txt")
        assert "mountains" in _chunks(eng, beta_id)[0]["text"] and len(_chunks(eng, alpha_id)) > 3
        _touch(folder / "beta.md", "Deserts and camels now.\n", at=1_700_000_500)
        (folder / "alpha.txt").unlink()
        out = _outcome(run(svc, folder))
        assert (out["applied"], out["skipped_unchanged_entries"]) == (1, 0)
        assert [c["text"] for c in _chunks(eng, beta_id)] == ["Deserts and camels now."]
        assert _chunks(eng, alpha_id) == [] and _count(eng, V) == _count(eng, K) == 1
    finally:
        svc.shutdown()
        eng.dispose()


def test_each_write_lands_in_the_live_index_while_the_batch_goes_on(engine, folder, fake_encoder):
    """Searches see new chunks as they are written, not at the end of the batch."""
    from flows.index.indexer import index_tree
    from flows.semantic import vectors

    for i in range(4):
        _touch(folder / f"note{i}.txt", f"Note {i} talks about topic{i}.", at=1_700_000_000)
    index_tree(engine, str(folder), scan_id=1)
    with engine.connect() as conn:
        rows = conn.execute(select(T).where(T.c.name.startswith("note")).order_by(T.c.path)).mappings().all()
    params = EmbedParams(chunk_size=120, overlap=30, model=fake_encoder.model, backend=fake_encoder.backend)
    seen: list[tuple[int, bool]] = []

    def on_write(n: int) -> None:  # after each write: what a search finds now
        coll = store_sem.get_collection(engine, "default")
        index = vectors.index_for(engine, coll)
        k = len(seen)
        hits = index.search(fake_encoder.encode_query(f"topic{k}"), 1)
        seen.append((index.count, bool(hits) and "topic%d" % k in store_sem.chunk_rows(engine, [hits[0][0]])
                     [hits[0][0]]["text"]))

    ex.embed_rows(engine, rows, params=params, run=ex.EmbedRun(write_entries=1, on_write=on_write))
    assert seen == [(1, True), (2, True), (3, True), (4, True)]


def test_chunks_of_a_pdf_keep_their_pages(plans, folder, engine, fake_encoder):
    from store.documents import read_pages
    from examples.mediagen.documents import pdf_lines, pdf_with_outline

    pdf_with_outline(folder / "guide.pdf", pages=3)
    assert run(plans, folder, chunk_size=60, overlap=10)["status"] == "success"
    entry_id = _entry_id(engine, folder / "guide.pdf")
    chunks = _chunks(engine, entry_id)
    text = "\n".join(t for _, t, _ in read_pages(engine, entry_id))
    assert {c["page"] for c in chunks} == {1, 2, 3}
    for chunk in chunks:
        assert text[chunk["start"]:chunk["end"]] == chunk["text"]
        assert chunk["page"] <= chunk["page_end"]
    (last,) = [c for c in chunks if pdf_lines(3)[-1] in c["text"]]
    assert last["page_end"] == 3
