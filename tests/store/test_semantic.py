"""The semantic index's store: collections (model mismatch, races, not found), replacing an entry's chunks and
vectors, removal by cascade bumping the version, vector streams, and the words of keyword queries, on both stores."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import delete, func, select

from flows.semantic.model import ChunkSpan
from store import semantic as sem
from store.errors import DocumentError
from store.models import Chunk, Embedding, Entry
from tests.conftest import BACKENDS, backend_engine
from tests.store.test_documents import add_files

DIM = 8


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "semantic") as engine:
        yield engine


def spans(*texts: str) -> list[ChunkSpan]:
    out, start = [], 0
    for i, t in enumerate(texts):
        out.append(ChunkSpan(i, start, start + len(t), i + 1, i + 1, None, None, t))
        start += len(t) + 1
    return out


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def item(entry_id: int, *texts: str, key: str = "k", rng=None) -> sem.EntryChunks:
    rng = rng or np.random.default_rng(entry_id)
    return sem.EntryChunks(entry_id, key, "ok", None, spans(*texts), unit(rng, len(texts)) if texts else None)


def collection(store, name: str) -> dict:
    return sem.ensure_collection(store, name, model="m", backend="torch", dim=DIM)


def test_ensure_collection_creates_once_and_refuses_another_model(store):
    first = collection(store, "c-models")
    again = sem.ensure_collection(store, "c-models", model="m", backend="torch", dim=DIM, chunk_size=500,
                                  overlap=50)
    assert again["id"] == first["id"] and again["chunk_size"] == 500 and again["folders"] == []
    with pytest.raises(DocumentError) as err:
        sem.ensure_collection(store, "c-models", model="other", backend="onnx", dim=DIM)
    assert err.value.code == "MODEL_MISMATCH"
    assert "model m (backend torch" in err.value.message and "other (backend onnx" in err.value.message


def test_ensure_collection_is_safe_when_two_jobs_create_it_at_once(store):
    results, errors = [], []

    def make():
        try:
            results.append(collection(store, "c-race")["id"])
        except Exception as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and len(results) == 4


def test_require_collection_names_the_collections_that_exist(store):
    collection(store, "c-known")
    with pytest.raises(DocumentError) as err:
        sem.require_collection(store, "nope")
    assert err.value.code == "INDEX_NOT_FOUND" and "c-known" in err.value.message
    assert sem.require_collection(store, "c-known")["name"] == "c-known"


def test_require_collection_on_an_empty_store_says_index_files_builds_one(tmp_path):
    from store.engine import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        with pytest.raises(DocumentError) as err:
            sem.require_collection(engine, "default")
        assert err.value.code == "INDEX_NOT_FOUND" and "index_files" in err.value.message
    finally:
        engine.dispose()


def test_replace_entries_swaps_chunks_vectors_and_bumps_the_version(store):
    col = collection(store, "c-replace")
    ids = add_files(store, "/sem/r/a.txt", "/sem/r/b.txt", "/sem/r/empty.txt")
    a, b, empty = ids["/sem/r/a.txt"], ids["/sem/r/b.txt"], ids["/sem/r/empty.txt"]
    first = sem.replace_entries(store, col["id"], [item(a, "alpha one", "alpha two"), item(b, "beta"),
                                                   sem.EntryChunks(empty, "ke", "empty")])
    assert len(first.added_ids) == 3 and first.vectors.shape == (3, DIM) and len(first.removed_ids) == 0
    assert first.previous == col["version"] and first.version > first.previous
    assert sem.entry_keys(store, col["id"], [a, b, empty, 999999]) == {a: "k", b: "k", empty: "ke"}
    rows = sem.chunk_rows(store, first.added_ids)
    assert [rows[int(i)]["text"] for i in first.added_ids] == ["alpha one", "alpha two", "beta"]
    assert rows[int(first.added_ids[2])]["path"] == "/sem/r/b.txt"
    # the stored vectors are the ones given, in order
    assert np.allclose(sem.entry_vectors(store, col["id"], a), first.vectors[:2])
    assert np.allclose(sem.entry_vectors(store, col["id"], b), first.vectors[2:])
    assert sem.entry_vectors(store, col["id"], empty).shape == (0, DIM)

    second = sem.replace_entries(store, col["id"], [item(a, "alpha new", key="k2", rng=np.random.default_rng(9))])
    assert sorted(second.removed_ids.tolist()) == sorted(first.added_ids[:2].tolist())
    assert second.previous == first.version and second.version > second.previous
    assert sem.entry_keys(store, col["id"], [a]) == {a: "k2"}
    assert [c["text"] for c in sem.entry_chunks(store, col["id"], a)] == ["alpha new"]
    with store.connect() as conn:
        left = conn.execute(select(func.count()).select_from(Embedding.__table__)
                            .where(Embedding.__table__.c.chunk_id.in_([int(i) for i in first.added_ids[:2]]))
                            ).scalar()
    assert left == 0  # the old vectors went with their chunks
    listed = {c["name"]: c for c in sem.list_collections(store)}["c-replace"]
    assert (listed["documents"], listed["entries"], listed["chunks"]) == (2, 3, 2)


def test_vectors_stream_in_batches_and_by_ids(store):
    col = collection(store, "c-stream")
    ids = add_files(store, *[f"/sem/s/{i}.txt" for i in range(5)])
    rep = sem.replace_entries(store, col["id"], [item(e, "x", "y", "z") for e in ids.values()])
    batches = list(sem.iter_vectors(store, col["id"], batch=4))
    assert [len(b[0]) for b in batches] == [4, 4, 4, 3]
    all_ids = np.concatenate([b[0] for b in batches])
    assert sorted(all_ids.tolist()) == sorted(rep.added_ids.tolist())
    assert sorted(sem.chunk_ids(store, col["id"]).tolist()) == sorted(rep.added_ids.tolist())
    some = rep.added_ids[[1, 7, 11]]
    (got_ids, got_vecs), = list(sem.iter_vectors(store, col["id"], ids=np.append(some, 10**9)))
    order = {int(c): i for i, c in enumerate(rep.added_ids)}
    assert sorted(got_ids.tolist()) == sorted(some.tolist())
    for cid, v in zip(got_ids, got_vecs):
        assert np.allclose(v, rep.vectors[order[int(cid)]])


def test_an_entry_deleted_meanwhile_is_dropped_not_failing_the_batch(store):
    col = collection(store, "c-gone")
    ids = add_files(store, "/sem/g/keep.txt", "/sem/g/gone.txt")
    with store.begin() as conn:
        conn.execute(delete(Entry.__table__).where(Entry.__table__.c.id == ids["/sem/g/gone.txt"]))
    rep = sem.replace_entries(store, col["id"], [item(ids["/sem/g/keep.txt"], "kept"),
                                                 item(ids["/sem/g/gone.txt"], "lost")])
    assert len(rep.added_ids) == 1
    assert set(sem.entry_keys(store, col["id"], ids.values())) == {ids["/sem/g/keep.txt"]}


def test_deleting_an_entry_cascades_and_bumps_the_collection_version(store):
    col = collection(store, "c-cascade")
    eid = add_files(store, "/sem/c/a.txt")["/sem/c/a.txt"]
    rep = sem.replace_entries(store, col["id"], [item(eid, "one", "two")])
    with store.begin() as conn:
        conn.execute(delete(Entry.__table__).where(Entry.__table__.c.id == eid))
    assert sem.collection_version(store, col["id"]) > rep.version
    assert len(sem.chunk_ids(store, col["id"])) == 0 and sem.entry_keys(store, col["id"], [eid]) == {}


def test_remove_entries_returns_the_removed_chunk_ids(store):
    col = collection(store, "c-remove")
    ids = add_files(store, "/sem/m/a.txt", "/sem/m/b.txt")
    rep = sem.replace_entries(store, col["id"], [item(e, "w1", "w2") for e in ids.values()])
    before = sem.collection_version(store, col["id"])
    removed = sem.remove_entries(store, col["id"], [ids["/sem/m/a.txt"]])
    assert sorted(removed.tolist()) == sorted(rep.added_ids[:2].tolist())
    assert sem.collection_version(store, col["id"]) > before
    assert set(sem.entry_keys(store, col["id"], ids.values())) == {ids["/sem/m/b.txt"]}


def test_allowed_chunk_ids_are_the_chunks_of_the_given_entries(store):
    col = collection(store, "c-allowed")
    ids = add_files(store, "/sem/a/a.txt", "/sem/a/b.txt", "/sem/a/c.txt")
    rep = sem.replace_entries(store, col["id"], [item(e, "p", "q") for e in ids.values()])
    got = sem.allowed_chunk_ids(store, col["id"], [ids["/sem/a/a.txt"], ids["/sem/a/c.txt"], 10**9])
    assert got.tolist() == sorted(rep.added_ids[[0, 1, 4, 5]].tolist())
    assert len(sem.allowed_chunk_ids(store, col["id"], [])) == 0


def test_queries_of_ten_thousand_characters_keep_their_first_words():
    query = ("needle " + " ".join(f"word{i}" for i in range(2000)))[:10_000]
    assert len(sem.query_words(query)) == sem.MAX_QUERY_WORDS and sem.query_words(query)[0] == "needle"


def test_chunk_rows_of_missing_ids_are_absent(store):
    assert sem.chunk_rows(store, [10**9]) == {}
    with store.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Chunk.__table__).where(
            Chunk.__table__.c.id == 10**9)).scalar() == 0


def test_keyword_queries_leave_out_english_function_words_unless_nothing_else_is_left():
    assert sem.query_words("What is the capital of France?") == ["capital", "france"]
    assert sem.query_words("to be or not to be") == ["to", "be", "or", "not"]
