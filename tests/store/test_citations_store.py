"""store.citations on both stores: a resource read with its entry in one query, maps saved and rebuilt in order
(a 300-node map inserted in batches), nodes by id and by location, resource listings under prefixes, extract
artifacts kept per source version, and everything gone with its entry (foreign keys)."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import delete, func, insert, select

from store import citations as sc
from store.entries import T as E
from store.entries import make_row, upsert_entries
from tests.conftest import BACKENDS, backend_engine

ROOT = "/data/lib"


def _node(node_id: str, parent: str | None, pages: list[int]) -> dict:
    return {"node_id": node_id, "parent_node_id": parent, "title": node_id.upper(), "kind": "section",
            "location_json": json.dumps({"modality": "document", "pages": pages}, sort_keys=True,
                                        separators=(",", ":")), "summary": None}


def _big_map() -> list[dict]:
    """300 nodes in pre-order: 30 chapters of 9 sections each (30 + 270)."""
    nodes = []
    for c in range(1, 31):
        nodes.append(_node(f"c{c}", None, [c * 10, c * 10 + 9]))
        nodes.extend(_node(f"c{c}.s{s}", f"c{c}", [c * 10 + s, c * 10 + s]) for s in range(1, 10))
    return nodes


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "citations_store") as eng:
        yield eng


@pytest.fixture
def resources(engine):
    """Entries and resource rows: book.pdf, talk.mp4, other/notes.md under ROOT, and one outside it."""
    paths = [f"{ROOT}/book.pdf", f"{ROOT}/talk.mp4", f"{ROOT}/other/notes.md", "/elsewhere/x.pdf"]
    names = ["book", "talk", "notes", "x"]
    with engine.begin() as conn:
        conn.execute(delete(sc.R))
        conn.execute(delete(E))
        upsert_entries(conn, [make_row(p, kind="file", size=100 + i, mtime=1000.0 + i, ctime=1000.0, inode=i,
                                       scan_id=None, indexed_at=time.time()) for i, p in enumerate(paths)])
        ids = {r.path: r.id for r in conn.execute(select(E.c.id, E.c.path))}
        conn.execute(insert(sc.R), [{"resource_id": n, "entry_id": ids[p], "kind": "document", "origin": "none",
                                     "created_at": time.time()} for n, p in zip(names, paths)])
        map_ids = dict(conn.execute(select(sc.R.c.resource_id, sc.R.c.id)).all())
    return {"entries": ids, "maps": map_ids}


def _save(engine, map_id: int, nodes: list[dict], source_hash: str = "xxh128:aa") -> None:
    sc.save_map(engine, map_id, kind="document", origin="outline", title="Book", strategy="auto", source_size=100,
                source_mtime=1000.0, source_hash=source_hash, metadata={"facts": {"page_count": 320}}, nodes=nodes)


def test_a_resource_comes_with_its_entry_in_one_row(engine, resources):
    with engine.connect() as conn:
        row = sc.resource(conn, "book")
        by_entry = sc.resource_by_entry(conn, resources["entries"][f"{ROOT}/book.pdf"])
        assert sc.resource(conn, "nope") is None
    assert row["path"] == f"{ROOT}/book.pdf" and row["name"] == "book.pdf" and row["size"] == 100
    assert row["mtime"] == 1000.0 and row["media_type"] == "document" and row["origin"] == "none"
    assert by_entry == row and row["id"] == resources["maps"]["book"]


def test_a_300_node_map_is_saved_in_batches_and_comes_back_in_pre_order(engine, resources, monkeypatch):
    monkeypatch.setattr(sc, "NODE_BATCH", 64)  # several INSERTs for one map
    map_id = resources["maps"]["book"]
    _save(engine, map_id, _big_map())
    with engine.connect() as conn:
        rows = sc.load_nodes(conn, map_id)
        row = sc.resource(conn, "book")
        assert [r["ordinal"] for r in rows] == list(range(300))
        assert [r["node_id"] for r in rows][:11] == ["c1"] + [f"c1.s{s}" for s in range(1, 10)] + ["c2"]
        c2 = sc.node(conn, map_id, "c2")
        assert c2["children"] == [f"c2.s{s}" for s in range(1, 10)]
        assert "children" not in sc.node(conn, map_id, "c2", children=False)
        assert sc.node(conn, map_id, "c99") is None
        some, total = sc.node_ids(conn, map_id, limit=3)
        assert (some, total) == (["c1", "c1.s1", "c1.s2"], 300)
        found = sc.node_at(conn, map_id, _node("x", None, [21, 21])["location_json"])
        assert found["node_id"] == "c2.s1"
    assert row["origin"] == "outline" and row["title"] == "Book" and row["source_hash"] == "xxh128:aa"
    assert json.loads(row["metadata_json"]) == {"facts": {"page_count": 320}} and row["stale"] == 0

    _save(engine, map_id, [_node("only", None, [1, 2])])  # a new map replaces every node
    with engine.connect() as conn:
        assert [r["node_id"] for r in sc.load_nodes(conn, map_id)] == ["only"]


def test_deleting_a_map_keeps_the_reserved_id(engine, resources):
    map_id = resources["maps"]["book"]
    _save(engine, map_id, _big_map()[:5])
    assert sc.delete_map(engine, map_id) is True
    assert sc.delete_map(engine, map_id) is False  # no map any more
    with engine.connect() as conn:
        row = sc.resource(conn, "book")
        assert sc.load_nodes(conn, map_id) == []
    assert row["origin"] == "none" and row["resource_id"] == "book"


def test_stale_marks_and_source_updates(engine, resources):
    map_id = resources["maps"]["talk"]
    with engine.begin() as conn:
        sc.mark_stale(conn, map_id)
        sc.update_source(conn, map_id, size=5, mtime=6.0, source_hash="xxh128:bb", metadata={"facts": {}})
    with engine.connect() as conn:
        row = sc.resource(conn, "talk")
    assert (row["stale"], row["source_size"], row["source_mtime"], row["source_hash"]) == (1, 5, 6.0, "xxh128:bb")


def test_resource_ids_are_listed_under_prefixes_sorted_and_paged(engine, resources):
    with engine.connect() as conn:
        assert sc.list_resource_ids(conn, [ROOT]) == (["book", "notes", "talk"], 3)
        assert sc.list_resource_ids(conn, [f"{ROOT}/other"]) == (["notes"], 1)
        assert sc.list_resource_ids(conn, [f"{ROOT}/other", "/elsewhere"]) == (["notes", "x"], 2)
        assert sc.list_resource_ids(conn, [ROOT], limit=2, offset=1) == (["notes", "talk"], 3)
        assert sc.list_resource_ids(conn, [f"{ROOT}/oth"]) == ([], 0)  # a prefix of a name is not a folder
        assert sc.resource_ids(conn, limit=2) == (["book", "notes"], 4)
        by_entry = sc.resources_by_entries(conn, list(resources["entries"].values()))
    assert sorted(r["resource_id"] for r in by_entry.values()) == ["book", "notes", "talk", "x"]


def test_extract_artifacts_are_kept_once_per_output_and_dropped_with_their_source_version(engine, resources):
    entry = resources["entries"][f"{ROOT}/book.pdf"]
    kw = {"mime_type": "application/pdf", "address": "doc://book#pages=2-3", "exact": False}
    assert sc.record_extract(engine, entry, cache_path="cache/aa/bb/1.pdf", source_hash="xxh128:v1", **kw)
    assert not sc.record_extract(engine, entry, cache_path="cache/aa/bb/1.pdf", source_hash="xxh128:v1", **kw)
    assert sc.record_extract(engine, entry, cache_path="cache/aa/bb/2.pdf", source_hash="xxh128:v1", **kw)
    with engine.connect() as conn:
        first = sc.extracts(conn, entry)
    assert [a["cache_path"] for a in first] == ["cache/aa/bb/1.pdf", "cache/aa/bb/2.pdf"]
    assert first[0]["value"] == {"address": "doc://book#pages=2-3", "exact": False}
    # the source changed: outputs of the old version go, the new one is recorded
    assert sc.record_extract(engine, entry, cache_path="cache/cc/dd/3.pdf", source_hash="xxh128:v2", **kw)
    with engine.connect() as conn:
        assert [a["cache_path"] for a in sc.extracts(conn, entry)] == ["cache/cc/dd/3.pdf"]
    with engine.begin() as conn:
        assert sc.drop_old_extracts(conn, entry, "xxh128:v3") == 1


def test_deleting_an_entry_takes_its_resource_map_nodes_and_outputs_with_it(engine, resources):
    entry = resources["entries"][f"{ROOT}/book.pdf"]
    map_id = resources["maps"]["book"]
    _save(engine, map_id, _big_map()[:20])
    sc.record_extract(engine, entry, mime_type="application/pdf", cache_path="cache/aa/bb/1.pdf",
                      source_hash="xxh128:v1", address="doc://book", exact=False)
    with engine.begin() as conn:
        conn.execute(delete(E).where(E.c.id == entry))
    with engine.connect() as conn:
        assert sc.resource(conn, "book") is None
        assert conn.execute(select(func.count()).select_from(sc.N).where(sc.N.c.map_id == map_id)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(sc.A).where(sc.A.c.entry_id == entry)).scalar() == 0
    # an output recorded for an entry deleted meanwhile is not written (its row would break the foreign key)
    assert not sc.record_extract(engine, entry, mime_type="application/pdf", cache_path="cache/aa/bb/9.pdf",
                                 source_hash="xxh128:v1", address="doc://book", exact=False)
