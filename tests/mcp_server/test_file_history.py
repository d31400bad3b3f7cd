"""file-history through MCP clients: the file tools answer their journal's callId, and file-history lists what a call,
a path or a plan execution did, newest first, refusing a call with no filter; on a guarded server each operation
names its caller, and a user limited to some roots sees only the operations on paths under them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from flows.media.hashing import hash_file
from store import file_journal
from store.file_journal import Origin
from tests.conftest import ToolFailed, call
from tests.mcp_server.guard.guarded import Guarded, guarded_server


async def test_file_history_lists_a_call_a_path_and_an_execution_newest_first(client, app, tree):
    readme, notes = tree / "docs" / "readme.md", tree / "Photos" / "notes.txt"
    readme_hash, notes_hash = hash_file(str(readme)), hash_file(str(notes))
    moved = await call(client, "move-files", {"moves": [{"from": str(readme), "to": str(tree / "new" / "r.md")}]})
    deleted = await call(client, "delete-files", {"paths": [str(notes), str(tree / "empty")], "permanent": True})
    preview = await call(client, "rename-files", {"renames": {"from": str(tree / "new" / "r.md"), "to": "x.md"},
                                                  "dryRun": True})
    assert moved["callId"] != deleted["callId"] and preview["callId"] is None
    file_journal.begin(app.engine, Origin.for_execution(7), op="copy", src=str(tree / "docs" / "report_2024.pdf"),
                       dst=str(tree / "new" / "report.pdf"))

    [move] = (await call(client, "file-history", {"callId": moved["callId"]}))["operations"]
    assert move == {**move, "op": "move", "from": str(readme), "to": str(tree / "new" / "r.md"), "kind": "file",
                    "state": "done", "origin": "tool", "tool": "move-files", "executionId": None,
                    "callId": moved["callId"], "caller": None, "error": None, "undoneAt": None, "undoOf": None}
    assert move["contentHash"] == readme_hash and move["time"].endswith("Z")
    page = await call(client, "file-history", {"callId": deleted["callId"]})
    assert [(o["op"], o["from"], o["to"], o["kind"]) for o in page["operations"]] == [
        ("delete", str(tree / "empty"), None, "directory"), ("delete", str(notes), None, "file")]
    assert [o["contentHash"] for o in page["operations"]] == [None, notes_hash]
    assert (page["count"], page["hasMore"], page["limit"], page["offset"]) == (2, False, 100, 0)

    in_new = await call(client, "file-history", {"path": str(tree / "new")})  # under it, as from or to
    assert [o["op"] for o in in_new["operations"]] == ["copy", "move"]
    first = await call(client, "file-history", {"path": str(tree), "limit": 2})
    assert [o["op"] for o in first["operations"]] == ["copy", "delete"] and first["hasMore"] is True
    rest = await call(client, "file-history", {"path": str(tree), "limit": 2, "offset": 2})
    assert [o["op"] for o in rest["operations"]] == ["delete", "move"] and rest["hasMore"] is False
    [copy] = (await call(client, "file-history", {"executionId": 7, "path": str(tree / "new")}))["operations"]
    assert (copy["origin"], copy["callId"], copy["state"], copy["tool"]) == ("plan", "execution-7", "intent", None)

    with pytest.raises(ToolFailed, match="needs at least one of path, executionId or callId"):
        await call(client, "file-history", {"limit": 5})
    with pytest.raises(ToolFailed, match="outside the allowed roots"):
        await call(client, "file-history", {"path": "/etc"})
    with pytest.raises(ToolFailed, match="limit"):
        await call(client, "file-history", {"callId": moved["callId"], "limit": 1001})


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[Guarded]:
    with guarded_server(tmp_path_factory.mktemp("history")) as g:
        yield g


async def history(c: Client, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    result = await c.call_tool("file-history", arguments)
    assert not result.is_error, getattr(result.content[0], "text", result.content)
    assert result.structured_content is not None
    return result.structured_content["operations"]


@pytest.mark.anyio
async def test_a_guarded_caller_is_named_and_a_limited_user_sees_only_its_roots(guarded):
    tree = guarded.tree
    async with guarded.session("ada") as c:
        result = await c.call_tool("move-files", {"moves": [
            {"from": str(tree / "Photos" / "photo.jpg"), "to": str(tree / "Photos" / "2024" / "photo.jpg")},
            {"from": str(tree / "docs" / "readme.md"), "to": str(tree / "docs" / "old" / "readme.md")}]})
        assert result.structured_content is not None, result.content
        call_id = result.structured_content["callId"]
        everything = await history(c, {"callId": call_id})
    assert [(o["from"], o["caller"]) for o in everything] == [(str(tree / "docs" / "readme.md"), "ada"),
                                                              (str(tree / "Photos" / "photo.jpg"), "ada")]
    async with guarded.session("lim") as c:  # an editor limited to Photos
        seen = await history(c, {"callId": call_id})
        refused = await c.call_tool("file-history", {"path": str(tree / "docs")})
    assert [o["to"] for o in seen] == [str(tree / "Photos" / "2024" / "photo.jpg")]
    assert refused.is_error and "outside the allowed roots" in refused.content[0].text


async def test_undo_puts_a_move_files_call_back_and_refuses_what_changed(client, app, tree):
    readme, notes = tree / "docs" / "readme.md", tree / "Photos" / "notes.txt"
    moved = await call(client, "move-files", {"moves": [{"from": str(readme), "to": str(tree / "u" / "r.md")},
                                                        {"from": str(notes), "to": str(tree / "u" / "n.txt")}]})
    (tree / "u" / "n.txt").write_text("changed after the move")
    dry = await call(client, "undo", {"callId": moved["callId"], "dryRun": True})
    assert (dry["wouldUndo"], dry["refused"]) == (1, 1) and (tree / "u" / "r.md").exists()
    done = await call(client, "undo", {"callId": moved["callId"]})
    assert (done["undone"], done["refused"]) == (1, 1), done
    [refused] = [r for r in done["results"] if r["status"] == "refused"]
    assert refused["from"] == str(tree / "u" / "n.txt") and "changed since" in refused["reason"]
    assert readme.exists() and not (tree / "u" / "r.md").exists()
    history = await call(client, "file-history", {"callId": done["callId"]})
    assert [(o["op"], o["tool"], o["state"]) for o in history["operations"]] == [("move", "undo", "done")]
    with pytest.raises(ToolFailed, match="exactly one of operationId"):
        await call(client, "undo", {})


async def test_undo_of_delete_files_puts_the_file_back_in_its_set(client, tree):
    notes = str(tree / "Photos" / "notes.txt")
    await call(client, "index", {"root": str(tree), "async": False})
    await call(client, "resource-set-create", {"name": "kept-by-undo"})
    await call(client, "resource-set-modify", {"name": "kept-by-undo", "operation": "add", "paths": [notes]})
    deleted = await call(client, "delete-files", {"paths": [notes]})
    assert (await call(client, "resource-set-get", {"name": "kept-by-undo"}))["entry_count"] == 0
    done = await call(client, "undo", {"callId": deleted["callId"]})
    assert (done["undone"], done["refused"]) == (1, 0), done
    assert done["results"][0]["restored"] == {"memberships": 1, "maps": 0}  # the answer says what came back
    got = await call(client, "resource-set-get", {"name": "kept-by-undo", "include_entries": True})
    assert [e["path"] for e in got["entries"]] == [notes]
