"""trash-list and trash-empty through MCP clients: what delete-files put in the trash is listed (where from, where
now, when, still there?), emptied by id, by path, by age or all at once, with a dry run; what was emptied is gone
from the disk and the list and marked purged in the journal; on a guarded server a limited user sees only what came
from its roots and a viewer may list but not empty."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import ToolFailed, call
from tests.mcp_server.guard.guarded import Guarded, guarded_server


async def test_what_delete_files_trashed_is_listed_then_emptied_by_id_by_path_and_all(client, tree):
    readme, notes, photo = tree / "docs" / "readme.md", tree / "Photos" / "notes.txt", tree / "Photos" / "photo.jpg"
    sizes = {str(p): p.stat().st_size for p in (readme, notes, photo)}
    first = await call(client, "delete-files", {"paths": [str(readme), str(notes)]})
    second = await call(client, "delete-files", {"paths": [str(photo)]})
    listed = await call(client, "trash-list", {})
    items = {i["path"]: i for i in listed["items"]}
    assert set(items) == set(sizes) and listed["count"] == 3 and listed["hasMore"] is False
    assert listed["retentionDays"] == 30 and "30 days" in listed["retention"]
    for path, item in items.items():
        assert item["inTrash"] and os.path.exists(item["trashedTo"]) and item["size"] == sizes[path]
        assert item["tool"] == "delete-files" and item["trashedAt"].endswith("Z") and item["note"] is None
    assert items[str(photo)]["callId"] == second["callId"] and items[str(readme)]["callId"] == first["callId"]
    under = await call(client, "trash-list", {"path": str(tree / "Photos"), "limit": 1})
    assert [i["path"] for i in under["items"]] in ([str(notes)], [str(photo)]) and under["hasMore"] is True
    assert (await call(client, "trash-list", {"olderThanDays": 1}))["count"] == 0  # all trashed just now

    with pytest.raises(ToolFailed, match="needs what to empty"):
        await call(client, "trash-empty", {})
    with pytest.raises(ToolFailed, match="give it alone"):
        await call(client, "trash-empty", {"all": True, "path": str(tree)})
    readme_op = items[str(readme)]["operationId"]
    preview = await call(client, "trash-empty", {"operationIds": [readme_op], "dryRun": True})
    assert [(r["status"], r["bytesFreed"]) for r in preview["results"]] == [("preview", sizes[str(readme)])]
    assert os.path.exists(items[str(readme)]["trashedTo"])

    emptied = await call(client, "trash-empty", {"operationIds": [readme_op]})
    assert (emptied["purgedCount"], emptied["errorCount"], emptied["bytesFreed"]) == (1, 0, sizes[str(readme)])
    assert not os.path.lexists(items[str(readme)]["trashedTo"]) and not readme.exists()
    [op] = (await call(client, "file-history", {"callId": first["callId"], "path": str(readme)}))["operations"]
    assert op["state"] == "purged" and "trash-empty" in op["error"] and op["undoneAt"]
    with pytest.raises(ToolFailed, match=f"operation\\(s\\) {readme_op} are not in the trash"):
        await call(client, "trash-empty", {"operationIds": [readme_op]})

    os.unlink(items[str(photo)]["trashedTo"])  # the desktop emptied it meanwhile
    listed = await call(client, "trash-list", {})
    gone = {i["path"]: i for i in listed["items"]}[str(photo)]
    assert gone["inTrash"] is False and "emptied outside assay" in gone["note"]
    by_path = await call(client, "trash-empty", {"path": str(tree / "Photos")})
    assert sorted((r["path"], r["status"]) for r in by_path["results"]) == [(str(notes), "purged"),
                                                                           (str(photo), "gone")]
    assert (await call(client, "trash-list", {}))["count"] == 0
    assert (await call(client, "trash-empty", {"all": True}))["purgedCount"] == 0


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[Guarded]:
    with guarded_server(tmp_path_factory.mktemp("trash")) as g:
        yield g


@pytest.mark.anyio
async def test_a_limited_user_lists_only_its_roots_and_a_viewer_may_list_but_not_empty(guarded):
    tree = guarded.tree
    async with guarded.session("ada") as c:
        result = await c.call_tool("delete-files", {"paths": [str(tree / "Photos" / "photo.jpg"),
                                                              str(tree / "docs" / "readme.md")]})
        assert not result.is_error, result.content
    async with guarded.session("lim") as c:  # an editor limited to Photos
        seen = await c.call_tool("trash-list", {})
    assert seen.structured_content is not None, seen.content
    assert [i["path"] for i in seen.structured_content["items"]] == [str(tree / "Photos" / "photo.jpg")]
    assert [i["caller"] for i in seen.structured_content["items"]] == ["ada"]
    async with guarded.session("vera") as c:  # a viewer
        listed = await c.call_tool("trash-list", {})
        names = {t.name for t in (await c.list_tools()).tools}
        with pytest.raises(MCPError, match="unknown tool 'trash-empty'"):
            await c.call_tool("trash-empty", {"all": True})
    assert listed.structured_content is not None and listed.structured_content["count"] == 2
    assert "trash-list" in names and "trash-empty" not in names
