"""Moves across filesystems, on a real second volume (a tmpfs the test mounts inside the root): a plan's move onto
it copies, checks size and content hash, then removes the source, with the store following (same entry ids) and the
journal holding the hash; its undo brings the files back across; a copy that does not fit (the volume is full)
is that file's error, with the source kept and no partial copy left on the volume."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsl.model import Plan
from flows.core.roots import Roots
from flows.fileops.undo import undo
from flows.media.hashing import hash_file
from flows.plans.service import PlanService
from store import file_journal
from tests.flows.fileops.test_trash import mounted
from tests.flows.fileops.test_undo import ids
from tests.flows.index.checks import assert_store_consistent


@pytest.fixture
def usb(tree) -> Iterator[Path]:
    with mounted(tree / "usb", "size=1m") as path:
        yield path


@pytest.fixture
def service(engine, tree, usb, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "home-dir"))
    (tmp_path / "home-dir").mkdir()
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def run(service: PlanService, tree: Path, when: str) -> dict:
    p = Plan.from_object({"name": "to-usb", "sources": [{"name": "home", "type": "filesystem.index",
                                                         "config": {"path": str(tree)}}],
                          "rules": [{"name": "r", "when": when,
                                     "outcomes": [{"type": "move", "to": "usb/{mtime:%Y}/"}]}]})
    service.save(p, create=None)
    return service.execute(p, wait=True)


def test_a_plan_moves_files_onto_another_volume_and_undo_brings_them_back(service, engine, tree, usb):
    moved = {tree / "Photos" / "notes.txt", tree / "docs" / "deep" / "a" / "b" / "c.txt"}
    before = {p: (p.read_bytes(), hash_file(str(p))) for p in moved}
    was = ids(engine) if ids(engine) else {}
    row = run(service, tree, "extension = .txt")
    assert row["status"] == "success" and row["outcomes_applied"] == 2, row
    now = ids(engine)
    for src in moved:
        op = file_journal.history(engine, path=str(src))[0]
        dst = Path(op["dst"])
        assert op["state"] == "done" and op["content_hash"] == before[src][1]
        assert dst.parent.parent == usb and os.stat(dst).st_dev != os.stat(tree).st_dev  # on the other volume
        assert dst.read_bytes() == before[src][0] and not src.exists()
        assert now[str(dst)] == op["entry_id"] and (not was or was.get(str(src)) == op["entry_id"])
    assert not [n for n in os.listdir(usb / os.listdir(usb)[0]) if ".assay-partial-" in n]
    assert_store_consistent(engine, str(tree))

    done = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"), execution_id=row["execution_id"])
    assert (done["undone"], done["refused"]) == (2, 0), done
    back = ids(engine)
    for src in moved:
        assert src.read_bytes() == before[src][0] and back[str(src)] == now[str(file_journal.history(
            engine, path=str(src))[-1]["dst"])]
    assert not any(f for _, _, f in os.walk(usb))  # nothing left on the volume
    assert_store_consistent(engine, str(tree))


def test_a_file_the_volume_cannot_hold_is_that_files_error_and_its_source_is_kept(service, engine, tree, usb):
    big = tree / "docs" / "big.bin"
    big.write_bytes(os.urandom(2 * 1024 * 1024))  # 2 MB onto a 1 MB volume
    row = run(service, tree, "extension = .bin or name = readme.md")
    assert row["outcomes_applied"] == 1, row  # readme.md fits
    [op] = [o for o in file_journal.history(engine, path=str(big))]
    assert op["state"] == "failed" and "space" in (op["error"] or "").lower(), op
    assert big.stat().st_size == 2 * 1024 * 1024 and not (tree / "docs" / "readme.md").exists()
    assert [n for _, _, files in os.walk(usb) for n in files] == ["readme.md"]  # no partial copy of big.bin
    assert_store_consistent(engine, str(tree))
