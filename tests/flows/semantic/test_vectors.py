"""The hnswlib index of a collection: recall against brute force, the file's round trip, rebuilds of a missing or
corrupt file, catching up with writes made behind its back (another engine, a cascade delete), filters, and
searches running while vectors are added. Random normalised vectors, no model."""

from __future__ import annotations

import threading

import hnswlib
import numpy as np
import pytest
from sqlalchemy import delete

from flows.semantic import vectors as vec
from flows.semantic.model import ChunkSpan
from flows.semantic.vector_files import SPACE, VectorFiles
from store import semantic as sem
from store.engine import make_engine
from store.models import Entry
from tests.conftest import BACKENDS, backend_engine
from tests.store.test_documents import add_files

DIM = 32


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def entry(eid: int, n: int, rng: np.random.Generator, key: str = "k") -> sem.EntryChunks:
    chunks = [ChunkSpan(i, i * 10, i * 10 + 9, i + 1, i + 1, None, None, f"chunk {i} of {eid}") for i in range(n)]
    return sem.EntryChunks(eid, key, "ok", None, chunks, unit(rng, n))


def populate(engine, name: str, files: int, per_file: int, seed: int = 0) -> tuple[dict, dict[str, int]]:
    """A collection ``name`` with ``files`` entries of ``per_file`` random vectors each (written through the store,
    not through an index)."""
    rng = np.random.default_rng(seed)
    col = sem.ensure_collection(engine, name, model="m", backend="torch", dim=DIM)
    ids = add_files(engine, *[f"/vec/{name}/{i}.txt" for i in range(files)])
    eids = list(ids.values())
    for i in range(0, len(eids), 16):
        sem.replace_entries(engine, col["id"], [entry(e, per_file, rng) for e in eids[i:i + 16]])
    return sem.get_collection(engine, name), ids


def stored(engine, col: dict) -> tuple[np.ndarray, np.ndarray]:
    parts = list(sem.iter_vectors(engine, col["id"]))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def brute(ids: np.ndarray, vectors: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    scores = vectors @ q
    order = np.lexsort((ids, -scores))[:k]
    return [int(ids[i]) for i in order]


@pytest.fixture(autouse=True)
def fresh_cache():
    vec.clear_cache()
    yield
    vec.clear_cache()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    e = make_engine(f"sqlite:///{tmp_path_factory.mktemp('vectors') / 'assay.db'}")
    yield e
    e.dispose()


@pytest.fixture(scope="module")
def big(engine):
    """~5,000 vectors in one collection, shared by the read-only tests."""
    col, _ = populate(engine, "big", files=50, per_file=100, seed=1)
    return col


def test_recall_at_10_against_brute_force_is_at_least_095(engine, big):
    index = vec.index_for(engine, big)
    ids, vectors = stored(engine, big)
    assert len(ids) == 5000
    queries = unit(np.random.default_rng(2), 50)
    by_id = dict(zip(ids.tolist(), vectors))
    hits = total = 0
    for q in queries:
        got = index.search(q, 10)
        assert len(got) == 10 and [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        truth = brute(ids, vectors, q, 10)
        hits += len({c for c, _ in got} & set(truth))
        total += 10
        assert all(abs(s - float(by_id[c] @ q)) < 1e-4 for c, s in got)  # scores are cosines
    assert hits / total >= 0.95
    assert index.count == 5000


def test_allowed_ids_are_scored_exactly_and_nothing_else_is_returned(engine, big):
    index = vec.index_for(engine, big)
    ids, vectors = stored(engine, big)
    rng = np.random.default_rng(3)
    allowed = rng.choice(ids, 300, replace=False)
    mask = np.isin(ids, allowed)
    for q in unit(rng, 5):
        got = index.search(q, 10, allowed=allowed)
        assert [c for c, _ in got] == brute(ids[mask], vectors[mask], q, 10)
    assert index.search(unit(rng, 1)[0], 10, allowed=np.array([], dtype=np.int64)) == []


def test_a_large_allowed_set_goes_through_the_filtered_graph_search(engine, big, monkeypatch):
    monkeypatch.setattr(vec, "EXACT_LIMIT", 100)
    index = vec.index_for(engine, big)
    ids, vectors = stored(engine, big)
    rng = np.random.default_rng(4)
    allowed = rng.choice(ids, 2000, replace=False)
    mask = np.isin(ids, allowed)
    hits = 0
    for q in unit(rng, 20):
        got = [c for c, _ in index.search(q, 10, allowed=allowed)]
        assert len(got) == 10 and set(got) <= set(allowed.tolist())
        hits += len(set(got) & set(brute(ids[mask], vectors[mask], q, 10)))
    assert hits / 200 >= 0.9


def test_save_and_load_round_trip_without_rebuilding(engine, monkeypatch):
    col, _ = populate(engine, "roundtrip", files=10, per_file=20, seed=5)
    index = vec.index_for(engine, col)
    queries = unit(np.random.default_rng(6), 5)
    before = [index.search(q, 5) for q in queries]
    index.save()
    assert index.hnsw_path.exists() and index.meta_path.exists()
    assert not list(index.directory.glob("*.tmp"))
    vec.clear_cache()

    def no_rebuild(self):
        raise AssertionError("the saved file should have been loaded, not rebuilt")

    monkeypatch.setattr(vec.VectorIndex, "_rebuild", no_rebuild)
    again = vec.index_for(engine, col)
    assert again is not index
    assert [again.search(q, 5) for q in queries] == before
    assert again.version == sem.collection_version(engine, col["id"]) and again.count == 200


def test_live_ids_are_the_collections_chunk_ids_once_caught_up(engine):
    col, ids = populate(engine, "live", files=4, per_file=3, seed=10)
    index = vec.index_for(engine, col)
    index.load()
    assert index.live_ids().tolist() == sorted(sem.chunk_ids(engine, col["id"]).tolist())
    sem.remove_entries(engine, col["id"], [ids["/vec/live/0.txt"]])
    index.refresh(wait=True)
    assert len(index.live_ids()) == 9 and index.live_ids().tolist() == sorted(sem.chunk_ids(engine, col["id"]).tolist())


def test_temporary_files_of_a_save_killed_mid_write_are_removed_by_the_next_save(tmp_path):
    files = VectorFiles(tmp_path, 7)
    left = [tmp_path / "7.hnsw.999.1.tmp", tmp_path / "7.json.999.1.tmp"]
    other = tmp_path / "17.hnsw.999.1.tmp"  # another collection's writer: not ours to remove
    for path in (*left, other):
        path.write_bytes(b"half a file")
    index = hnswlib.Index(space=SPACE, dim=DIM)
    index.init_index(max_elements=4)
    index.add_items(unit(np.random.default_rng(9), 2), [1, 2])
    files.write(index, {"version": 1})
    assert not any(p.exists() for p in left) and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["17.hnsw.999.1.tmp", "7.hnsw", "7.json", "7.lock"]


def _wait_ready(index: vec.VectorIndex) -> None:
    index.refresh(wait=True)
    if index._building is not None:
        index._building.join(30)
    assert index.ready


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage"])
@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_missing_or_corrupt_file_is_rebuilt_from_the_store_with_the_same_answers(engine, damage, background,
                                                                                  monkeypatch):
    if background:  # the rebuild runs in a thread; searches meanwhile are answered from the stored vectors
        monkeypatch.setattr(vec, "SYNC_REBUILD_LIMIT", 0)
    col, _ = populate(engine, f"damaged-{damage}-{background}", files=8, per_file=25, seed=7)
    index = vec.index_for(engine, col)
    queries = unit(np.random.default_rng(8), 5)
    before = [index.search(q, 5) for q in queries]
    index.save()
    path = index.hnsw_path
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size // 2)
    else:
        size = path.stat().st_size
        path.write_bytes(b"\x07" * size)  # same size, nonsense content
    vec.clear_cache()
    again = vec.index_for(engine, col)
    # answered at once (inline rebuild, or exactly from the stored vectors while the file is rebuilt)
    first = [again.search(q, 5) for q in queries]
    assert [[c for c, _ in r] for r in first] == [[c for c, _ in r] for r in before]
    _wait_ready(again)
    after = [again.search(q, 5) for q in queries]
    assert [[c for c, _ in r] for r in after] == [[c for c, _ in r] for r in before]
    assert path.exists() and again.count == 200
    vec.clear_cache()
    assert vec.index_for(engine, col)._read_file() is not None  # the rebuilt file loads


def test_writes_through_apply_are_searchable_and_deletions_never_returned(engine):
    col, ids = populate(engine, "apply", files=5, per_file=10, seed=9)
    index = vec.index_for(engine, col)
    rng = np.random.default_rng(10)
    eids = list(ids.values())
    new = entry(eids[0], 3, rng, key="k2")
    rep = sem.replace_entries(engine, col["id"], [new])
    index.apply(rep)
    assert index.version == sem.collection_version(engine, col["id"])  # nothing else wrote in between
    for cid, v in zip(rep.added_ids, new.vectors):
        assert index.search(v, 1)[0][0] == int(cid)
    gone = set(rep.removed_ids.tolist())
    assert len(gone) == 10
    for q in unit(rng, 10):
        assert not gone & {c for c, _ in index.search(q, 50)}
    assert index.count == 43


def test_deleting_more_than_a_third_compacts_the_file_at_the_next_save(engine):
    col, ids = populate(engine, "compact", files=10, per_file=10, seed=11)
    index = vec.index_for(engine, col)
    index.search(unit(np.random.default_rng(0), 1)[0], 1)
    removed = sem.remove_entries(engine, col["id"], list(ids.values())[:4])
    index.apply(sem.Replaced.removal(removed, DIM))
    assert index.count == 60 and index._elements == 100
    index.save()
    assert index.count == 60 and index._elements == 60
    vec.clear_cache()
    assert vec.index_for(engine, col).search(unit(np.random.default_rng(1), 1)[0], 100).__len__() == 60


def test_concurrent_searches_while_vectors_are_added_never_fail(engine):
    col, ids = populate(engine, "concurrent", files=4, per_file=50, seed=12)
    index = vec.index_for(engine, col)
    index.search(unit(np.random.default_rng(0), 1)[0], 1)
    more = add_files(engine, *[f"/vec/concurrent/more{i}.txt" for i in range(15)])
    errors: list[BaseException] = []
    done = threading.Event()

    def writer():
        rng = np.random.default_rng(13)
        try:
            for eid in more.values():
                index.apply(sem.replace_entries(engine, col["id"], [entry(eid, 40, rng)]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    def reader(seed: int):
        rng = np.random.default_rng(seed)
        try:
            while not done.is_set():
                q = unit(rng, 1)[0]
                got = index.search(q, 10)
                assert len(got) == 10
                index.search(q, 5, allowed=np.array([c for c, _ in got[:3]]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(s,)) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert index.count == 200 + 15 * 40 == len(sem.chunk_ids(engine, col["id"]))


@pytest.fixture(params=BACKENDS)
def any_store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "vecbehind") as e:
        yield e


def test_changes_made_behind_the_index_are_seen_by_the_next_search(any_store):
    engine = any_store
    col, ids = populate(engine, "behind", files=6, per_file=10, seed=14)
    index = vec.index_for(engine, col)
    q0 = unit(np.random.default_rng(15), 1)[0]
    index.search(q0, 5)
    index.save()
    other = make_engine(engine.url.render_as_string(hide_password=False))  # another process's engine
    try:
        rng = np.random.default_rng(16)
        fresh = add_files(other, "/vec/behind/new.txt")["/vec/behind/new.txt"]
        new = entry(fresh, 4, rng)
        added = sem.replace_entries(other, col["id"], [new]).added_ids
        victim = ids["/vec/behind/0.txt"]
        victim_vectors = sem.entry_vectors(other, col["id"], victim)
        with other.begin() as conn:  # the entry goes; its chunks and vectors by cascade
            conn.execute(delete(Entry.__table__).where(Entry.__table__.c.id == victim))
    finally:
        other.dispose()
    for cid, v in zip(added, new.vectors):
        assert index.search(v, 1)[0][0] == int(cid)
    live = set(sem.chunk_ids(engine, col["id"]).tolist())
    for v in victim_vectors:
        assert {c for c, _ in index.search(v, 20)} <= live
    assert index.count == len(live) == 54
    # a fresh process loading the (older) file catches up the same way
    vec.clear_cache()
    again = vec.index_for(engine, col)
    assert again.search(new.vectors[0], 1)[0][0] == int(added[0]) and again.count == 54


def test_drop_index_deletes_the_files_and_the_cached_index(engine):
    col, _ = populate(engine, "dropped", files=2, per_file=5, seed=17)
    index = vec.index_for(engine, col)
    index.search(unit(np.random.default_rng(0), 1)[0], 1)
    index.save()
    vec.drop_index(engine, col["id"])
    assert not index.hnsw_path.exists() and not index.meta_path.exists()
    assert vec.index_for(engine, col) is not index


def test_a_replaced_entry_gets_new_chunk_ids_never_freed_ones(engine):
    """Chunk ids are never reused (SQLite AUTOINCREMENT), so an index catching up by ids alone cannot keep an old
    vector under an id that now names another chunk; replacing the highest ids shows it."""
    col, ids = populate(engine, "reuse", files=3, per_file=4, seed=18)
    index = vec.index_for(engine, col)
    index.search(unit(np.random.default_rng(0), 1)[0], 1)
    index.save()
    last = max(ids.values())
    new = entry(last, 4, np.random.default_rng(19), key="k2")
    rep = sem.replace_entries(engine, col["id"], [new])
    assert not set(rep.added_ids.tolist()) & set(rep.removed_ids.tolist())
    assert min(rep.added_ids) > max(rep.removed_ids)
    old_vectors = [index._index.get_items([int(c)])[0] for c in rep.removed_ids]
    vec.clear_cache()  # another process: its file is behind and catches up by diffing ids
    index = vec.index_for(engine, col)
    for cid, v in zip(rep.added_ids, new.vectors):
        top, score = index.search(v, 1)[0]
        assert top == int(cid) and score == pytest.approx(1.0, abs=1e-4)
    for v in old_vectors:  # the old vectors are gone
        assert all(score < 0.999 for _, score in index.search(np.asarray(v, dtype=np.float32), 3))
    assert index.count == 12
