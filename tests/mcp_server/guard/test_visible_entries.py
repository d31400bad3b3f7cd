"""A user limited to some roots sees only the entries under them in every store listing, count and sum (issue 23):
sets whose members lie under other roots, saved queries made by others, the resource queries' aggregates, the
metadata resources and inspect's duplicates; a content hash known only outside reads as an unknown one. ada (an
admin, not limited) sees everything through the same calls. One guarded server for the module (guarded.py):
lim is an editor limited to the tree's Photos."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from sqlalchemy import select

from store import artifacts as store_artifacts
from store import set_queries
from store import visibility
from store.entries import T, count_entries, get_entry, make_row, upsert_entries
from tests.mcp_server.guard.guarded import Guarded, guarded_server

SHARED_HASH = "xxh128:" + "ab" * 16  # Photos/photo.jpg and docs/readme.md: the same content
DOCS_HASH = "xxh128:" + "cd" * 16  # docs/report_2024.pdf alone
UNKNOWN_HASH = "xxh128:" + "ef" * 16
SET_MEMBERS = ["Photos/photo.jpg", "Photos/vacation/beach.jpg", "docs/readme.md", "docs/report_2024.pdf",
               "Videos/movie.mp4"]
CHILD_MEMBERS = ["Photos/notes.txt", "docs/deep/a/b/c.txt"]


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[Guarded]:
    with guarded_server(tmp_path_factory.mktemp("visible")) as g:
        yield g


async def call(c: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await c.call_tool(tool, arguments)
    assert not result.is_error, getattr(result.content[0], "text", result.content)
    assert result.structured_content is not None
    return result.structured_content


async def read(c: Client, uri: str) -> dict[str, Any]:
    result = await c.read_resource(uri)
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


def give_artifacts(g: Guarded) -> None:
    """What a classifier's metadata operation leaves (a record and the content hash), written to the store directly:
    two files with the same content, one under Photos and one under docs, and a hash only docs has."""
    hashes = {"Photos/photo.jpg": SHARED_HASH, "docs/readme.md": SHARED_HASH, "docs/report_2024.pdf": DOCS_HASH}
    with g.app.engine.begin() as conn:
        ids = {rel: conn.execute(select(T.c.id).where(T.c.path == str(g.tree / rel))).scalar_one() for rel in hashes}
        store_artifacts.insert_artifacts(conn, [
            {"entry_id": ids[rel], "type": "metadata", "mime_type": "application/json", "cache_path": None,
             "source_hash": h, "value": {"metadata": {"size": 1}, "details": {}, "hash": h}}
            for rel, h in hashes.items()])
        store_artifacts.set_entry_hashes(conn, {ids[rel]: h for rel, h in hashes.items()})


@pytest.fixture(scope="module")
async def world(guarded: Guarded) -> Guarded:
    """ada indexes the whole tree, puts entries of Photos, docs and Videos in a set (and a child set), saves a query
    of every file; the classifier's traces are added beside."""
    async with guarded.session("ada") as c:
        await call(c, "index", {"root": str(guarded.tree), "async": False})
        for name, members in (("mixed", SET_MEMBERS), ("mixed-child", CHILD_MEMBERS)):
            await call(c, "resource-set-create", {"name": name})
            await call(c, "resource-set-modify", {"name": name, "operation": "add",
                                                  "paths": [str(guarded.tree / m) for m in members]})
        await call(c, "resource-set-add-child", {"parent": "mixed", "child": "mixed-child"})
        await call(c, "query-create", {"name": "every-file", "query": {"kind": "file"}})
    give_artifacts(guarded)
    return guarded


def paths_of(entries: list[dict[str, Any]]) -> set[str]:
    return {e["path"] for e in entries}


def under(g: Guarded, *rels: str) -> set[str]:
    return {str(g.tree / r) for r in rels}


@pytest.mark.anyio
async def test_a_set_shows_a_limited_user_only_its_members_under_their_roots(world):
    for user, seen, child_seen in (("lim", SET_MEMBERS[:2], CHILD_MEMBERS[:1]),
                                   ("ada", SET_MEMBERS, CHILD_MEMBERS)):
        async with world.session(user) as c:
            got = await call(c, "resource-set-get", {"name": "mixed", "include_entries": True})
            listed = (await call(c, "resource-set-list", {}))["resource_sets"]
            children = (await call(c, "resource-children", {"name": "mixed", "include_entries": True}))["children"]
            page = await read(c, "synthesis://resource-sets/mixed/entries")
        assert paths_of(got["entries"]) == under(world, *seen), user
        assert got["entry_count"] == len(seen) and got["hasMore"] is False
        assert got["total_entry_count"] == len(seen) + len(child_seen)
        assert {s["name"]: s["entry_count"] for s in listed}["mixed"] == len(seen)
        assert [(n["name"], n["entry_count"]) for n in children] == [("mixed-child", len(child_seen))]
        assert paths_of(children[0]["entries"]) == under(world, *child_seen)
        assert paths_of(page["entries"]) == under(world, *seen) and page["total"] == len(seen)


@pytest.mark.anyio
async def test_resource_queries_page_and_count_only_visible_entries(world):
    async with world.session("lim") as c:
        search = await call(c, "resource-search", {"name": "mixed", "include_children": True, "limit": 1})
        times = await call(c, "resource-time-range", {"name": "mixed", "field": "mtime"})
        fuzzy = await call(c, "resource-fuzzy-match", {"name": "mixed", "field": "name", "pattern": "."})
        is_file = await call(c, "resource-is", {"name": "mixed", "field": "kind", "value": "file"})
    photos = under(world, "Photos/photo.jpg", "Photos/vacation/beach.jpg", "Photos/notes.txt")
    assert search["total_count"] == 3 and search["has_more"] is True  # the total past one page, narrowed too
    assert paths_of(search["entries"]) == under(world, "Photos/photo.jpg")  # the largest
    for page in (times, fuzzy, is_file):
        assert paths_of(page["entries"]) == photos and page["total_count"] == 3
    async with world.session("ada") as c:
        everything = await call(c, "resource-fuzzy-match", {"name": "mixed", "field": "name", "pattern": "."})
    assert everything["total_count"] == len(SET_MEMBERS) + len(CHILD_MEMBERS)


@pytest.mark.parametrize("metric, lim_value, ada_value", [
    ("count", 3, 7),
    ("files", 3, 7),
    ("size", 5000 + 3000 + 10, 5000 + 3000 + 10 + 120 + 1500 + 40000 + 7),
])
@pytest.mark.anyio
async def test_resource_sum_adds_up_only_visible_entries(world, metric, lim_value, ada_value):
    for user, value, child_value, direct in (("lim", lim_value, 10 if metric == "size" else 1, 2),
                                             ("ada", ada_value, 17 if metric == "size" else 2, 5)):
        async with world.session(user) as c:
            total = await call(c, "resource-sum", {"name": "mixed", "metric": metric})
            stats = await read(c, "synthesis://resource-sets/mixed/stats")
        assert total["value"] == value, user
        assert total["breakdown"] == [{"name": "mixed-child", "value": child_value}]
        if metric == "count":
            assert total["direct_value"] == direct and stats["direct_count"] == direct
            assert stats["count"] == value
        if metric == "size":
            assert stats["total_size"] == value


@pytest.mark.parametrize("way", ["listed", "correlated"])  # set_queries.size_total's two ways
@pytest.mark.anyio
async def test_a_directory_member_above_a_limited_users_root_adds_nothing_to_their_size(world, way, monkeypatch):
    if way == "correlated":  # more directory members than it lists: a correlated test per entry instead
        monkeypatch.setattr(set_queries, "MAX_DIRECTORY_MEMBERS", 0)
    name = f"above-{way}"
    members = [str(world.tree), str(world.tree / "Photos" / "vacation"), str(world.tree / "Photos" / "photo.jpg"),
               str(world.tree / "Photos" / "vacation" / "beach.jpg")]
    async with world.session("ada") as c:
        await call(c, "resource-set-create", {"name": name})
        await call(c, "resource-set-modify", {"name": name, "operation": "add", "paths": members})
        everything = await call(c, "resource-sum", {"name": name, "metric": "size"})
        whole = await call(c, "inspect", {"path": str(world.tree)})
    async with world.session("lim") as c:
        mine = await call(c, "resource-sum", {"name": name, "metric": "size"})
    assert everything["value"] == whole["size"] > 10000
    assert mine["value"] == 5000 + 5000  # vacation (its subtree) and photo.jpg; beach.jpg is inside vacation


@pytest.mark.anyio
async def test_a_limited_user_running_a_query_saved_by_another_finds_only_their_entries(world):
    async with world.session("lim") as c:
        mine = await call(c, "query-execute", {"name": "every-file"})
    async with world.session("ada") as c:
        everyone = await call(c, "query-execute", {"name": "every-file"})
    assert paths_of(mine["entries"]) == under(world, "Photos/photo.jpg", "Photos/notes.txt",
                                              "Photos/vacation/beach.jpg", "Photos/vacation/sunset.jpg")
    assert mine["total"] == 4 and mine["hasMore"] is False
    assert everyone["total"] == 10 and paths_of(mine["entries"]) < paths_of(everyone["entries"])


@pytest.mark.anyio
async def test_metadata_and_duplicates_are_those_of_visible_entries(world):
    photo = str(world.tree / "Photos" / "photo.jpg")
    async with world.session("lim") as c:
        listing = await read(c, "synthesis://metadata?limit=100&offset=0&sort=path")
        groups = await read(c, "synthesis://metadata/duplicates")
        shared = await read(c, f"synthesis://metadata/{SHARED_HASH}")
        inspected = await call(c, "inspect", {"path": photo})
        outside = await c.call_tool("inspect", {"path": str(world.tree / "docs" / "readme.md")})
    assert [m["path"] for m in listing["metadata"]] == [photo] and listing["total"] == 1
    assert groups["groups"] == [] and groups["total"] == 0
    assert [e["path"] for e in shared["entries"]] == [photo] and shared["duplicates"] == 0
    assert inspected["hash"] == SHARED_HASH and inspected["duplicates"] == 0
    assert outside.is_error and str(world.tree / "docs") not in json.dumps(inspected)
    async with world.session("ada") as c:
        listing = await read(c, "synthesis://metadata?limit=100&offset=0&sort=path")
        groups = await read(c, "synthesis://metadata/duplicates")
        inspected = await call(c, "inspect", {"path": photo})
    assert listing["total"] == 3 and inspected["duplicates"] == 1
    assert groups["groups"][0]["paths"] == sorted(under(world, "Photos/photo.jpg", "docs/readme.md"))


@pytest.mark.anyio
async def test_a_hash_known_only_outside_reads_exactly_as_an_unknown_one(world):
    async with world.session("lim") as c:
        with pytest.raises(MCPError) as docs_only:
            await c.read_resource(f"synthesis://metadata/{DOCS_HASH}")
        with pytest.raises(MCPError) as unknown:
            await c.read_resource(f"synthesis://metadata/{UNKNOWN_HASH}")
    assert str(docs_only.value) == str(unknown.value).replace(UNKNOWN_HASH, DOCS_HASH)
    async with world.session("ada") as c:
        found = await read(c, f"synthesis://metadata/{DOCS_HASH}")
    assert [e["path"] for e in found["entries"]] == [str(world.tree / "docs" / "report_2024.pdf")]


# --- the store's side: the clause itself ----------------------------------------------------------------------------


def compiled(stmt: Any) -> str:
    return str(stmt.compile(compile_kwargs={"literal_binds": True}))


@pytest.fixture
def limit() -> Iterator[Any]:
    tokens = []

    def to(paths):
        tokens.append(visibility.set_visible(paths))

    yield to
    for token in reversed(tokens):
        visibility.reset(token)


def test_with_no_limit_the_clause_leaves_a_query_as_it_was():
    plain = select(T.c.id).where(T.c.kind == "file")
    assert visibility.visible() is None
    assert compiled(select(T.c.id).where(T.c.kind == "file", visibility.visible_clause(T.c.path))) == compiled(plain)


def test_a_limit_is_a_range_per_root_without_like_and_a_root_inside_another_is_dropped(limit):
    limit(["/home/user/Photos/", "/home/user/Photos/vacation", "/srv/a_b%"])
    assert visibility.visible() == ("/home/user/Photos", "/srv/a_b%")
    sql = compiled(select(T.c.id).where(visibility.visible_clause(T.c.path)))
    assert "LIKE" not in sql.upper()
    assert "entries.path > '/home/user/Photos/' AND entries.path < '/home/user/Photos0'" in sql
    assert "entries.path = '/srv/a_b%'" in sql and "vacation" not in sql
    assert visibility.shows("/srv/a_b%/x") and not visibility.shows("/srv/a_bc") and not visibility.shows(None)


def test_an_entry_outside_the_limit_reads_as_no_entry_and_a_limit_to_no_root_shows_none(engine, tree, limit):
    photos, docs = str(tree / "Photos"), str(tree / "docs")
    with engine.begin() as conn:
        upsert_entries(conn, [make_row(p, kind="directory", size=0, mtime=0, ctime=0, inode=None, scan_id=None,
                                       indexed_at=0) for p in (photos, docs)])
    limit([photos])
    assert get_entry(engine, path=photos) is not None and get_entry(engine, path=docs) is None
    assert count_entries(engine) == 1
    limit([])
    assert get_entry(engine, path=photos) is None and count_entries(engine) == 0
