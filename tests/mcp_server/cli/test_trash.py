"""`assay trash`, run as a separate process: what delete-files trashed is listed, emptied in a dry run (nothing
goes), then by operation (its file is gone from the trash and the list); bad input exits 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

from flows.fileops.trashing import trash_one
from store.engine import make_engine
from store.file_journal import Origin
from tests.conftest import make_tree
from tests.mcp_server.test_cli import assay


def test_list_and_empty_the_trash_from_the_command_line(tmp_path: Path, monkeypatch):
    tree = make_tree(tmp_path / "home" / "user")
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "home"))
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'assay.db'}")
    try:
        origin = Origin.for_tool("delete-files")
        gone = [trash_one(engine, origin, str(tree / name))[0] for name in ("docs/readme.md", "Photos/notes.txt")]
    finally:
        engine.dispose()
    listed = assay(tmp_path, "trash", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert [i["path"] for i in items] == [str(tree / "docs" / "readme.md"), str(tree / "Photos" / "notes.txt")]
    text = assay(tmp_path, "trash", "list", "--path", str(tree / "Photos"))
    assert text.returncode == 0 and text.stdout.startswith("1 item(s) in the trash") and "notes.txt" in text.stdout
    dry = assay(tmp_path, "trash", "empty", "--all", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.startswith("would delete 2 item(s)"), dry.stdout + dry.stderr
    assert all(os.path.exists(g.path) for g in gone)
    done = assay(tmp_path, "trash", "empty", "--operation", str(items[0]["operationId"]))
    assert done.returncode == 0 and done.stdout.startswith("deleted 1 item(s)"), done.stdout + done.stderr
    assert not os.path.exists(gone[0].path) and os.path.exists(gone[1].path)
    assert [i["path"] for i in json.loads(assay(tmp_path, "trash", "list", "--json").stdout)["items"]] == [
        str(tree / "Photos" / "notes.txt")]
    bad = assay(tmp_path, "trash", "empty")
    assert bad.returncode == 2 and "needs what to empty" in bad.stderr
    worse = assay(tmp_path, "trash", "list", "--all")
    assert worse.returncode == 2 and "are for `assay trash empty`" in worse.stderr
