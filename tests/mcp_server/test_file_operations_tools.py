"""rename-files, delete-files and move-files through an in-process MCP client (reference 000 examples)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert

from store import entries
from store.models import ResourceSet, SetMember
from tests.conftest import ToolFailed, call, index_sync


@pytest.fixture
async def indexed(app, tree):
    (tree / "old_name.txt").write_text("old")
    (tree / "temp.txt").write_text("temp")
    (tree / "old_folder" / "sub").mkdir(parents=True)
    (tree / "old_folder" / "sub" / "x.bin").write_bytes(b"12345")
    (tree / "Downloads").mkdir()
    (tree / "Downloads" / "file.pdf").write_bytes(b"%PDF" + b"0" * 96)
    index_sync(app, tree)
    return tree


def stored(app, path):
    return entries.get_entry(app.engine, path=str(path))


async def test_rename_files_reference_example(client, app, indexed):
    old, new = indexed / "old_name.txt", indexed / "new_name.txt"
    entry_id = stored(app, old)["id"]
    res = await call(client, "rename-files", {"renames": [{"from": str(old), "to": str(new)}]})
    assert res["dryRun"] is False and res["successCount"] == 1 and res["errorCount"] == 0
    item = res["results"][0]
    assert item["from"] == str(old) and item["to"] == str(new) and item["status"] == "success"
    assert item["kind"] == "file" and item["indexedEntries"] == 1
    assert new.read_text() == "old" and not old.exists()
    assert stored(app, new)["id"] == entry_id and stored(app, old) is None


async def test_delete_files_reference_example(client, app, indexed):
    res = await call(client, "delete-files", {"paths": [str(indexed / "temp.txt"), str(indexed / "old_folder")],
                                              "force": True})
    assert res["successCount"] == 2 and res["errorCount"] == 0
    assert [(r["path"], r["kind"], r["status"]) for r in res["results"]] == [
        (str(indexed / "temp.txt"), "file", "success"), (str(indexed / "old_folder"), "directory", "success")]
    assert res["results"][1]["indexedEntries"] == 3
    assert not (indexed / "temp.txt").exists() and not (indexed / "old_folder").exists()
    assert entries.count_subtree(app.engine, root=str(indexed / "old_folder")) == 0


async def test_move_files_reference_example_keeps_set_membership(client, app, indexed):
    src, dst = indexed / "Downloads" / "file.pdf", indexed / "Documents" / "file.pdf"
    with app.engine.begin() as conn:
        set_id = conn.execute(insert(ResourceSet.__table__).values(name="papers")).inserted_primary_key[0]
        conn.execute(insert(SetMember.__table__).values(set_id=set_id, entry_id=stored(app, src)["id"]))
    res = await call(client, "move-files", {"moves": [{"from": str(src), "to": str(dst)}]})
    item = res["results"][0]
    assert item["status"] == "success" and item["from"] == str(src) and item["to"] == str(dst)
    assert item["membershipsKept"] == 1 and item["createdDirectories"] == [str(indexed / "Documents")]
    assert dst.read_bytes().startswith(b"%PDF") and not src.exists()
    assert stored(app, dst)["parent"] == str(indexed / "Documents")
    assert stored(app, indexed / "Documents")["size"] == 100 and stored(app, indexed / "Downloads")["size"] == 0


async def test_dry_run_through_the_tools_changes_nothing(client, app, indexed):
    res = await call(client, "delete-files", {"paths": str(indexed / "old_folder"), "dryRun": True, "force": True})
    assert res["dryRun"] is True and res["results"][0]["status"] == "preview"
    res = await call(client, "move-files", {"moves": {"from": str(indexed / "temp.txt"), "to": str(indexed / "docs")},
                                            "dryRun": True})
    assert res["results"][0]["status"] == "preview" and res["results"][0]["to"] == str(indexed / "docs" / "temp.txt")
    assert (indexed / "old_folder" / "sub" / "x.bin").exists() and (indexed / "temp.txt").exists()
    assert not (indexed / "docs" / "temp.txt").exists()


async def test_a_single_string_or_object_is_accepted_where_an_array_is_expected(client, indexed):
    res = await call(client, "rename-files", {"renames": {"from": str(indexed / "temp.txt"), "to": "temp2.txt"}})
    assert res["results"][0]["to"] == str(indexed / "temp2.txt")
    res = await call(client, "delete-files", {"paths": str(indexed / "temp2.txt")})
    assert res["results"][0]["status"] == "success"


async def test_refusals_are_reported_per_item(client, indexed, tmp_path):
    res = await call(client, "move-files", {"moves": [
        {"from": str(indexed / "temp.txt"), "to": str(indexed / "old_name.txt")},
        {"from": str(indexed / "temp.txt"), "to": str(tmp_path / "out.txt")},
        {"from": str(indexed / "temp.txt"), "to": str(indexed / "docs" / "t.txt")},
    ]})
    errors = [r.get("error") or "" for r in res["results"]]
    assert "already exists" in errors[0] and "never overwrites" in errors[0]
    assert "outside the allowed roots" in errors[1] and str(tmp_path / "out.txt") in errors[1]
    assert res["results"][2]["status"] == "success" and res["errorCount"] == 2
    assert (indexed / "old_name.txt").read_text() == "old"


@pytest.mark.parametrize("tool, args, fragment", [
    ("move-files", {"moves": []}, "moves"),
    ("move-files", {"moves": [{"from": "/a", "to": "/b", "overwrite": True}]}, "overwrite"),
    ("rename-files", {"renames": [{"from": "/a"}]}, "to"),
    ("delete-files", {"paths": []}, "paths"),
])
async def test_malformed_calls_fail_naming_the_parameter(client, indexed, tool, args, fragment):
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, args)
    assert fragment in str(err.value)


async def test_schemas_and_annotations(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    rename = tools["rename-files"]
    assert rename.input_schema["required"] == ["renames"] and "dryRun" in rename.input_schema["properties"]
    assert "from" in str(rename.input_schema) and tools["move-files"].input_schema["required"] == ["moves"]
    delete = tools["delete-files"]
    assert set(delete.input_schema["properties"]) == {"paths", "dryRun", "force", "permanent"}
    assert delete.annotations.destructive_hint is True and rename.annotations.read_only_hint is False
